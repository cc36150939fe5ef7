//! The perf.data header: the file header, the attribute table with each
//! attribute's sample ids, and the feature sections after the data (the
//! tracing data's event formats, hostname, OS release, CPUs, event names).

use super::PerfSummary;
use crate::bytes::{Bytes, Endian};
use crate::error::{ReadError, ReadResult};
use crate::ftrace::format::{parse_format, EventFormat};
use crate::input::read_at;
use std::collections::HashMap;
use std::fs::File;
use std::path::Path;

/// One `perf_event_attr` with its sample ids.
#[derive(Clone, Debug)]
pub struct Attr {
    /// PERF_TYPE_*.
    pub kind: u32,
    /// Event config (tracepoint id for tracepoints).
    pub config: u64,
    /// sample_type bits.
    pub sample_type: u64,
    /// read_format bits.
    pub read_format: u64,
    /// Name from the EVENT_DESC feature, if any.
    pub name: String,
}

/// What the header says, for reading the data section.
pub(super) struct Header {
    /// The attributes, in file order.
    pub attrs: Vec<Attr>,
    /// Sample id → index into `attrs`.
    pub id_to_attr: HashMap<u64, usize>,
    /// The ftrace event formats from the tracing-data feature.
    pub formats: Vec<EventFormat>,
    /// The traced kernel's long size (from the tracing data's header_page).
    pub long: usize,
    /// The data section: offset and size.
    pub data_off: u64,
    /// The data section's size in bytes.
    pub data_len: u64,
}

/// Read everything but the data section of `f` (`size` bytes long); the
/// summary gets the host features and any warnings.
pub(super) fn read_header(
    f: &File,
    path: &Path,
    size: u64,
    s: &mut PerfSummary,
) -> ReadResult<Header> {
    if size < 104 {
        return Err(ReadError::NotThisFormat {
            path: path.into(),
            expected: "perf.data (PERFILE2)",
        });
    }
    let head = read_at(f, path, 0, 104, size, "header")?;
    if &head[0..8] != b"PERFILE2" {
        return Err(ReadError::NotThisFormat {
            path: path.into(),
            expected: "perf.data (PERFILE2)",
        });
    }
    let mut h = Bytes::new(&head, 0, Endian::Little, path);
    h.skip(8, "magic")?;
    let _hsize = h.u64("header size")?;
    let attr_size = h.u64("attr size")?;
    let (attrs_off, attrs_len) = (h.u64("attrs offset")?, h.u64("attrs size")?);
    let (data_off, data_len) = (h.u64("data offset")?, h.u64("data size")?);
    h.skip(16, "event types")?;
    let feat = h.take(32, "features")?.to_vec();
    if !(64..=4096).contains(&attr_size) || attrs_len % attr_size != 0 {
        return Err(ReadError::corrupt(
            path,
            16,
            "corrupt-header",
            format!("attr size {attr_size} / attrs section {attrs_len}"),
        ));
    }
    // attributes and their ids
    let table = read_at(f, path, attrs_off, attrs_len, size, "attrs")?;
    let mut attrs = Vec::new();
    let mut id_to_attr: HashMap<u64, usize> = HashMap::new();
    for (i, chunk) in table.chunks(attr_size as usize).enumerate() {
        let mut b = Bytes::new(
            chunk,
            attrs_off + i as u64 * attr_size,
            Endian::Little,
            path,
        );
        let kind = b.u32("type")?;
        b.u32("attr size")?;
        let config = b.u64("config")?;
        b.u64("period")?;
        let sample_type = b.u64("sample type")?;
        let read_format = b.u64("read format")?;
        let ids_at = chunk.len() - 16;
        let mut ib = Bytes::new(&chunk[ids_at..], 0, Endian::Little, path);
        let (ioff, ilen) = (ib.u64("ids offset")?, ib.u64("ids size")?);
        let ids = read_at(f, path, ioff, ilen, size, "ids")?;
        for id in ids.chunks_exact(8) {
            id_to_attr.insert(u64::from_le_bytes(id.try_into().expect("8")), i);
        }
        attrs.push(Attr {
            kind,
            config,
            sample_type,
            read_format,
            name: format!("{kind}:{config}"),
        });
    }
    if attrs.is_empty() {
        return Err(ReadError::corrupt(
            path,
            attrs_off,
            "corrupt-header",
            "no event attributes",
        ));
    }
    // feature sections follow the data section, one pair per set bit
    let mut formats = Vec::new();
    let mut long = 8;
    let bits: Vec<usize> = (0..256)
        .filter(|&i| feat[i / 8] >> (i % 8) & 1 == 1)
        .collect();
    let ft_at = data_off.saturating_add(data_len);
    match read_at(
        f,
        path,
        ft_at,
        16 * bits.len() as u64,
        size,
        "feature table",
    ) {
        Ok(ft) => {
            // sections past the end of the file: one line for them all
            let mut past_end = Vec::new();
            for (k, &bit) in bits.iter().enumerate() {
                let off = u64::from_le_bytes(ft[16 * k..16 * k + 8].try_into().expect("8"));
                let len = u64::from_le_bytes(ft[16 * k + 8..16 * k + 16].try_into().expect("8"));
                let Ok(sec) = read_at(f, path, off, len, size, "feature") else {
                    past_end.push(bit.to_string());
                    continue;
                };
                let mut b = Bytes::new(&sec, off, Endian::Little, path);
                match bit {
                    1 => match tracing_formats(&sec, off, path) {
                        Ok((fm, l)) => {
                            formats = fm;
                            long = l;
                        }
                        Err(e) => s.problem(format!(
                            "{e}: tracing data unreadable; no event formats, tracepoint samples stored untyped"
                        )),
                    },
                    3 => s.hostname = perf_string(&mut b).ok(),
                    4 => s.osrelease = perf_string(&mut b).ok(),
                    7 => {
                        let _avail = b.u32("nr cpus available").unwrap_or(0);
                        s.cpus = b.u32("nr cpus online").unwrap_or(0);
                    }
                    12 => {
                        // EVENT_DESC: names for the attributes, matched by id
                        if let Err(e) = event_names(&mut b, &id_to_attr, &mut attrs) {
                            s.problem(format!(
                                "{e}: event descriptions end here; the attributes not yet named keep kind:config names"
                            ));
                        }
                    }
                    _ => {}
                }
            }
            if !past_end.is_empty() {
                s.problem(format!(
                    "{}: at byte {size}: feature sections {} point past the end of the file (cut short?); skipped{}",
                    path.display(),
                    past_end.join(", "),
                    if past_end.iter().any(|b| b == "1") {
                        ", with the tracing data's event formats"
                    } else {
                        ""
                    }
                ));
            }
        }
        // a file cut inside its data section: said where the data ends
        Err(_) if ft_at > size => {}
        Err(e) if !bits.is_empty() => s.problem(format!(
            "{e}: the feature table is unreadable; host features and event formats skipped"
        )),
        Err(_) => {}
    }
    s.attrs = attrs
        .iter()
        .map(|a| (a.name.clone(), a.kind, a.config))
        .collect();
    Ok(Header {
        attrs,
        id_to_attr,
        formats,
        long,
        data_off,
        data_len,
    })
}

