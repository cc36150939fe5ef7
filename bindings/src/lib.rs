//! `cratrace._native`: the one PyO3 module. Its exports are listed here,
//! once; `cratrace/_native.pyi` mirrors them for type checkers.

use pyo3::prelude::*;

mod arrow_stream;
mod errors;
mod markers;
mod perfdata;
mod perfstat;
mod postcopy;
mod replay;
mod tracedat;
mod xentrace;

/// Rows in a Parquet file, read from its footer: lets `cratrace import`
/// count what it wrote without loading a dataframe library.
#[pyfunction]
fn parquet_rows(path: std::path::PathBuf) -> PyResult<u64> {
    cratrace_arrow::parquet_row_count(&path).map_err(errors::damaged_table)
}

/// Codec of a Parquet file's first column chunk (`lz4`, `zstd`,
/// `uncompressed`, ...), None when it has no rows: lets the model write its
/// tables as the events were written without importing pyarrow.
#[pyfunction]
fn parquet_codec(path: std::path::PathBuf) -> PyResult<Option<&'static str>> {
    cratrace_arrow::parquet_codec(&path).map_err(errors::damaged_table)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    m.add_function(wrap_pyfunction!(tracedat::read_tracedat, m)?)?;
    m.add_function(wrap_pyfunction!(replay::replay, m)?)?;
    m.add_function(wrap_pyfunction!(xentrace::read_xentrace, m)?)?;
    m.add_function(wrap_pyfunction!(perfdata::read_perfdata, m)?)?;
    m.add_function(wrap_pyfunction!(perfstat::read_perfstat, m)?)?;
    m.add_function(wrap_pyfunction!(postcopy::postcopy, m)?)?;
    m.add_function(wrap_pyfunction!(parquet_rows, m)?)?;
    m.add_function(wrap_pyfunction!(parquet_codec, m)?)?;
    m.add_class::<markers::MarkerLines>()?;
    m.add_class::<arrow_stream::ArrowTable>()?;
    Ok(())
}
