//! Version 6: the metadata is one sequential run from the file's start,
//! then options and the per-CPU data table ("flyrecord").

use super::options::{handle_option, opt};
use super::{header_info, parse_cmdlines, BufferInfo, CpuData, Parts, Seq, TraceDatMeta};
use crate::bytes::{Bytes, Endian};
use crate::error::{ReadError, ReadResult};
use crate::ftrace::printk::parse_printk_formats;
use crate::input::read_at;
use std::fs::File;

/// v6: metadata is one sequential run at the start of the file.
pub(super) fn read_v6(
    seq: &mut Seq<'_>,
    file: &File,
    meta: &mut TraceDatMeta,
    parts: &mut Parts,
) -> ReadResult<()> {
    let path = seq.path;
    let fs = meta.file_size;
    let endian = meta.endian;
    // header_page + header_event: tags and 8-byte sizes.
    let mut blob = Vec::new();
    for tag_len in [12u64, 13] {
        blob.extend(seq.take(tag_len, "header tag", fs)?);
        let n = seq.u64("header size", fs)?;
        blob.extend(if endian == Endian::Little {
            n.to_le_bytes()
        } else {
            n.to_be_bytes()
        });
        blob.extend(seq.take(n, "header text", fs)?);
    }
    let base = seq.pos - blob.len() as u64;
    header_info(&mut Bytes::new(&blob, base, endian, path), parts, path)?;
    // ftrace formats
    let n = seq.u32("ftrace format count", fs)?;
    for _ in 0..n {
        let off = seq.pos;
        let len = seq.u64("ftrace format size", fs)?;
        let text = String::from_utf8_lossy(&seq.take(len, "ftrace format", fs)?).into_owned();
        parts.add_format("ftrace", &text, off, path);
    }
    let systems = seq.u32("system count", fs)?;
    for _ in 0..systems {
        let sys = seq.cstr("system name")?;
        let n = seq.u32("format count", fs)?;
        for _ in 0..n {
            let off = seq.pos;
            let len = seq.u64("event format size", fs)?;
            let text = String::from_utf8_lossy(&seq.take(len, "event format", fs)?).into_owned();
            parts.add_format(&sys, &text, off, path);
        }
    }
    let n = seq.u32("kallsyms size", fs)?;
    if n > 0 {
        meta.kallsyms = Some(super::KallsymsAt::Plain {
            offset: seq.pos,
            len: n as u64,
        });
    }
    seq.skip(n as u64, "kallsyms", fs)?;
    let n = seq.u32("printk size", fs)?;
    parts.printk = parse_printk_formats(&String::from_utf8_lossy(&seq.take(
        n as u64,
        "printk formats",
        fs,
    )?));
    let n = seq.u64("cmdlines size", fs)?;
    parts.cmdlines = parse_cmdlines(&String::from_utf8_lossy(&seq.take(n, "cmdlines", fs)?));
    meta.cpus = seq.u32("cpu count", fs)?;
    if meta.cpus > 65536 {
        return Err(ReadError::corrupt(
            path,
            seq.pos - 4,
            "corrupt-header",
            format!("cpu count {}", meta.cpus),
        ));
    }
    let mut instances: Vec<(String, u64)> = Vec::new();
    loop {
        let tag_off = seq.pos;
        let tag = seq.take(10, "options/flyrecord tag", fs)?;
        if tag.starts_with(b"options") {
            loop {
                let id = {
                    let b = seq.take(2, "option id", fs)?;
                    endian.u16([b[0], b[1]])
                };
                if id == opt::DONE {
                    break;
                }
                let size = seq.u32("option size", fs)?;
                let off = seq.pos;
                let data = seq.take(size as u64, "option data", fs)?;
                handle_option(id, &data, off, meta, parts, &mut instances, path, file)?;
            }
        } else if tag.starts_with(b"flyrecord") {
            let mut cpus = Vec::with_capacity(meta.cpus as usize);
            for cpu in 0..meta.cpus {
                let offset = seq.u64("cpu data offset", fs)?;
                let size = seq.u64("cpu data size", fs)?;
                cpus.push(CpuData { cpu, offset, size });
            }
            meta.buffers.insert(
                0,
                BufferInfo {
                    name: String::new(),
                    clock: meta.clock.clone(),
                    page_size: meta.page_size,
                    cpus,
                    compressed: false,
                    latency: false,
                },
            );
            break;
        } else if tag.starts_with(b"latency") {
            meta.buffers.insert(
                0,
                BufferInfo {
                    name: String::new(),
                    clock: meta.clock.clone(),
                    page_size: meta.page_size,
                    cpus: vec![],
                    compressed: false,
                    latency: true,
                },
            );
            break;
        } else {
            return Err(ReadError::corrupt(
                path,
                tag_off,
                "corrupt-header",
                "expected \"options\", \"flyrecord\" or \"latency\"",
            ));
        }
    }
    // v6 instances: the BUFFER option points at a table of (offset, size) per CPU.
    for (name, mut offset) in instances {
        // trace-cmd writes the instance's own "flyrecord" tag (after any
        // "options" of the instance) before its CPU table
        let tag = read_at(file, path, offset, 10, fs, "instance tag")?;
        if tag.starts_with(b"flyrecord") {
            offset += 10;
        } else if tag.starts_with(b"options") || tag.starts_with(b"latency") {
            let w = format!(
                "{}: at byte {offset}: instance {name:?}: options/latency data not decoded; skipped",
                path.display()
            );
            meta.warnings.push(w.clone());
            meta.problems.push(w);
            continue;
        }
        let table = read_at(
            file,
            path,
            offset,
            16 * meta.cpus as u64,
            fs,
            "instance cpu table",
        )?;
        let mut b = Bytes::new(&table, offset, endian, path);
        let mut cpus = Vec::new();
        for cpu in 0..meta.cpus {
            let o = b.u64("cpu data offset")?;
            let s = b.u64("cpu data size")?;
            cpus.push(CpuData {
                cpu,
                offset: o,
                size: s,
            });
        }
        meta.buffers.push(BufferInfo {
            name,
            clock: meta.clock.clone(),
            page_size: meta.page_size,
            cpus,
            compressed: false,
            latency: false,
        });
    }
    Ok(())
}
