//! What every trace reader's binding does around its read: release the
//! GIL, write the tables through a Parquet sink, report progress to the
//! caller (Ctrl-C stops the read), and close the sink, whose failure is
//! the read's failure. The bindings differ only in the read call and in
//! the summary they hand back.

use crate::errors::{codec, progress_callback, to_py};
use cratrace_arrow::ParquetSink;
use cratrace_format::ReadError;
use pyo3::prelude::*;
use std::path::{Path, PathBuf};

/// The files a sink wrote: (table, path).
pub type Written = Vec<(String, PathBuf)>;

/// Run `read` into `out_dir/<table>.parquet` with the GIL released;
/// returns the reader's summary and the files written. `compression` is
/// the Python argument (`lz4`, `zstd` or `none`).
pub fn read_to_parquet<T: Send>(
    py: Python<'_>,
    out_dir: &Path,
    batch_rows: usize,
    compression: &str,
    progress: &Option<Py<PyAny>>,
    read: impl Send + FnOnce(&mut ParquetSink, &mut dyn FnMut(u64, u64) -> bool) -> Result<T, ReadError>,
) -> PyResult<(T, Written)> {
    let codec = codec(compression)?;
    py.detach(|| {
        let mut sink = ParquetSink::new(out_dir, batch_rows, codec);
        let mut cb = progress_callback(progress);
        let summary = read(&mut sink, &mut cb)?;
        let files = sink.finish().map_err(|what| ReadError::Sink { what })?;
        Ok((summary, files))
    })
    .map_err(to_py)
}
