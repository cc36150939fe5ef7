//! A xentrace file through `read_xentrace`, as `cratrace import --cpu-hz
//! 2.4e9` calls it. The VMEXIT reason space (vmx or svm) follows the
//! input's length parity, so both tables get exercised without a byte of
//! the input spent on it. A ReadError is fine; a panic, abort, hang or
//! out-of-memory is a finding.
#![no_main]

use cratrace_format::xentrace::{read_xentrace, ExitReasons};
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let path = common::scratch(data, "bin");
    let exits = if data.len() % 2 == 0 {
        ExitReasons::Vmx
    } else {
        ExitReasons::Svm
    };
    let mut sink = common::CountingSink::default();
    let _ = read_xentrace(&path, 2.4e9, exits, &mut sink, &mut |_, _| true);
    std::fs::remove_file(&path).ok();
});
