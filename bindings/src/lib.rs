//! `cratrace._native`: the one PyO3 module. Its exports are listed here,
//! once; `cratrace/_native.pyi` mirrors them for type checkers.

use cratrace_format::mapped::MappedRange;
use cratrace_format::ReadError;
use pyo3::prelude::*;

mod arrow_stream;
mod errors;
mod markers;
mod packed;
mod perfdata;
mod perfstat;
mod phase_rows;
mod postcopy;
mod replay;
mod synth_spin;
mod timelines;
mod to_parquet;
mod tracedat;
mod tracedat_writer;
mod workload;
mod xentrace;

/// Rows in a Parquet file, read from its footer: lets `cratrace import`
/// count what it wrote without loading a dataframe library.
#[pyfunction]
fn parquet_rows(path: std::path::PathBuf) -> PyResult<u64> {
    cratrace_arrow::parquet_row_count(&path).map_err(errors::damaged_table)
}

/// The distinct values of the first of `names` a Parquet file has (an
/// integer column), as unsigned 64-bit patterns; None if it has none.
#[pyfunction]
fn parquet_distinct_u64(
    py: Python<'_>,
    path: std::path::PathBuf,
    names: Vec<String>,
) -> PyResult<Option<Vec<u64>>> {
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    py.detach(|| cratrace_arrow::parquet_distinct_u64(&path, &names))
        .map_err(errors::damaged_table)
}

/// Codec of a Parquet file's first column chunk (`lz4`, `zstd`,
/// `uncompressed`, ...), None when it has no rows: lets the model write its
/// tables as the events were written without importing pyarrow.
#[pyfunction]
fn parquet_codec(path: std::path::PathBuf) -> PyResult<Option<&'static str>> {
    cratrace_arrow::parquet_codec(&path).map_err(errors::damaged_table)
}

/// BLAKE3 of a file's bytes, as hex (the GIL is released): the content
/// fingerprint `cratrace import` records for a source that came without a
/// manifest checksum. At about four times SHA-256's speed here it costs a
/// perf.data import a tenth of its time instead of a quarter. The file is
/// hashed where it lies in a mapping (no copy out of the page cache).
#[pyfunction]
fn file_blake3(py: Python<'_>, path: std::path::PathBuf) -> PyResult<String> {
    py.detach(|| {
        let mut f = std::fs::File::open(&path).map_err(|e| ReadError::io(&path, e))?;
        let len = f.metadata().map_err(|e| ReadError::io(&path, e))?.len();
        // 64-bit hosts only (a file's length fits a usize)
        let len = len as usize;
        let mut h = blake3::Hasher::new();
        if let Some(mut map) = MappedRange::map(&f, 0, len) {
            // 2 MiB at a time, each let go once hashed: the file's pages
            // would otherwise count in the import's peak memory
            let mut at = 0;
            while at < len {
                let end = (at + (2 << 20)).min(len);
                h.update(&map.bytes()[at..end]);
                map.release(at, end);
                at = end;
            }
        } else {
            // a file system that cannot map: streamed, never whole in memory
            h.update_reader(&mut f)
                .map_err(|e| ReadError::io(&path, e))?;
        }
        Ok(h.finalize().to_hex().to_string())
    })
    .map_err(errors::to_py)
}

/// How this native core was built: its version, the Cargo profile
/// (`wheel` for the extension users install, `release`/`dev` otherwise),
/// the optimisation level, whether debug assertions are on, the target and
/// the compiler. `cratrace --version` prints it.
#[pyfunction]
fn build_info() -> std::collections::BTreeMap<&'static str, String> {
    std::collections::BTreeMap::from([
        ("version", env!("CARGO_PKG_VERSION").to_owned()),
        ("profile", env!("CRATRACE_BUILD_PROFILE").to_owned()),
        ("opt_level", env!("CRATRACE_BUILD_OPT_LEVEL").to_owned()),
        ("debug_assertions", cfg!(debug_assertions).to_string()),
        ("target", env!("CRATRACE_BUILD_TARGET").to_owned()),
        ("rustc", env!("CRATRACE_BUILD_RUSTC").to_owned()),
    ])
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    m.add_function(wrap_pyfunction!(tracedat::read_tracedat, m)?)?;
    m.add_function(wrap_pyfunction!(tracedat::tracedat_kallsyms, m)?)?;
    m.add_function(wrap_pyfunction!(tracedat::tracedat_symbols, m)?)?;
    m.add_function(wrap_pyfunction!(tracedat::tracedat_floor, m)?)?;
    m.add_submodule(&tracedat::stats_module(m.py())?)?;
    m.add_function(wrap_pyfunction!(replay::replay, m)?)?;
    m.add_function(wrap_pyfunction!(replay::replay_default_costs, m)?)?;
    m.add_function(wrap_pyfunction!(replay::replay_state_names, m)?)?;
    m.add_function(wrap_pyfunction!(replay::replay_segment_state_codes, m)?)?;
    m.add_function(wrap_pyfunction!(replay::replay_param_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(replay::thermal_profile, m)?)?;
    m.add_function(wrap_pyfunction!(workload::vcpu_phases, m)?)?;
    m.add_function(wrap_pyfunction!(timelines::overlay_timeline, m)?)?;
    m.add_function(wrap_pyfunction!(timelines::vcpu_timelines, m)?)?;
    m.add_function(wrap_pyfunction!(timelines::enclosing_interval, m)?)?;
    m.add_function(wrap_pyfunction!(timelines::pause_clusters, m)?)?;
    m.add_function(wrap_pyfunction!(timelines::lock_holders, m)?)?;
    m.add(
        "VCPU_STATES",
        cratrace_timelines::vcpu::STATE_NAMES.to_vec(),
    )?;
    m.add_function(wrap_pyfunction!(workload::host_phases, m)?)?;
    m.add_function(wrap_pyfunction!(xentrace::read_xentrace, m)?)?;
    m.add_function(wrap_pyfunction!(perfdata::read_perfdata, m)?)?;
    m.add_function(wrap_pyfunction!(perfstat::read_perfstat, m)?)?;
    m.add_function(wrap_pyfunction!(postcopy::postcopy, m)?)?;
    m.add_function(wrap_pyfunction!(postcopy::postcopy_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(parquet_rows, m)?)?;
    m.add_function(wrap_pyfunction!(parquet_distinct_u64, m)?)?;
    m.add_function(wrap_pyfunction!(parquet_codec, m)?)?;
    m.add_function(wrap_pyfunction!(file_blake3, m)?)?;
    m.add_function(wrap_pyfunction!(build_info, m)?)?;
    m.add_class::<markers::MarkerLines>()?;
    m.add_class::<arrow_stream::ArrowTable>()?;
    m.add_class::<tracedat_writer::TraceDatSpool>()?;
    m.add_function(wrap_pyfunction!(synth_spin::synth_kvm_heavy_spin_loop, m)?)?;
    Ok(())
}
