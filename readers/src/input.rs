//! Opening a trace file and reading checked ranges of its header parts.
//!
//! Lengths and offsets in a header come from the file itself, so a
//! damaged one must become a `Corrupt` error naming where it was, not an
//! allocation of whatever size it claims.

use crate::error::{ReadError, ReadResult};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Most bytes one header part may claim. Header parts (attributes,
/// feature sections, format files, kallsyms, printk formats) are
/// kilobytes to tens of megabytes; a larger length is damage even in a
/// file that large, and refusing it keeps a bad length from becoming a
/// multi-gigabyte allocation.
pub const MAX_PART: u64 = 1 << 31;

/// The memory a read of a `file_size`-byte file may hold at once in
/// decompressed data when the caller sets no budget: 64 times the file,
/// and never less than 256 MiB. Real trace.dat chunks are tens of
/// kilobytes; a 742 KB file whose CPUs each declared a 1 GiB chunk took a
/// read to 6.3 GB (issue 42). A budget proportional to the input keeps
/// what a tiny file can ask for in proportion to it.
pub fn default_budget(file_size: u64) -> u64 {
    file_size.saturating_mul(64).max(256 << 20)
}

/// Open `path` and return it with its size.
pub fn open_sized(path: &Path) -> ReadResult<(File, u64)> {
    let file = File::open(path).map_err(|e| ReadError::io(path, e))?;
    let size = file.metadata().map_err(|e| ReadError::io(path, e))?.len();
    Ok((file, size))
}

/// [`open_sized`], where an empty file is not a `kind` (named in the
/// error, e.g. "a trace.dat").
pub fn open_nonempty(path: &Path, kind: &str) -> ReadResult<(File, u64)> {
    let (file, size) = open_sized(path)?;
    if size == 0 {
        return Err(ReadError::corrupt(
            path,
            0,
            "empty",
            format!("empty file, not {kind}"),
        ));
    }
    Ok((file, size))
}

/// `len` bytes at `offset` of `file` (`size` bytes long), for the header
/// part `what`: past the end of the file, or longer than [`MAX_PART`], is
/// a `past-eof` error at `offset`.
pub fn read_at(
    file: &File,
    path: &Path,
    offset: u64,
    len: u64,
    size: u64,
    what: &str,
) -> ReadResult<Vec<u8>> {
    if offset > size || len > size - offset || len > MAX_PART {
        return Err(ReadError::corrupt(
            path,
            offset,
            "past-eof",
            format!("{what}: {len} bytes at {offset} run past the end of the file ({size} bytes)"),
        ));
    }
    let mut v = vec![0u8; len as usize];
    file.read_exact_at(&mut v, offset)
        .map_err(|e| ReadError::io(path, e))?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A file in the temporary directory holding `bytes`, removed by the caller.
    fn temp(name: &str, bytes: &[u8]) -> PathBuf {
        let p = std::env::temp_dir().join(format!("cratrace-input-{}-{name}", std::process::id()));
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn reads_inside_and_refuses_past_the_end() {
        let p = temp("ten", b"0123456789");
        let (f, n) = open_nonempty(&p, "a test file").unwrap();
        assert_eq!(n, 10);
        assert_eq!(read_at(&f, &p, 2, 3, n, "part").unwrap(), b"234");
        assert_eq!(read_at(&f, &p, 10, 0, n, "part").unwrap(), b"");
        let e = read_at(&f, &p, 8, 3, n, "part").unwrap_err().to_string();
        assert!(
            e.contains("part: 3 bytes at 8") && e.contains("ERR:past-eof"),
            "{e}"
        );
        // an offset past the end must not wrap the subtraction
        assert!(read_at(&f, &p, 11, 0, n, "part").is_err());
        assert!(read_at(&f, &p, u64::MAX, u64::MAX, n, "part").is_err());
        std::fs::remove_file(&p).ok();
    }

    #[test]
    fn an_empty_file_is_named() {
        let p = temp("empty", b"");
        let e = open_nonempty(&p, "a xentrace file")
            .unwrap_err()
            .to_string();
        std::fs::remove_file(&p).ok();
        assert!(
            e.contains("empty file, not a xentrace file") && e.contains("ERR:empty"),
            "{e}"
        );
    }
}