/// The EVENT_DESC feature: each attribute's name, matched by its ids.
/// Counts come from the file: every step reads bytes or ends with the
/// error, so a damaged count cannot spin (it did, 4 billion times).
fn event_names(
    b: &mut Bytes<'_>,
    id_to_attr: &HashMap<u64, usize>,
    attrs: &mut [Attr],
) -> ReadResult<()> {
    let n = b.u32("event count")?;
    let asz = b.u32("attr size")? as usize;
    for _ in 0..n {
        b.skip(asz, "attr")?;
        let nr = b.u32("id count")?;
        let name = perf_string(b)?;
        for _ in 0..nr {
            if let Some(&a) = id_to_attr.get(&b.u64("id")?) {
                attrs[a].name = name.clone();
            }
        }
    }
    Ok(())
}

fn perf_string(b: &mut Bytes<'_>) -> ReadResult<String> {
    let n = b.u32("string length")? as usize;
    let raw = b.take(n, "string")?;
    Ok(String::from_utf8_lossy(raw.split(|&c| c == 0).next().unwrap_or(&[])).into_owned())
}

/// Event formats from the tracing-data feature (trace.dat-style header).
fn tracing_formats(data: &[u8], base: u64, path: &Path) -> ReadResult<(Vec<EventFormat>, usize)> {
    let mut b = Bytes::new(data, base, Endian::Little, path);
    if b.take(10, "tracing magic")? != b"\x17\x08\x44tracing" {
        return Err(b.corrupt("corrupt-header", "tracing data lacks its magic"));
    }
    b.cstr("tracing version")?;
    let endian = if b.u8("endian")? == 1 {
        Endian::Big
    } else {
        Endian::Little
    };
    b.set_endian(endian);
    let _user_long = b.u8("long size")?;
    b.u32("page size")?;
    let mut long = 8;
    for tag in ["header_page\0", "header_event\0"] {
        if b.take(tag.len(), "header tag")? != tag.as_bytes() {
            return Err(b.corrupt(
                "corrupt-header",
                format!("tracing data: expected {}", tag.trim_end_matches('\0')),
            ));
        }
        let text = b.sized_text(8, tag)?;
        if tag.starts_with("header_page") {
            if let Ok(hp) = crate::ftrace::format::parse_header_page(&text) {
                long = hp.commit_size;
            }
        }
    }
    let mut formats = Vec::new();
    let n = b.u32("ftrace format count")?;
    for _ in 0..n {
        let t = b.sized_text(8, "ftrace format")?;
        if let Ok(f) = parse_format("ftrace", &t) {
            formats.push(f);
        }
    }
    let systems = b.u32("system count")?;
    for _ in 0..systems {
        let sys = b.cstr("system")?;
        let n = b.u32("format count")?;
        for _ in 0..n {
            let t = b.sized_text(8, "event format")?;
            if let Ok(f) = parse_format(&sys, &t) {
                formats.push(f);
            }
        }
    }
    Ok((formats, long))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_damaged_event_count_ends_at_the_end_of_the_section() {
        // 4 billion events claimed, three (empty) present: each step reads
        // bytes, so the walk stops at the section's end with an error
        let mut sec = Vec::new();
        sec.extend(u32::MAX.to_le_bytes());
        sec.extend(0u32.to_le_bytes());
        for _ in 0..3 {
            sec.extend(0u32.to_le_bytes()); // ids
            sec.extend(0u32.to_le_bytes()); // name length
        }
        let path = Path::new("x.perf.data");
        let mut b = Bytes::new(&sec, 0, Endian::Little, path);
        let err = event_names(&mut b, &HashMap::new(), &mut []).unwrap_err();
        assert!(err.to_string().contains("id count"), "{err}");
        // and a count of ids past the end likewise
        let mut sec = Vec::new();
        sec.extend(1u32.to_le_bytes());
        sec.extend(0u32.to_le_bytes());
        sec.extend(u32::MAX.to_le_bytes());
        sec.extend(0u32.to_le_bytes());
        sec.extend(7u64.to_le_bytes());
        let mut b = Bytes::new(&sec, 0, Endian::Little, path);
        assert!(event_names(&mut b, &HashMap::new(), &mut []).is_err());
    }
}
