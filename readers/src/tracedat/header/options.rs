//! The options of either version: what each one sets in the metadata.

use super::v7::{read_v7_buffer, read_v7_section, section_header};
use super::{Parts, TraceDatMeta, Tsc2Nsec};
use crate::bytes::Bytes;
use crate::error::ReadResult;
use std::fs::File;
use std::path::Path;

/// Option ids (trace-cmd.dat(5)).
pub(super) mod opt {
    pub const DONE: u16 = 0;
    pub const DATE: u16 = 1;
    pub const CPUSTAT: u16 = 2;
    pub const BUFFER: u16 = 3;
    pub const TRACECLOCK: u16 = 4;
    pub const UNAME: u16 = 5;
    pub const HOOK: u16 = 6;
    pub const OFFSET: u16 = 7;
    pub const CPUCOUNT: u16 = 8;
    pub const VERSION: u16 = 9;
    pub const PROCMAPS: u16 = 10;
    pub const TRACEID: u16 = 11;
    pub const TIME_SHIFT: u16 = 12;
    pub const GUEST: u16 = 13;
    pub const TSC2NSEC: u16 = 14;
    pub const STRINGS: u16 = 15;
    pub const HEADER_INFO: u16 = 16;
    pub const FTRACE_EVENTS: u16 = 17;
    pub const EVENT_FORMATS: u16 = 18;
    pub const KALLSYMS: u16 = 19;
    pub const PRINTK: u16 = 20;
    pub const CMDLINES: u16 = 21;
    pub const BUFFER_TEXT: u16 = 22;
}

/// Apply option `id` (its `data` at file offset `off`) to `meta`; a v6
/// file's BUFFER options are collected in `v6_instances` for the caller.
#[allow(clippy::too_many_arguments)]
pub(super) fn handle_option(
    id: u16,
    data: &[u8],
    off: u64,
    meta: &mut TraceDatMeta,
    parts: &mut Parts,
    v6_instances: &mut Vec<(String, u64)>,
    path: &Path,
    file: &File,
) -> ReadResult<()> {
    let endian = meta.endian;
    let text =
        || String::from_utf8_lossy(data.split(|&c| c == 0).next().unwrap_or(&[])).into_owned();
    let mut b = Bytes::new(data, off, endian, path);
    let name = match id {
        opt::DATE => {
            meta.date = Some(text());
            "DATE"
        }
        opt::CPUSTAT => {
            meta.cpustats.push(text());
            "CPUSTAT"
        }
        opt::BUFFER | opt::BUFFER_TEXT => {
            let offset = b.u64("buffer offset")?;
            let name = b.cstr("buffer name")?;
            if meta.version == 6 {
                if !name.is_empty() {
                    v6_instances.push((name, offset));
                }
            } else {
                let info = read_v7_buffer(file, meta, id, offset, name, &mut b)?;
                if info.name.is_empty() {
                    meta.buffers.insert(0, info);
                } else {
                    meta.buffers.push(info);
                }
            }
            if id == opt::BUFFER {
                "BUFFER"
            } else {
                "BUFFER_TEXT"
            }
        }
        opt::TRACECLOCK => {
            // "[local] global counter": the bracketed one is in force.
            let t = text();
            if let Some(c) = t.split('[').nth(1).and_then(|r| r.split(']').next()) {
                meta.clock = c.to_string();
            }
            "TRACECLOCK"
        }
        opt::UNAME => {
            meta.uname = Some(text());
            "UNAME"
        }
        opt::HOOK => "HOOK",
        opt::OFFSET => {
            let t = text();
            let t = t.trim();
            meta.ts_offset += if let Some(h) = t.strip_prefix("0x") {
                i64::from_str_radix(h, 16).unwrap_or(0)
            } else {
                t.parse().unwrap_or(0)
            };
            "OFFSET"
        }
        opt::CPUCOUNT => {
            if data.len() >= 4 {
                meta.cpus = b.u32("cpu count")?;
            }
            "CPUCOUNT"
        }
        opt::VERSION => {
            meta.tracecmd_version = Some(text());
            "VERSION"
        }
        opt::PROCMAPS => "PROCMAPS",
        opt::TRACEID => "TRACEID",
        opt::TIME_SHIFT => "TIME_SHIFT",
        opt::GUEST => "GUEST",
        opt::TSC2NSEC => {
            if data.len() >= 16 {
                let mult = b.u32("tsc2nsec mult")?;
                let shift = b.u32("tsc2nsec shift")?;
                let offset = b.u64("tsc2nsec offset")?;
                if shift < 64 {
                    meta.tsc2nsec = Some(Tsc2Nsec {
                        mult,
                        shift,
                        offset,
                    });
                }
            }
            "TSC2NSEC"
        }
        opt::STRINGS => "STRINGS",
        opt::KALLSYMS => {
            // The kernel's symbol table (megabytes of text, compressed)
            // decodes nothing here: its header is checked, its body not
            // read, which was most of the metadata time of a short trace.
            let at = b.u64("section offset")?;
            section_header(file, meta, at)?;
            meta.kallsyms = Some(super::KallsymsAt::Section(at));
            "KALLSYMS"
        }
        opt::HEADER_INFO
        | opt::FTRACE_EVENTS
        | opt::EVENT_FORMATS
        | opt::PRINTK
        | opt::CMDLINES => {
            let at = b.u64("section offset")?;
            read_v7_section(file, meta, parts, id, at)?;
            match id {
                opt::HEADER_INFO => "HEADER_INFO",
                opt::FTRACE_EVENTS => "FTRACE_EVENTS",
                opt::EVENT_FORMATS => "EVENT_FORMATS",
                opt::PRINTK => "PRINTK",
                _ => "CMDLINES",
            }
        }
        other => {
            meta.warnings
                .push(format!("unknown option id {other} at byte {off} skipped"));
            "UNKNOWN"
        }
    };
    meta.options_seen.push(name.to_string());
    Ok(())
}
