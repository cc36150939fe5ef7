//! perf.data through `read_perfdata`, as `cratrace import` calls it. A
//! ReadError is fine; a panic, abort, hang or out-of-memory is a finding.
#![no_main]

use cratrace_format::perfdata::read_perfdata;
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let path = common::scratch(data, "data");
    let mut sink = common::CountingSink::default();
    let _ = read_perfdata(&path, &mut sink, &mut |_, _| true);
    std::fs::remove_file(&path).ok();
});
