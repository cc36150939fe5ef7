//! `MarkerLines`: the model's `markers` table built in Rust
//! (cratrace-arrow's `markers` module says how), exposed in the two steps
//! the model build runs on a side thread: parse the print events, then,
//! once the threads table exists, attribute and write (or hand over).

use crate::arrow_stream::{read_stream, ArrowTable};
use crate::errors::{codec, damaged_table, to_py};
use cratrace_arrow::markers::{MarkerLines as Lines, WriterVms};
use cratrace_arrow::{Codec, EncodedTable, TableReader};
use cratrace_format::ReadError;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::path::PathBuf;
use std::sync::Mutex;

/// Parsed trace_marker lines of one capture.
#[pyclass(module = "cratrace._native", frozen)]
pub struct MarkerLines {
    lines: Lines,
    /// columns encoded at parse time, for a file of this codec
    ahead: Mutex<Option<(Codec, EncodedTable)>>,
}

const PRINT_COLUMNS: [&str; 5] = ["ts", "cpu", "pid", "instance", "buf"];

fn writers(threads: &Bound<'_, PyAny>) -> PyResult<WriterVms> {
    WriterVms::from_batches(&read_stream(threads, "threads")?).map_err(PyValueError::new_err)
}

#[pymethods]
impl MarkerLines {
    /// Parse the print event table at `path` (the GIL is released). With
    /// `compression`, the columns that need no threads table are encoded as
    /// they are parsed, for the next `write` with that codec, and only the
    /// lines named in `keep` are kept whole (for `table`).
    #[staticmethod]
    #[pyo3(signature = (path, compression = None, keep = None))]
    fn read(
        py: Python<'_>,
        path: PathBuf,
        compression: Option<&str>,
        keep: Option<Vec<String>>,
    ) -> PyResult<MarkerLines> {
        let c = compression.map(codec).transpose()?;
        let keep = keep.unwrap_or_default();
        py.detach(|| {
            let open = || TableReader::open(&path, &PRINT_COLUMNS).map_err(damaged_table);
            let damaged = |e: String| {
                damaged_table(if e.starts_with(&*path.to_string_lossy()) {
                    e
                } else {
                    format!("{}: {e}", path.display())
                })
            };
            if let Some(c) = c {
                let names: Vec<&str> = keep.iter().map(String::as_str).collect();
                if let Some((lines, ahead)) = Lines::stream(open()?, c, &names).map_err(damaged)? {
                    return Ok(MarkerLines {
                        lines,
                        ahead: Mutex::new(Some((c, ahead))),
                    });
                }
            }
            let lines = Lines::from_reader(open()?).map_err(damaged)?;
            let ahead = match c {
                Some(c) => Some((c, lines.encode_ahead(c).map_err(PyValueError::new_err)?)),
                None => None,
            };
            Ok(MarkerLines {
                lines,
                ahead: Mutex::new(ahead),
            })
        })
    }

    /// Parse print events held in a polars frame.
    #[staticmethod]
    fn from_frame(prints: Bound<'_, PyAny>) -> PyResult<MarkerLines> {
        let lines =
            Lines::from_batches(&read_stream(&prints, "print")?).map_err(PyValueError::new_err)?;
        Ok(MarkerLines {
            lines,
            ahead: Mutex::new(None),
        })
    }

    /// The `markers` table, attributed with `threads` (a frame with `tid`,
    /// `vm`, `vcpu`); with `names`, only lines of those names.
    #[pyo3(signature = (threads, names = None))]
    fn table(
        &self,
        py: Python<'_>,
        threads: Bound<'_, PyAny>,
        names: Option<Vec<String>>,
    ) -> PyResult<ArrowTable> {
        let w = writers(&threads)?;
        let names: Option<Vec<&str>> = names
            .as_ref()
            .map(|n| n.iter().map(String::as_str).collect());
        let batch = py
            .detach(|| self.lines.table(&w, names.as_deref()))
            .map_err(PyValueError::new_err)?;
        Ok(ArrowTable::new(batch))
    }

    /// Spin episodes from `begin` ... `end` marker pairs, the lines
    /// attributed with `threads` as `table` attributes them: a frame of
    /// `vm`, `vcpu`, `tid`, `start`, `end`.
    fn pairs(
        &self,
        py: Python<'_>,
        threads: Bound<'_, PyAny>,
        begin: &str,
        end: &str,
    ) -> PyResult<ArrowTable> {
        let w = writers(&threads)?;
        let batch = py
            .detach(|| self.lines.pairs(&w, begin, end))
            .map_err(PyValueError::new_err)?;
        Ok(ArrowTable::new(batch))
    }

    /// Attribute with `threads` and write the table to `path` as Parquet
    /// (`compression`: lz4, zstd or uncompressed); returns its rows. The
    /// GIL is released while the table is built and encoded.
    fn write(
        &self,
        py: Python<'_>,
        threads: Bound<'_, PyAny>,
        path: PathBuf,
        compression: &str,
    ) -> PyResult<usize> {
        let codec = codec(compression)?;
        let w = writers(&threads)?;
        // the columns encoded ahead serve one write, of their codec
        let ahead = self
            .ahead
            .lock()
            .ok()
            .and_then(|mut a| a.take())
            .and_then(|(c, t)| (c == codec).then_some(t));
        py.detach(|| {
            self.lines
                .write(&w, ahead, codec, &path)
                .map_err(|what| to_py(ReadError::Sink { what }))
        })
    }

    /// Lines parsed.
    fn __len__(&self) -> usize {
        self.lines.len()
    }
}
