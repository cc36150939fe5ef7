//! Mutation fuzzing of whole, real files: the project's sample traces
//! (trace.dat and xentrace) and a perf.data recorded here, damaged the ways files get damaged (bytes
//! flipped, words set to edge values, cut short, a run of bytes repeated
//! or dropped), through the whole reader. Random bytes rarely get past a
//! header; a real file with a few bytes changed reaches the format
//! parsers, the option sections, the page and chunk decoders. The only
//! property is "no panic": every input ends in Ok or a ReadError.
//!
//! The test suite runs a bounded pass. A longer campaign, on more files:
//!
//! ```text
//! CRATRACE_FUZZ_ITERS=20000 CRATRACE_FUZZ_FILES=a.dat:b.bin:c.perf.data \
//!     cargo test --release -p cratrace-format --test fuzz_mutations -- --nocapture
//! ```
//!
//! A panic, or a read still going after CRATRACE_FUZZ_TIMEOUT_S (10 s),
//! names the file, the iteration and the seed, and leaves the damaged
//! input in the temporary directory to reproduce it.

use cratrace_format::perfdata::read_perfdata;
use cratrace_format::tracedat::{read_tracedat, ReadOptions};
use cratrace_format::xentrace::read_xentrace;
use cratrace_format::MemorySink;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// splitmix64: the campaign is reproducible from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    TraceDat,
    Xentrace,
    PerfData,
}

fn kind_of(p: &Path) -> Kind {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name.ends_with(".bin") {
        Kind::Xentrace
    } else if name.contains("perf") {
        Kind::PerfData
    } else {
        Kind::TraceDat
    }
}

/// Where a change does the most: half of them in the first 16 KiB
/// (headers, formats, option sections), the rest anywhere.
fn offset(r: &mut Rng, len: usize) -> usize {
    if r.next() & 1 == 0 {
        r.below(len.min(16 << 10))
    } else {
        r.below(len)
    }
}

fn mutate(r: &mut Rng, orig: &[u8]) -> Vec<u8> {
    let mut v = orig.to_vec();
    for _ in 0..1 + r.below(4) {
        if v.is_empty() {
            break;
        }
        let at = offset(r, v.len());
        match r.below(6) {
            0 => {
                for i in 0..1 + r.below(8) {
                    if let Some(b) = v.get_mut(at + i) {
                        *b = r.next() as u8;
                    }
                }
            }
            1 => {
                // sizes, offsets and counts at their edges
                const EDGES: [u32; 7] = [0, 1, 0x7fff_ffff, 0x8000_0000, 0xffff_ffff, 4096, 4095];
                let w = EDGES[r.below(EDGES.len())].to_le_bytes();
                let end = (at + 4).min(v.len());
                v[at..end].copy_from_slice(&w[..end - at]);
            }
            2 => v.truncate(at),
            3 => {
                let n = 1 + r.below(64);
                let run: Vec<u8> = v[at..(at + n).min(v.len())].to_vec();
                v.splice(at..at, run);
            }
            4 => {
                let end = (at + 1 + r.below(64)).min(v.len());
                v.drain(at..end);
            }
            _ => {
                let bit = 1u8 << r.below(8);
                v[at] ^= bit;
            }
        }
    }
    v
}

fn read(kind: Kind, path: &Path) {
    let sink = &mut MemorySink::default();
    let progress = &mut |_, _| true;
    let _ = match kind {
        Kind::TraceDat => read_tracedat(path, sink, &ReadOptions::default(), progress).map(|_| ()),
        Kind::Xentrace => {
            read_xentrace(path, 2.4e9, Default::default(), sink, progress).map(|_| ())
        }
        Kind::PerfData => read_perfdata(path, sink, progress).map(|_| ()),
    };
}

fn seeds() -> Vec<PathBuf> {
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sample-traces");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&samples)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| matches!(p.extension().and_then(|x| x.to_str()), Some("dat" | "bin")))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    if let Ok(more) = std::env::var("CRATRACE_FUZZ_FILES") {
        files.extend(more.split(':').filter(|s| !s.is_empty()).map(PathBuf::from));
    }
    files
}

/// No perf.data ships with the project: record a small one here when
/// perf can (sched tracepoints, the whole machine, a tenth of a second).
fn recorded_perf_data() -> Option<PathBuf> {
    let out =
        std::env::temp_dir().join(format!("cratrace-mutfuzz-{}.perf.data", std::process::id()));
    let ok = std::process::Command::new("perf")
        .args(["record", "-q", "-o"])
        .arg(&out)
        .args([
            "-e",
            "sched:sched_switch",
            "-e",
            "sched:sched_wakeup",
            "-a",
            "--",
            "sleep",
            "0.1",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        Some(out)
    } else {
        eprintln!("perf cannot record here: no perf.data among the fuzzed files");
        None
    }
}

/// Read `path` on a thread of its own: None when it ended (Ok or a
/// ReadError), else what went wrong. A reader still busy after `limit`
/// (a count from the file driving a loop that reads nothing) is a hang,
/// reported as one instead of stalling the suite.
fn read_within(kind: Kind, path: &Path, limit: Duration) -> Option<String> {
    let (tx, rx) = mpsc::channel();
    let p = path.to_path_buf();
    std::thread::spawn(move || {
        let ended = catch_unwind(AssertUnwindSafe(|| read(kind, &p))).is_ok();
        let _ = tx.send(ended);
    });
    match rx.recv_timeout(limit) {
        Ok(true) => None,
        Ok(false) => Some("the reader panicked".into()),
        Err(_) => Some(format!("still reading after {limit:?}")),
    }
}

#[test]
fn damaged_real_files_never_panic_nor_hang() {
    let iters: usize = std::env::var("CRATRACE_FUZZ_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(48);
    let seed: u64 = std::env::var("CRATRACE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x00C0_FFEE);
    let limit = Duration::from_secs_f64(
        std::env::var("CRATRACE_FUZZ_TIMEOUT_S")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(10.0),
    );
    let dir = std::env::temp_dir().join(format!("cratrace-mutfuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let recorded = recorded_perf_data();
    let mut files = seeds();
    files.extend(recorded.clone());
    assert!(!files.is_empty(), "no sample traces to mutate");
    let mut failures = Vec::new();
    for (fi, file) in files.iter().enumerate() {
        let orig = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let kind = kind_of(file);
        let mut r = Rng(seed ^ (fi as u64).wrapping_mul(0xA24B_AED4_963E_E407));
        for i in 0..iters {
            let damaged = mutate(&mut r, &orig);
            let path = dir.join(format!("{fi}-{i}"));
            std::fs::write(&path, &damaged).unwrap();
            let outcome = read_within(kind, &path, limit);
            if let Some(what) = outcome {
                failures.push(format!(
                    "{} (iteration {i}, seed {seed}): {what}; input kept at {}",
                    file.display(),
                    path.display()
                ));
                if what.starts_with("still reading") {
                    // its thread spins on: go on with the next file
                    break;
                }
            } else {
                std::fs::remove_file(&path).ok();
            }
        }
    }
    if let Some(f) = recorded {
        std::fs::remove_file(f).ok();
    }
    assert!(
        failures.is_empty(),
        "readers panicked or hung on damaged files:\n{}",
        failures.join("\n")
    );
    std::fs::remove_dir(&dir).ok();
}
