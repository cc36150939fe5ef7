//! The replay's phase rows (thread, kind, a, b) where the caller keeps
//! them: columns it holds (`crate::packed`), or the four column files of
//! its spill (`cratrace.replay.spill`: native-endian u32, u8, i64, i64).
//!
//! The files are read in order, a chunk of rows at a time, once per pass
//! over the rows: what this process holds of them is one chunk, not the
//! demand (2.2 GB of a 100 M-event capture).

use crate::packed::{Column, Packed};
use std::fs::File;
use std::io::Read;

/// One phase as the columns hold it: thread, kind, a, b.
pub(crate) type Row = (u32, u8, i64, i64);

/// The widths of a row's columns, in file order.
const WIDTHS: [usize; 4] = [4, 1, 8, 8];

/// Rows read from the files at a time (1.3 MiB of buffers).
const CHUNK_ROWS: usize = 1 << 16;

/// Where the rows are.
pub(crate) enum PhaseRows<'a> {
    Columns {
        thread: Column<'a, u32>,
        kind: Column<'a, u8>,
        a: Column<'a, i64>,
        b: Column<'a, i64>,
    },
    Files {
        paths: [String; 4],
        len: usize,
    },
}

impl PhaseRows<'_> {
    /// The spill's four column files (thread, kind, a, b), checked to
    /// hold one number of rows.
    pub(crate) fn files(paths: Vec<String>) -> Result<Self, String> {
        let paths: [String; 4] = paths.try_into().map_err(|p: Vec<String>| {
            format!(
                "replay: phase_files: {} paths; expected 4 (thread, kind, a, b)",
                p.len()
            )
        })?;
        let mut sizes = [0usize; 4];
        for (size, path) in sizes.iter_mut().zip(&paths) {
            *size = std::fs::metadata(path)
                .map_err(|e| format!("replay: phase_files: {path}: {e}"))?
                .len() as usize;
        }
        let len = sizes[0] / WIDTHS[0];
        for ((path, size), width) in paths.iter().zip(sizes).zip(WIDTHS) {
            if size != len * width {
                return Err(format!("replay: phase_files: {path} holds {size} bytes; expected {} ({len} phases of {width} bytes)", len * width));
            }
        }
        Ok(PhaseRows::Files { paths, len })
    }

    /// How many rows.
    pub(crate) fn len(&self) -> usize {
        match self {
            PhaseRows::Columns { thread, .. } => thread.len(),
            PhaseRows::Files { len, .. } => *len,
        }
    }

    /// `f` of each row in order; stops at `f`'s first error.
    pub(crate) fn for_each(
        &self,
        mut f: impl FnMut(Row) -> Result<(), String>,
    ) -> Result<(), String> {
        match self {
            PhaseRows::Columns { thread, kind, a, b } => (0..self.len())
                .try_for_each(|i| f((thread.get(i), kind.get(i), a.get(i), b.get(i)))),
            PhaseRows::Files { paths, len } => for_each_in_files(paths, *len, f),
        }
    }
}

/// `f` of each of the `len` rows of the column files `paths`, read a
/// chunk at a time.
fn for_each_in_files(
    paths: &[String; 4],
    len: usize,
    mut f: impl FnMut(Row) -> Result<(), String>,
) -> Result<(), String> {
    let mut files = Vec::with_capacity(4);
    for path in paths {
        files.push(File::open(path).map_err(|e| format!("replay: phase_files: {path}: {e}"))?);
    }
    let mut bufs: Vec<Vec<u8>> = WIDTHS.iter().map(|w| vec![0; w * CHUNK_ROWS]).collect();
    let mut done = 0;
    while done < len {
        let rows = CHUNK_ROWS.min(len - done);
        for (((file, buf), width), path) in files.iter_mut().zip(&mut bufs).zip(WIDTHS).zip(paths) {
            file.read_exact(&mut buf[..rows * width])
                .map_err(|e| format!("replay: phase_files: {path}: {e}"))?;
        }
        for i in 0..rows {
            f((
                u32::read(&bufs[0][i * 4..(i + 1) * 4]),
                bufs[1][i],
                i64::read(&bufs[2][i * 8..(i + 1) * 8]),
                i64::read(&bufs[3][i * 8..(i + 1) * 8]),
            ))?;
        }
        done += rows;
    }
    Ok(())
}
