//! Bounded fuzz pass (proptest) over the xentrace, perf.data and perf stat readers:
//! random bytes and mutations of valid files must end in Ok or a
//! ReadError, never a panic.

use cratrace_format::perfdata::read_perfdata;
use cratrace_format::perfstat::read_perfstat;
use cratrace_format::xentrace::read_xentrace;
use cratrace_format::MemorySink;
use proptest::prelude::*;

fn tmp(name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("cratrace-fuzz2-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn xen_file(records: &[(u32, Vec<u32>, Option<u64>)]) -> Vec<u8> {
    let mut body = Vec::new();
    for (ev, words, tsc) in records {
        let head = (ev & 0x0fff_ffff)
            | ((words.len().min(7) as u32) << 28)
            | if tsc.is_some() { 1 << 31 } else { 0 };
        body.extend(head.to_le_bytes());
        if let Some(t) = tsc {
            body.extend(t.to_le_bytes());
        }
        for w in words.iter().take(7) {
            body.extend(w.to_le_bytes());
        }
    }
    let mut out = Vec::new();
    out.extend((0x0001_f003u32 | (2 << 28)).to_le_bytes());
    out.extend(0u32.to_le_bytes());
    out.extend((body.len() as u32).to_le_bytes());
    out.extend(body);
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, .. ProptestConfig::default() })]

    #[test]
    // ids: any, or a scheduler-class event (typed layouts of 0-6 words)
    fn xentrace_never_panics(records in proptest::collection::vec((prop_oneof![any::<u32>(), (0u32..8, 0u32..32).prop_map(|(s, e)| 0x22000 | s << 9 | e)], proptest::collection::vec(any::<u32>(), 0..8), proptest::option::of(any::<u64>())), 0..40), flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6)) {
        let mut f = xen_file(&records);
        for (at, b) in flips { if !f.is_empty() { let n = f.len(); f[at % n] = b; } }
        let p = tmp("x.bin", &f);
        let _ = read_xentrace(&p, 2.4e9, Default::default(), &mut MemorySink::default(), &mut |_, _| true);
    }

    #[test]
    fn perfdata_never_panics(tail in proptest::collection::vec(any::<u8>(), 0..400), words in proptest::collection::vec(any::<u64>(), 0..12)) {
        let mut f = b"PERFILE2".to_vec();
        for w in &words { f.extend(w.to_le_bytes()); }
        f.extend(tail);
        let p = tmp("p.data", &f);
        let _ = read_perfdata(&p, &mut MemorySink::default(), &mut |_, _| true);
    }

    #[test]
    fn perfstat_never_panics(lines in proptest::collection::vec((0.0f64..1e6, 0u32..5000, "[0-9<>a-z. ]{0,12}", "[a-z]{0,4}", "[a-z-]{0,12}"), 0..30), flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6)) {
        let mut f = Vec::new();
        for (t, cpu, v, unit, ev) in &lines {
            f.extend(format!("{t:.9},CPU{cpu},{v},{unit},{ev},100,100.00,,\n").into_bytes());
        }
        for (at, b) in flips { if !f.is_empty() { let n = f.len(); f[at % n] = b; } }
        let p = tmp("s.csv", &f);
        let _ = read_perfstat(&p, Some(5), &mut MemorySink::default());
    }
}

/// A file of several pCPUs' windows: records `(pcpu, event, words, tsc)`
/// in order, a window started whenever the pCPU changes.
fn xen_windows(records: &[(u32, u32, Vec<u32>, Option<u64>)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < records.len() {
        let cpu = records[at].0;
        let n = records[at..].iter().take_while(|r| r.0 == cpu).count();
        let body: Vec<(u32, Vec<u32>, Option<u64>)> = records[at..at + n]
            .iter()
            .map(|(_, ev, w, t)| (*ev, w.clone(), *t))
            .collect();
        let mut w = xen_file(&body);
        w[4..8].copy_from_slice(&cpu.to_le_bytes());
        out.extend(w);
        at += n;
    }
    out
}

/// Everything a read produced, as text: the summary and every row.
fn read_all(p: &std::path::Path, map: bool) -> String {
    let mut sink = MemorySink::default();
    let r = cratrace_format::xentrace::read_xentrace_with(
        p,
        2.4e9,
        Default::default(),
        &mut sink,
        &mut |_, _| true,
        map,
    );
    let mut s = format!("{r:?}\n");
    for (spec, b) in &sink.tables {
        s += &format!("{}\n", spec.name);
        for i in 0..b.len() {
            s += &format!("{:?}\n", b.row(i));
        }
    }
    s
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, .. ProptestConfig::default() })]

    // The file's mapping and reads into buffers (a file system that cannot
    // map) give the same tables, rows and summary, damaged files included.
    #[test]
    fn mapped_and_read_files_give_the_same_rows(records in proptest::collection::vec((0u32..4, prop_oneof![Just(0x0002_1011u32), Just(0x0002_800au32), (0u32..8, 0u32..32).prop_map(|(s, e)| 0x22000 | s << 9 | e), any::<u32>()], proptest::collection::vec(any::<u32>(), 0..8), proptest::option::of(0u64..1_000_000)), 0..200), cut in any::<usize>()) {
        let mut f = xen_windows(&records);
        if cut % 3 == 0 && !f.is_empty() {
            f.truncate(cut % f.len());
        }
        let p = tmp("m.bin", &f);
        prop_assert_eq!(read_all(&p, true), read_all(&p, false));
    }
}

// Past the mapped reader's release step, with the pCPUs' windows out of
// time order in the file (pCPU 1's records run ahead of pCPU 0's in time,
// as in the benchmark's generated file): the pages one pCPU lets go that
// the other has yet to read come back, and the rows are those of reads
// into buffers.
#[test]
fn mapped_reads_past_released_pages_give_the_same_rows() {
    let mut records = Vec::new();
    for w in 0..4000u64 {
        for cpu in 0..2u32 {
            for k in 0..40u64 {
                // pCPU 1 covers three times the time per window
                let tsc = (w * 40 + k) * if cpu == 0 { 100 } else { 300 };
                records.push((cpu, 0x0002_800au32, vec![cpu, k as u32, 7, 9], Some(tsc)));
            }
        }
    }
    let f = xen_windows(&records);
    assert!(f.len() > 8 << 20, "{} bytes", f.len());
    let p = tmp("released.bin", &f);
    let (mapped, read) = (read_all(&p, true), read_all(&p, false));
    assert_eq!(mapped.lines().count(), 320_000 + 2);
    assert!(mapped == read, "mapped and read rows differ");
}
