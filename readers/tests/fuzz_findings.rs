//! Inputs the coverage-guided fuzz targets (fuzz/, cargo-fuzz) found to
//! panic, rebuilt here by hand, small: each must end in Ok or a ReadError.

use cratrace_format::tracedat::{read_tracedat, ReadOptions};
use cratrace_format::MemorySink;
use std::path::PathBuf;

fn tmp(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cratrace-findings-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// A little-endian v6 trace.dat with no formats, no cmdlines and `cpus`
/// as its flyrecord table of (offset, size).
fn v6(cpus: &[(u64, u64)]) -> Vec<u8> {
    let mut v = b"\x17\x08\x44tracing6\0".to_vec();
    v.extend([0u8, 8]);
    v.extend(4096u32.to_le_bytes());
    let header_page: &[u8] = b"\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\tfield: char data;\toffset:16;\tsize:4080;\tsigned:1;\n";
    let header_event: &[u8] = b"# compressed entry header\n\ttype_len    :    5 bits\n\ttime_delta  :   27 bits\n\tarray       :   32 bits\n\n\tpadding     : type == 29\n\ttime_extend : type == 30\n\ttime_stamp : type == 31\n\tdata max type_len  == 28\n";
    for (tag, text) in [
        (&b"header_page\0"[..], header_page),
        (b"header_event\0", header_event),
    ] {
        v.extend(tag);
        v.extend((text.len() as u64).to_le_bytes());
        v.extend(text);
    }
    v.extend(0u32.to_le_bytes()); // ftrace formats
    v.extend(0u32.to_le_bytes()); // event systems
    v.extend(0u32.to_le_bytes()); // kallsyms
    v.extend(0u32.to_le_bytes()); // printk formats
    v.extend(0u64.to_le_bytes()); // cmdlines
    v.extend((cpus.len() as u32).to_le_bytes());
    v.extend(b"flyrecord\0");
    for (offset, size) in cpus {
        v.extend(offset.to_le_bytes());
        v.extend(size.to_le_bytes());
    }
    v
}

/// fuzz target `tracedat`, 2026-11-27: CPU data sizes whose sum passes
/// 2^64 made the progress total overflow (a panic with overflow checks,
/// a wrapped total without). The total is now what the file holds.
#[test]
fn cpu_data_sizes_summing_past_u64_do_not_overflow() {
    let bytes = v6(&[(4096, u64::MAX), (4096, u64::MAX), (8192, 1 << 63)]);
    let len = bytes.len() as u64;
    let path = tmp("sizes.dat", &bytes);
    let mut totals = Vec::new();
    let r = read_tracedat(
        &path,
        &mut MemorySink::default(),
        &ReadOptions::default(),
        &mut |done, total| {
            totals.push((done, total));
            true
        },
    );
    std::fs::remove_file(&path).ok();
    for (done, total) in totals {
        assert!(
            done <= total && total <= 3 * len,
            "progress {done}/{total}, file {len} bytes"
        );
    }
    if let Ok(s) = r {
        assert!(s.records == 0, "{s:?}");
    }
}

/// `v6(cpus)` padded to a page boundary, then `pages` zeroed 4 KiB pages
/// (empty ring-buffer pages): returns the file and where its data starts.
fn v6_with_pages(cpus: &[(u64, u64)], pages: u64) -> (Vec<u8>, u64) {
    let mut v = v6(cpus);
    let start = (v.len() as u64).div_ceil(4096) * 4096;
    v.resize((start + pages * 4096) as usize, 0);
    (v, start)
}

fn summary(name: &str, bytes: &[u8]) -> cratrace_format::tracedat::TraceDatSummary {
    let path = tmp(name, bytes);
    let s = read_tracedat(
        &path,
        &mut MemorySink::default(),
        &ReadOptions::default(),
        &mut |_, _| true,
    )
    .unwrap();
    std::fs::remove_file(&path).ok();
    s
}

/// A damaged header's size claim (a high bit flipped: up to 2^64) was
/// counted whole as the bytes a cut file lacks. Claims are checked
/// against the file when the header is read: one running into the next
/// CPU's data, or past any file, is said as a damaged size and read as
/// what the file holds; a claim past the end of the file's last section
/// is still a cut file, its missing bytes counted.
#[test]
fn a_damaged_cpu_size_claim_is_said_not_counted_as_truncation() {
    // the table's length does not depend on its values: lay out once
    let (_, start) = v6_with_pages(&[(0, 0), (0, 0)], 0);
    let (a, b) = (start, start + 4096);
    for (claims, missing, said) in [
        // whole and cut: no damage
        (vec![(a, 4096), (b, 4096)], 0, 0),
        (vec![(a, 4096), (b, 3 * 4096)], 2 * 4096, 0),
        // CPU 0's size has bit 62 set: it runs into CPU 1's data
        (vec![(a, 4096 | 1 << 62), (b, 4096)], 0, 1),
        // CPU 1's (the last section) has bit 63 set, then a size that
        // overflows with its offset
        (vec![(a, 4096), (b, 4096 | 1 << 63)], 0, 1),
        (vec![(a, 4096), (b, u64::MAX)], 0, 1),
        // both damaged; then one damaged and a cut: only the cut's bytes
        // are missing
        (vec![(a, 1 << 62), (b, 1 << 62)], 0, 2),
        (vec![(a, 1 << 62), (b, 3 * 4096)], 2 * 4096, 1),
    ] {
        let (bytes, _) = v6_with_pages(&claims, 2);
        let s = summary("claims.dat", &bytes);
        assert_eq!(s.truncated_bytes, missing, "{claims:?}: {:?}", s.problems);
        let damaged: Vec<_> = s
            .problems
            .iter()
            .filter(|l| l.contains("a damaged size"))
            .collect();
        assert_eq!(damaged.len(), said, "{claims:?}: {:?}", s.problems);
        if said > 0 {
            assert!(
                damaged[0].contains("at byte ") && damaged[0].contains("claims "),
                "{damaged:?}"
            );
        }
    }
}
