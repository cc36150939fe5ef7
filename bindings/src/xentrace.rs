//! `read_xentrace`: a xentrace file → one Parquet file per record type.

use crate::to_parquet::read_to_parquet;
use cratrace_format::xentrace::{read_xentrace as read, ExitReasons};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

/// Read a xentrace file into `out_dir/<table>.parquet`; returns a summary.
/// `exit_reasons` is the host's VMEXIT reason space, `vmx` or `svm`.
#[pyfunction]
#[pyo3(signature = (path, out_dir, *, cpu_hz, exit_reasons = "vmx", batch_rows = 4096, compression = "lz4", progress = None))]
#[allow(clippy::too_many_arguments)]
pub fn read_xentrace(
    py: Python<'_>,
    path: PathBuf,
    out_dir: PathBuf,
    cpu_hz: f64,
    exit_reasons: &str,
    batch_rows: usize,
    compression: &str,
    progress: Option<Py<PyAny>>,
) -> PyResult<Py<PyDict>> {
    let exits = match exit_reasons {
        "vmx" => ExitReasons::Vmx,
        "svm" => ExitReasons::Svm,
        other => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "exit_reasons {other:?}: expected \"vmx\" or \"svm\""
            )))
        }
    };
    let (s, _) = read_to_parquet(
        py,
        &out_dir,
        batch_rows,
        compression,
        &progress,
        |sink, cb| read(&path, cpu_hz, exits, sink, cb),
    )?;
    let d = PyDict::new(py);
    d.set_item("format", "xentrace")?;
    d.set_item("records", s.records)?;
    d.set_item("cpus", s.cpus)?;
    d.set_item("events", s.rows)?;
    let vol = PyDict::new(py);
    for ((cpu, class), bytes) in &s.volume {
        vol.set_item(format!("{cpu}:{class}"), bytes)?;
    }
    d.set_item("volume_bytes", vol)?;
    d.set_item(
        "lost_records",
        s.lost
            .iter()
            .map(|(c, n)| (c.to_string(), *n))
            .collect::<std::collections::BTreeMap<_, _>>(),
    )?;
    d.set_item("tsc_range", s.tsc_range.map(|(a, b)| vec![a, b]))?;
    d.set_item("time_range", s.time_range.map(|(a, b)| vec![a, b]))?;
    d.set_item("cpu_hz", cpu_hz)?;
    d.set_item("clock", "tsc")?;
    d.set_item("exit_reasons", exits.label())?;
    d.set_item("warnings", s.warnings)?;
    // what the read skipped or re-attributed, one line each: the import exits 1
    d.set_item("problems", s.problems)?;
    d.set_item("truncated_bytes", s.truncated_bytes)?;
    Ok(d.unbind())
}
