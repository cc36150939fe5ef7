//! Issue 42: damage inside a xentrace file is said, with where, in the
//! summary's `problems` (the import exits 1 on any), not read past in
//! silence. Files are made here, window by window.

use cratrace_format::xentrace::{read_xentrace, read_xentrace_with, XenSummary};
use cratrace_format::MemorySink;
use std::path::{Path, PathBuf};

const CPU_CHANGE: u32 = 0x0001_f003;
/// A credit scheduler's switch record (4 words): any known layout will do.
const SWITCH: u32 = 0x0002_800a;

fn tmp(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cratrace-xendmg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// One record with a TSC and `words`.
fn rec(ev: u32, tsc: u64, words: &[u32]) -> Vec<u8> {
    let mut out = (ev | (words.len() as u32) << 28 | 1 << 31)
        .to_le_bytes()
        .to_vec();
    out.extend(tsc.to_le_bytes());
    for w in words {
        out.extend(w.to_le_bytes());
    }
    out
}

/// A window of pCPU `cpu` holding `body`.
fn window(cpu: u32, body: &[u8]) -> Vec<u8> {
    let mut out = (CPU_CHANGE | 2 << 28).to_le_bytes().to_vec();
    out.extend(cpu.to_le_bytes());
    out.extend((body.len() as u32).to_le_bytes());
    out.extend(body);
    out
}

/// `n` switch records of pCPU `cpu` from TSC `t0`, 1,000 cycles apart.
fn switches(cpu: u32, t0: u64, n: u64) -> Vec<u8> {
    (0..n)
        .flat_map(|k| rec(SWITCH, t0 + 1000 * k, &[cpu, k as u32, 1, 2]))
        .collect()
}

fn read(p: &Path) -> XenSummary {
    read_xentrace(
        p,
        2.4e9,
        Default::default(),
        &mut MemorySink::default(),
        &mut |_, _| true,
    )
    .unwrap()
}

fn clean_file() -> Vec<u8> {
    let mut f = window(0, &switches(0, 1000, 10));
    f.extend(window(1, &switches(1, 1500, 10)));
    f.extend(window(0, &switches(0, 20_000, 10)));
    f
}

#[test]
fn a_clean_file_has_no_problems() {
    let s = read(&tmp("clean.bin", &clean_file()));
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert_eq!(s.rows.values().sum::<u64>(), 30);
}

#[test]
fn a_cut_inside_a_window_header_counts_the_header_bytes_missing() {
    let f = clean_file();
    // the third window's header starts where the first two windows end
    let at = 2 * 12 + 2 * 10 * 28;
    for held in 1..12 {
        let p = tmp("hdr.bin", &f[..at + held]);
        let s = read(&p);
        assert_eq!(s.truncated_bytes, 12 - held as u64, "{held} bytes held");
        let line = &s.problems[0];
        assert!(
            line.contains(&format!("{} bytes of the last window's header", 12 - held)),
            "{line}"
        );
    }
}

#[test]
fn a_window_whose_size_covers_the_next_window_is_said() {
    // the first window declares its own records and the second window
    // (its header and records): pCPU 1's records were read as pCPU 0's
    let mut f = clean_file();
    let first = 10 * 28;
    let second = 12 + 10 * 28;
    f[8..12].copy_from_slice(&((first + second) as u32).to_le_bytes());
    let s = read(&tmp("cover.bin", &f));
    let line = s
        .problems
        .iter()
        .find(|l| l.contains("window headers among pCPU 0's records"))
        .unwrap_or_else(|| panic!("{:?}", s.problems));
    assert!(line.contains(&format!("at byte {}", 12 + first)), "{line}");
}

#[test]
fn a_record_cut_at_its_window_end_is_said_with_where() {
    // the first window declares 10 bytes fewer than its records take
    let mut f = clean_file();
    let short = 10 * 28 - 10;
    f[8..12].copy_from_slice(&(short as u32).to_le_bytes());
    // the rest of the file starts where the shorter window ends
    f.drain(12 + short..12 + short + 10);
    let s = read(&tmp("cut.bin", &f));
    let line = s
        .problems
        .iter()
        .find(|l| l.contains("records cut at the end of their window"))
        .unwrap_or_else(|| panic!("{:?}", s.problems));
    // the ninth record (of 28 bytes) is the one cut
    assert!(line.contains(&format!("at byte {}", 12 + 9 * 28)), "{line}");
    assert!(line.contains("pCPU 0"), "{line}");
}

#[test]
fn a_tsc_running_backwards_on_a_pcpu_is_said() {
    let mut body = switches(0, 10_000, 3);
    body.extend(rec(SWITCH, 500, &[0, 9, 1, 2])); // before the records above
    let mut f = window(0, &body);
    f.extend(window(1, &switches(1, 10_000, 3)));
    let s = read(&tmp("back.bin", &f));
    let line = s
        .problems
        .iter()
        .find(|l| l.contains("TSC runs backwards"))
        .unwrap_or_else(|| panic!("{:?}", s.problems));
    assert!(line.contains(&format!("at byte {}", 12 + 3 * 28)), "{line}");
}

#[test]
fn records_of_a_class_trace_h_does_not_define_are_said_and_kept_raw() {
    // pCPU 1's third record: two class bits (0x003), as a flipped bit in
    // a switch record's id makes it; pCPU 0's fifth: no class bit at all
    let mut one = switches(1, 1500, 2);
    one.extend(rec(0x0003_800a, 3500, &[1, 2, 1, 2]));
    one.extend(switches(1, 4500, 2));
    let mut zero = switches(0, 1000, 4);
    zero.extend(rec(0x0000_800a, 9000, &[0, 4, 1, 2]));
    let mut f = window(0, &zero);
    f.extend(window(1, &one));
    let s = read(&tmp("class.bin", &f));
    assert_eq!(s.problems.len(), 1, "{:?}", s.problems);
    let line = &s.problems[0];
    let second = 12 + zero.len() + 12;
    // met first in TSC order: pCPU 1's, at TSC 3500
    assert!(line.contains("2 records of a class"), "{line}");
    assert!(
        line.contains(&format!("at byte {}", second + 2 * 28)),
        "{line}"
    );
    assert!(
        line.contains("pCPU 1") && line.contains("event id 0x003800a"),
        "{line}"
    );
    // read into buffers (a file system that cannot map): the same
    let unmapped = read_xentrace_with(
        &tmp("class.bin", &f),
        2.4e9,
        Default::default(),
        &mut MemorySink::default(),
        &mut |_, _| true,
        false,
    )
    .unwrap();
    assert_eq!(unmapped.problems, s.problems);
    // nothing dropped, nothing sent to a typed table
    assert_eq!(s.rows.get("xen_switch"), Some(&8));
    assert_eq!(s.rows.get("xen_record"), Some(&2));
    // a known class with an event the reader does not decode is no damage
    let mut f = window(0, &switches(0, 1000, 2));
    f.extend(window(0, &rec(0x0004_1234, 9000, &[7])));
    f.extend(window(0, &rec(0x0800_0042, 9100, &[7])));
    let s = read(&tmp("class-ok.bin", &f));
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert_eq!(s.rows.get("xen_record"), Some(&2));
}

#[test]
fn the_real_fixtures_have_no_problems() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    for p in [
        here.join("../../shared/fixtures/xen_credit2.bin"),
        here.join("../sample-traces/xen-io-billing.bin"),
    ] {
        if !p.is_file() {
            eprintln!("{} not found: skipped", p.display());
            continue;
        }
        let s = read(&p);
        assert!(s.records > 0);
        assert!(s.problems.is_empty(), "{}: {:?}", p.display(), s.problems);
    }
}
