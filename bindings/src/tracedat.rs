//! `read_tracedat`: trace.dat → one Parquet file per event table.

use crate::to_parquet::read_to_parquet;
use cratrace_format::tracedat::{read_tracedat as read, stats, ReadOptions, TraceDatSummary};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The trace.dat reader's stats keys (`cratrace_format::tracedat::stats`)
/// as the submodule `_native.tracedat_stats`: one attribute per key, named
/// as its Rust constant (`TS_OUT_OF_ORDER = "ts_out_of_order"`), and `ALL`,
/// every key with what it counts. The importer reads the summary's
/// `stats` through these names, never by a string of its own (issue 46).
pub fn stats_module(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    let m = PyModule::new(py, "tracedat_stats")?;
    let mut all = BTreeMap::new();
    for k in stats::ALL {
        m.add(k.ident, k.name)?;
        all.insert(k.name, k.about.trim());
    }
    m.add("ALL", all)?;
    Ok(m)
}

/// The kernel symbol table (kallsyms text) a trace.dat holds, "" when none:
/// `cratrace import` names the addresses `%ps` formats print with it.
#[pyfunction]
pub fn tracedat_kallsyms(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    py.detach(|| cratrace_format::tracedat::read_kallsyms(&path))
        .map_err(crate::errors::to_py)
}

/// Each of `addresses` named as libtraceevent's `%ps` names it, from the
/// trace.dat's kallsyms: the symbol at or below it (of several at one
/// address, the last by name), `name+0xoff` when past its start; an
/// address below every symbol, or a file without kallsyms, gives none.
/// (address, name) pairs in the addresses' order. The table is parsed
/// and searched here: as Python tuples its 120 k lines took 0.15-0.5 s
/// and 20 MB of an import.
#[pyfunction]
pub fn tracedat_symbols(
    py: Python<'_>,
    path: PathBuf,
    addresses: Vec<u64>,
) -> PyResult<Vec<(u64, String)>> {
    py.detach(|| {
        let text = cratrace_format::tracedat::read_kallsyms(&path)?;
        let mut table: Vec<(u64, &str)> = text
            .lines()
            .filter_map(|line| {
                let mut parts = line.split_whitespace();
                let addr = u64::from_str_radix(parts.next()?, 16).ok()?;
                let name = parts.nth(1)?;
                Some((addr, name))
            })
            .collect();
        table.sort_unstable();
        Ok(addresses
            .iter()
            .filter_map(|&a| {
                let i = table.partition_point(|&(at, _)| at <= a).checked_sub(1)?;
                let (at, name) = table[i];
                let off = a - at;
                Some((
                    a,
                    if off == 0 {
                        name.to_string()
                    } else {
                        format!("{name}+0x{off:x}")
                    },
                ))
            })
            .collect())
    })
    .map_err(crate::errors::to_py)
}

