//! `read_perfstat`: perf stat interval CSV → the `perf_counter` table.

use crate::to_parquet::read_to_parquet;
use cratrace_format::perfstat::read_perfstat as read;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

/// Read `perf stat -I -x, -A` output into `out_dir/perf_counter.parquet`;
/// `start_ns` is perf's start on the trace clock, if known. Returns rows,
/// counters, CPUs and time range.
#[pyfunction]
#[pyo3(signature = (path, out_dir, *, start_ns = None, batch_rows = 4096, compression = "lz4"))]
pub fn read_perfstat(
    py: Python<'_>,
    path: PathBuf,
    out_dir: PathBuf,
    start_ns: Option<i64>,
    batch_rows: usize,
    compression: &str,
) -> PyResult<Py<PyDict>> {
    // the perf stat reader reports no progress: interval text is small
    let (s, _) = read_to_parquet(py, &out_dir, batch_rows, compression, &None, |sink, _| {
        read(&path, start_ns, sink)
    })?;
    let d = PyDict::new(py);
    d.set_item("rows", s.rows)?;
    d.set_item("counters", s.counters.into_iter().collect::<Vec<_>>())?;
    d.set_item("cpus", s.cpus)?;
    d.set_item("time_range", s.time_range.map(|(a, b)| vec![a, b]))?;
    Ok(d.unbind())
}
