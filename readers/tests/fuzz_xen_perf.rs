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
