//! Version 7: sections (id, flags, size), compressed or not, located
//! through a chain of options sections.

use super::options::{handle_option, opt};
use super::{
    decompress, event_formats, header_info, parse_cmdlines, parse_format_list, BufferInfo, CpuData,
    Parts, TraceDatMeta,
};
use crate::bytes::Bytes;
use crate::error::{ReadError, ReadResult};
use crate::ftrace::printk::parse_printk_formats;
use crate::input::read_at;
use std::fs::File;

/// Read a v7 section header; returns (id, compressed, data offset, size).
pub(super) fn section_header(
    file: &File,
    meta: &TraceDatMeta,
    at: u64,
) -> ReadResult<(u16, bool, u64, u64)> {
    let raw = read_at(file, &meta.path, at, 16, meta.file_size, "section header")?;
    let e = meta.endian;
    let id = e.u16([raw[0], raw[1]]);
    let flags = e.u16([raw[2], raw[3]]);
    let size = e.u64(raw[8..16].try_into().expect("8 bytes"));
    if size > meta.file_size.saturating_sub(at + 16) {
        return Err(ReadError::corrupt(
            &meta.path,
            at,
            "past-eof",
            format!("section {id} of {size} bytes runs past the end of the file"),
        ));
    }
    Ok((id, flags & 1 != 0, at + 16, size))
}

/// The body of a v7 section, decompressed when flagged.
pub(super) fn section_body(
    file: &File,
    meta: &TraceDatMeta,
    at: u64,
) -> ReadResult<(u16, Vec<u8>, u64)> {
    let (id, compressed, data_at, size) = section_header(file, meta, at)?;
    let raw = read_at(file, &meta.path, data_at, size, meta.file_size, "section")?;
    if !compressed {
        return Ok((id, raw, data_at));
    }
    let mut b = Bytes::new(&raw, data_at, meta.endian, &meta.path);
    let csize = b.u32("compressed size")? as usize;
    let usize_ = b.u32("uncompressed size")? as usize;
    let body = b.take(csize, "compressed data")?;
    Ok((
        id,
        decompress(
            &meta.compression,
            body,
            usize_,
            &meta.path,
            data_at,
            meta.budget,
        )?,
        data_at,
    ))
}

pub(super) fn read_v7_section(
    file: &File,
    meta: &mut TraceDatMeta,
    parts: &mut Parts,
    option: u16,
    at: u64,
) -> ReadResult<()> {
    let (id, body, base) = section_body(file, meta, at)?;
    if id != option {
        let w = format!(
            "{}: at byte {at}: section has id {id}, its option said {option}; read as the option says",
            meta.path.display()
        );
        meta.warnings.push(w.clone());
        meta.problems.push(w);
    }
    let path = meta.path.clone();
    let mut b = Bytes::new(&body, base, meta.endian, &path);
    match option {
        opt::HEADER_INFO => header_info(&mut b, parts, &path)?,
        opt::FTRACE_EVENTS => parse_format_list(&mut b, "ftrace", parts, &path)?,
        opt::EVENT_FORMATS => event_formats(&mut b, parts, &path)?,
        opt::PRINTK => parts.printk = parse_printk_formats(&b.sized_text(4, "printk formats")?),
        opt::CMDLINES => parts.cmdlines = parse_cmdlines(&b.sized_text(8, "cmdlines")?),
        _ => {}
    }
    Ok(())
}

pub(super) fn read_v7_buffer(
    file: &File,
    meta: &TraceDatMeta,
    id: u16,
    offset: u64,
    name: String,
    b: &mut Bytes<'_>,
) -> ReadResult<BufferInfo> {
    let clock = b.cstr("buffer clock")?;
    let (_, compressed, _, _) = section_header(file, meta, offset)?;
    if id == opt::BUFFER_TEXT {
        return Ok(BufferInfo {
            name,
            clock,
            page_size: meta.page_size,
            cpus: vec![],
            compressed,
            latency: true,
        });
    }
    // Newer trace-cmd writes a per-buffer page size before the CPU count;
    // the two layouts differ in length by exactly 4 bytes (20 per CPU).
    let rest = b.remaining();
    let mut page_size = meta.page_size;
    if rest >= 8 && (rest - 8).is_multiple_of(20) && (rest < 4 || !(rest - 4).is_multiple_of(20)) {
        page_size = b.u32("buffer page size")?;
        if !(64..=(1 << 24)).contains(&page_size) || !page_size.is_power_of_two() {
            return Err(b.corrupt("corrupt-header", format!("buffer page size {page_size}")));
        }
    }
    let n = b.u32("buffer cpu count")?;
    let mut cpus = Vec::new();
    for _ in 0..n {
        let cpu = b.u32("cpu id")?;
        let off = b.u64("cpu data offset")?;
        let size = b.u64("cpu data size")?;
        cpus.push(CpuData {
            cpu,
            offset: off,
            size,
        });
    }
    Ok(BufferInfo {
        name,
        clock,
        page_size,
        cpus,
        compressed,
        latency: false,
    })
}

/// v7: follow the chain of options sections from `first`.
pub(super) fn read_v7(
    file: &File,
    meta: &mut TraceDatMeta,
    parts: &mut Parts,
    first: u64,
) -> ReadResult<()> {
    let mut at = first;
    let mut seen = std::collections::HashSet::new();
    let path = meta.path.clone();
    while at != 0 {
        if !seen.insert(at) {
            return Err(ReadError::corrupt(
                &path,
                at,
                "corrupt-header",
                "options sections form a loop",
            ));
        }
        let (id, body, base) = match section_body(file, meta, at) {
            Ok(section) => section,
            // trace-cmd writes the options section that locates each CPU's
            // ring-buffer data (BUFFER) after that data: a file cut in the
            // data has lost it, and nothing else says which bytes are whose
            Err(ReadError::Corrupt { tag: "past-eof", .. }) if at != first => {
                return Err(ReadError::corrupt(
                    &path,
                    at,
                    "truncated",
                    format!(
                        "file is truncated ({} bytes): the options section here, written after the ring-buffer data to say where it lies, is missing",
                        meta.file_size
                    ),
                ))
            }
            Err(e) => return Err(e),
        };
        if id != opt::DONE {
            return Err(ReadError::corrupt(
                &path,
                at,
                "corrupt-header",
                format!("expected an options section, found section id {id}"),
            ));
        }
        let mut b = Bytes::new(&body, base, meta.endian, &path);
        let mut next = 0;
        let mut dummy = Vec::new();
        loop {
            if b.remaining() == 0 {
                break;
            }
            let oid = b.u16("option id")?;
            let size = b.u32("option size")? as usize;
            let off = b.offset();
            let data = b.take(size, "option data")?;
            if oid == opt::DONE {
                if data.len() >= 8 {
                    next = meta.endian.u64(data[..8].try_into().expect("8 bytes"));
                }
                break;
            }
            handle_option(oid, data, off, meta, parts, &mut dummy, &path, file)?;
        }
        at = next;
    }
    if meta.cpus == 0 {
        meta.cpus = meta
            .buffers
            .iter()
            .flat_map(|b| b.cpus.iter().map(|c| c.cpu + 1))
            .max()
            .unwrap_or(0);
    }
    Ok(())
}