/// Read a trace.dat into `out_dir/<event>.parquet`; returns the summary.
/// `max_memory`: bytes of decompressed data the read may hold at once
/// (None: the reader's default, proportional to the file's size).
#[pyfunction]
#[pyo3(signature = (path, out_dir, *, batch_rows = 4096, compression = "lz4", max_memory = None, progress = None))]
pub fn read_tracedat(
    py: Python<'_>,
    path: PathBuf,
    out_dir: PathBuf,
    batch_rows: usize,
    compression: &str,
    max_memory: Option<u64>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Py<PyDict>> {
    let opts = ReadOptions {
        max_memory,
        ..ReadOptions::default()
    };
    let (s, files) = read_to_parquet(
        py,
        &out_dir,
        batch_rows,
        compression,
        &progress,
        |sink, cb| read(&path, sink, &opts, cb),
    )?;
    summary_dict(py, &s, &files)
}

fn summary_dict(
    py: Python<'_>,
    s: &TraceDatSummary,
    files: &[(String, PathBuf)],
) -> PyResult<Py<PyDict>> {
    let d = PyDict::new(py);
    d.set_item("format", "trace.dat")?;
    d.set_item("version", s.version)?;
    d.set_item("endian", s.endian)?;
    d.set_item("user_long_size", s.user_long_size)?;
    d.set_item("kernel_long_size", s.kernel_long_size)?;
    d.set_item("page_size", s.page_size)?;
    d.set_item("compression", &s.compression)?;
    d.set_item("cpus", s.cpus)?;
    d.set_item("clock", &s.clock)?;
    d.set_item("uname", &s.uname)?;
    d.set_item("tracecmd_version", &s.tracecmd_version)?;
    let inst = PyList::empty(py);
    for (name, clock, page, cpus) in &s.instances {
        let x = PyDict::new(py);
        x.set_item("name", name)?;
        x.set_item("clock", clock)?;
        x.set_item("page_size", page)?;
        x.set_item("cpus_with_data", cpus)?;
        inst.append(x)?;
    }
    d.set_item("instances", inst)?;
    d.set_item("events", s.rows.clone())?;
    d.set_item("systems", s.systems.clone())?;
    d.set_item("time_range", s.time_range.map(|(a, b)| vec![a, b]))?;
    let lost = PyDict::new(py);
    for (inst, cpus) in &s.lost {
        let c = PyDict::new(py);
        for (cpu, l) in cpus {
            if l.count > 0 || l.unknown_pages > 0 {
                let x = PyDict::new(py);
                x.set_item("count", l.count)?;
                x.set_item("unknown_pages", l.unknown_pages)?;
                c.set_item(cpu.to_string(), x)?;
            }
        }
        lost.set_item(inst, c)?;
    }
    d.set_item("lost_events", lost)?;
    let raw = PyList::empty(py);
    for f in &s.raw_fields {
        let x = PyDict::new(py);
        x.set_item("event", &f.event)?;
        x.set_item("field", &f.field)?;
        x.set_item("type", &f.c_type)?;
        x.set_item("reason", &f.reason)?;
        raw.append(x)?;
    }
    d.set_item("raw_fields", raw)?;
    d.set_item("stats", s.stats.clone())?;
    d.set_item("warnings", s.warnings.clone())?;
    // what the read skipped or guessed, one line each: the import exits 1
    d.set_item("problems", s.problems.clone())?;
    d.set_item("skipped_records", s.skipped_records)?;
    d.set_item("lost_estimate", s.lost_estimate)?;
    d.set_item("options", s.options.clone())?;
    d.set_item(
        "cmdlines",
        s.cmdlines
            .iter()
            .map(|(p, c)| (*p, c.clone()))
            .collect::<Vec<_>>(),
    )?;
    d.set_item("truncated_bytes", s.truncated_bytes)?;
    d.set_item("records", s.records)?;
    d.set_item("ts_offset", s.ts_offset)?;
    d.set_item(
        "tsc2nsec",
        s.tsc2nsec.map(|(m, sh, o)| vec![m as u64, sh as u64, o]),
    )?;
    d.set_item("cpustats", s.cpustats.clone())?;
    d.set_item("formats", s.formats.clone())?;
    d.set_item(
        "files",
        files
            .iter()
            .map(|(n, p)| (n.clone(), p.display().to_string()))
            .collect::<Vec<_>>(),
    )?;
    Ok(d.unbind())
}

/// The import's floor (issue 47): `stage` `decompress` (every page read
/// and decompressed), `decode` (and every record's fields decoded into
/// plain values, stream by stream: no merge, no rows, no Parquet) or
/// `rows` (the whole read, merge and row batches included, into a sink
/// that empties them), with the GIL released. Returns `records`, `pages`,
/// `bytes` (decompressed page bytes; `decompress` only) and `seconds`
/// (wall clock of the pass, the header read included).
#[pyfunction]
pub fn tracedat_floor(py: Python<'_>, path: PathBuf, stage: &str) -> PyResult<Py<PyDict>> {
    use cratrace_format::tracedat::{tracedat_floor as floor, FloorStage};
    let Some(st) = FloorStage::parse(stage) else {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "stage {stage:?}: expected decompress, decode or rows"
        )));
    };
    let (f, seconds) = py
        .detach(|| {
            let t0 = std::time::Instant::now();
            floor(&path, st).map(|f| (f, t0.elapsed().as_secs_f64()))
        })
        .map_err(crate::errors::to_py)?;
    let d = PyDict::new(py);
    d.set_item("stage", stage)?;
    d.set_item("records", f.records)?;
    d.set_item("pages", f.pages)?;
    d.set_item("bytes", f.bytes)?;
    d.set_item("check", f.check)?;
    d.set_item("seconds", seconds)?;
    Ok(d.unbind())
}
