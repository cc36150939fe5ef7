//! `read_perfdata`: perf.data → the same tables as trace.dat (+ perf_sample).

use crate::to_parquet::read_to_parquet;
use cratrace_format::perfdata::read_perfdata as read;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

/// Read a perf.data file into `out_dir/<table>.parquet`; returns a summary.
#[pyfunction]
#[pyo3(signature = (path, out_dir, *, batch_rows = 4096, compression = "lz4", progress = None))]
pub fn read_perfdata(
    py: Python<'_>,
    path: PathBuf,
    out_dir: PathBuf,
    batch_rows: usize,
    compression: &str,
    progress: Option<Py<PyAny>>,
) -> PyResult<Py<PyDict>> {
    let (s, _) = read_to_parquet(
        py,
        &out_dir,
        batch_rows,
        compression,
        &progress,
        |sink, cb| read(&path, sink, cb),
    )?;
    let d = PyDict::new(py);
    d.set_item("format", "perf.data")?;
    d.set_item("events", s.rows)?;
    d.set_item(
        "records_by_type",
        s.records
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect::<std::collections::BTreeMap<_, _>>(),
    )?;
    d.set_item("lost", s.lost)?;
    d.set_item("attrs", s.attrs)?;
    d.set_item("hostname", s.hostname)?;
    d.set_item("osrelease", s.osrelease)?;
    d.set_item("cpus", s.cpus)?;
    d.set_item("time_range", s.time_range.map(|(a, b)| vec![a, b]))?;
    d.set_item("clock", "perf")?;
    d.set_item("warnings", s.warnings)?;
    // what the read skipped or guessed, one line each: the import exits 1
    d.set_item("problems", s.problems)?;
    d.set_item("skipped_samples", s.skipped_samples)?;
    d.set_item("truncated_bytes", s.truncated_bytes)?;
    Ok(d.unbind())
}
