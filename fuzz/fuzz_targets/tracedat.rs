//! trace.dat (v6 and v7) through `read_tracedat`, as `cratrace import`
//! calls it: default options, so the decompression budget is the
//! importer's default, proportional to the file's size. A ReadError is a
//! fine outcome; a panic, abort, hang or out-of-memory is a finding.
#![no_main]

use cratrace_format::tracedat::{read_tracedat, ReadOptions};
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let path = common::scratch(data, "dat");
    let mut sink = common::CountingSink::default();
    let _ = read_tracedat(&path, &mut sink, &ReadOptions::default(), &mut |_, _| true);
    std::fs::remove_file(&path).ok();
});
