//! The one place Rust errors become Python exceptions.
//!
//! `CratraceError` is the root; `CorruptTraceError` and
//! `UnsupportedFormatError` say what kind of bad input it was; I/O errors
//! become the matching `OSError` subclasses; Ctrl-C becomes
//! `KeyboardInterrupt`. Messages are the readers' one-line texts, which
//! name the file, the byte offset and a stable `ERR:<tag>`.

use cratrace_format::ReadError;
use pyo3::exceptions::{PyFileNotFoundError, PyKeyboardInterrupt, PyOSError, PyPermissionError};
use pyo3::prelude::*;

pyo3::create_exception!(
    cratrace._native,
    CratraceError,
    pyo3::exceptions::PyException,
    "Root of every error cratrace raises on purpose."
);
pyo3::create_exception!(
    cratrace._native,
    CorruptTraceError,
    CratraceError,
    "A trace file is damaged: truncated, bad header, offsets past EOF."
);
pyo3::create_exception!(
    cratrace._native,
    UnsupportedFormatError,
    CratraceError,
    "Not a format (or version) cratrace reads."
);

/// Map a reader error to a Python exception.
pub fn to_py(e: ReadError) -> PyErr {
    let msg = e.to_string();
    match &e {
        ReadError::Io { source, .. } => match source.kind() {
            std::io::ErrorKind::NotFound => PyFileNotFoundError::new_err(msg),
            std::io::ErrorKind::PermissionDenied => PyPermissionError::new_err(msg),
            _ => PyOSError::new_err(msg),
        },
        ReadError::NotThisFormat { .. } | ReadError::Unsupported { .. } => {
            UnsupportedFormatError::new_err(msg)
        }
        ReadError::Corrupt { .. } => CorruptTraceError::new_err(msg),
        ReadError::Interrupted => PyKeyboardInterrupt::new_err(msg),
        _ => CratraceError::new_err(msg),
    }
}

/// A capture's table that cannot be read (`what` names the file).
pub fn damaged_table(what: String) -> PyErr {
    CratraceError::new_err(format!("damaged table: {what} (ERR:table)"))
}

/// Register the exception classes on the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("CratraceError", py.get_type::<CratraceError>())?;
    m.add("CorruptTraceError", py.get_type::<CorruptTraceError>())?;
    m.add(
        "UnsupportedFormatError",
        py.get_type::<UnsupportedFormatError>(),
    )?;
    Ok(())
}

/// The reader's progress callback: reports (done, total) bytes to the
/// optional Python callable, and stops the read (returns false) on Ctrl-C
/// or when the callable raises. Runs with the GIL taken only for the call.
pub fn progress_callback(progress: &Option<Py<PyAny>>) -> impl FnMut(u64, u64) -> bool + '_ {
    move |done: u64, total: u64| -> bool {
        Python::attach(|py| {
            if py.check_signals().is_err() {
                return false;
            }
            progress
                .as_ref()
                .is_none_or(|p| p.call1(py, (done, total)).is_ok())
        })
    }
}

/// The Parquet codec named by a reader's `compression` argument.
pub fn codec(name: &str) -> PyResult<cratrace_arrow::Codec> {
    cratrace_arrow::Codec::parse(name).ok_or_else(|| {
        pyo3::exceptions::PyValueError::new_err(format!(
            "compression {name:?}: expected lz4, zstd or none"
        ))
    })
}
