//! Bounded fuzz pass (proptest) over the trace.dat decoders: arbitrary
//! pages through the record decoder, and arbitrary files (random bytes,
//! and mutations of a valid header) through the whole reader. The only
//! property is "no panic": every input must end in Ok or a ReadError.

use cratrace_format::bytes::Endian;
use cratrace_format::tracedat::records::build::{page, Rec};
use cratrace_format::tracedat::records::PageCursor;
use cratrace_format::tracedat::{read_tracedat, ReadOptions};
use cratrace_format::MemorySink;
use proptest::prelude::*;

fn decode_all(p: &[u8], e: Endian, long: usize) {
    if let Ok(mut c) = PageCursor::new(p, e, long, 8 + long) {
        let mut n = 0;
        while let Ok(Some(r)) = c.next_record(p) {
            assert!(r.start <= r.end && r.end <= p.len());
            n += 1;
            assert!(n <= p.len(), "decoder must make progress");
        }
    }
}

fn read_bytes(bytes: &[u8]) {
    let dir = std::env::temp_dir().join(format!("cratrace-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("f{}.dat", bytes.len()));
    std::fs::write(&path, bytes).unwrap();
    let _ = read_tracedat(
        &path,
        &mut MemorySink::default(),
        &ReadOptions::default(),
        &mut |_, _| true,
    );
    std::fs::remove_file(&path).ok();
}

fn valid_prefix() -> Vec<u8> {
    let mut v = b"\x17\x08\x44tracing6\0".to_vec();
    v.extend([0u8, 8]);
    v.extend(4096u32.to_le_bytes());
    v.extend(b"header_page\0");
    let hp = b"\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\tfield: char data;\toffset:16;\tsize:4080;\tsigned:1;\n";
    v.extend((hp.len() as u64).to_le_bytes());
    v.extend(hp);
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, .. ProptestConfig::default() })]

    #[test]
    fn random_pages_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512), big in any::<bool>(), long8 in any::<bool>()) {
        decode_all(&bytes, if big { Endian::Big } else { Endian::Little }, if long8 { 8 } else { 4 });
    }

    #[test]
    fn mutated_valid_pages_never_panic(flips in proptest::collection::vec((0usize..256, any::<u8>()), 1..16)) {
        let mut p = page(Endian::Little, 8, 256, 1000, &[Rec::Data(3, b"abcdefgh"), Rec::Extend(1 << 29), Rec::Data(1, &[9; 40]), Rec::Pad(8)], Some(3));
        for (at, b) in flips { p[at] = b; }
        decode_all(&p, Endian::Little, 8);
    }

    #[test]
    fn random_files_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..300), keep in 0usize..200) {
        let mut v = valid_prefix();
        v.truncate(keep.min(v.len()));
        v.extend(tail);
        read_bytes(&v);
    }
}
