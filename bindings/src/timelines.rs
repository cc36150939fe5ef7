//! `vcpu_timelines` and `overlay_timeline`: one pass each
//! (cratrace-timelines) for `cratrace.model.vcpu_states`: the vCPU
//! threads' timelines, then the spin overlay; `enclosing_interval` for the
//! replay's reading of them (which wait a segment began in). Columns are read in place (copied only when polars hands
//! over more than one chunk) and the pieces' columns become Arrow arrays
//! without a copy.

use crate::arrow_stream::{read_stream, ArrowTable};
use arrow::compute::{cast, concat};
use arrow_array::cast::AsArray;
use arrow_array::types::{ArrowPrimitiveType, Int32Type, Int64Type, UInt32Type};
use arrow_array::{
    Array, ArrayRef, BooleanArray, Int32Array, Int64Array, RecordBatch, UInt32Array, UInt8Array,
};
use arrow_buffer::ScalarBuffer;
use arrow_schema::{DataType, Field, Schema};
use cratrace_timelines::{enclosing, overlay, spins, vcpu, Instants, Intervals, Segments};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::sync::Arc;

/// Column `name` of every batch of `what`, as one array of type `to`
/// (nulls refused).
fn column(batches: &[RecordBatch], what: &str, name: &str, to: &DataType) -> PyResult<ArrayRef> {
    let err = |e: String| PyValueError::new_err(format!("{what}: column {name}: {e}"));
    let mut parts = Vec::with_capacity(batches.len());
    for b in batches {
        let i = b
            .schema()
            .index_of(name)
            .map_err(|_| PyValueError::new_err(format!("{what}: no column {name}")))?;
        if b.column(i).null_count() > 0 {
            return Err(err("has nulls".into()));
        }
        parts.push(cast(b.column(i), to).map_err(|e| err(e.to_string()))?);
    }
    match parts.len() {
        0 => Ok(arrow_array::new_empty_array(to)),
        1 => Ok(parts.pop().expect("one part")),
        _ => concat(&parts.iter().map(|a| a.as_ref()).collect::<Vec<_>>())
            .map_err(|e| err(e.to_string())),
    }
}

/// A primitive column's values, shared with the array that holds them.
fn values<T: ArrowPrimitiveType>(
    b: &[RecordBatch],
    what: &str,
    name: &str,
) -> PyResult<ScalarBuffer<T::Native>> {
    Ok(column(b, what, name, &T::DATA_TYPE)?
        .as_primitive::<T>()
        .values()
        .clone())
}

/// The `_key`, `start` and `end` columns of keyed intervals (a timeline's
/// segments, or what is laid over them).
type Keyed = (ScalarBuffer<u32>, ScalarBuffer<i64>, ScalarBuffer<i64>);

fn keyed(b: &[RecordBatch], what: &str) -> PyResult<Keyed> {
    Ok((
        values::<UInt32Type>(b, what, "_key")?,
        values::<Int64Type>(b, what, "start")?,
        values::<Int64Type>(b, what, "end")?,
    ))
}

/// `segments` (a polars frame of `_key`, `start`, `end`, `eligible`;
/// sorted by key and start, a key's segments disjoint) cut at the
/// boundaries of `over`'s intervals (`_key`, `start`, `end`) inside the
/// eligible ones: a frame of `seg` (the segment's row), `start`, `end` and
/// `covered` (the key's intervals cover the piece), in the segments' order.
#[pyfunction]
#[pyo3(signature = (*, segments, over))]
pub fn overlay_timeline(
    py: Python<'_>,
    segments: &Bound<'_, PyAny>,
    over: &Bound<'_, PyAny>,
) -> PyResult<ArrowTable> {
    let (sb, ob) = (
        read_stream(segments, "segments")?,
        read_stream(over, "over")?,
    );
    let (key, start, end) = keyed(&sb, "segments")?;
    let eligible: Vec<bool> = column(&sb, "segments", "eligible", &DataType::Boolean)?
        .as_boolean()
        .values()
        .iter()
        .collect();
    let (okey, ostart, oend) = keyed(&ob, "over")?;
    let pieces = py
        .detach(|| {
            overlay(
                Segments {
                    key: &key,
                    start: &start,
                    end: &end,
                    eligible: &eligible,
                },
                Intervals {
                    key: &okey,
                    start: &ostart,
                    end: &oend,
                },
            )
        })
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    drop((sb, ob));
    table(vec![
        ("seg", Arc::new(UInt32Array::from(pieces.seg))),
        ("start", Arc::new(Int64Array::from(pieces.start))),
        ("end", Arc::new(Int64Array::from(pieces.end))),
        ("covered", Arc::new(BooleanArray::from(pieces.covered))),
    ])
}

/// For each instant of `instants` (a polars frame of `_key`, `at`; sorted
/// by key and time), the start of the run of `over`'s intervals (`_key`,
/// `start`, `end`; overlapping and touching ones merged) holding it: a
/// frame of `start`, null where no run holds the instant.
#[pyfunction]
#[pyo3(signature = (*, instants, over))]
pub fn enclosing_interval(
    py: Python<'_>,
    instants: &Bound<'_, PyAny>,
    over: &Bound<'_, PyAny>,
) -> PyResult<ArrowTable> {
    let (ib, ob) = (
        read_stream(instants, "instants")?,
        read_stream(over, "over")?,
    );
    let (key, at) = (
        values::<UInt32Type>(&ib, "instants", "_key")?,
        values::<Int64Type>(&ib, "instants", "at")?,
    );
    let (okey, ostart, oend) = keyed(&ob, "over")?;
    drop((ib, ob));
    let starts = py
        .detach(|| {
            enclosing(
                Instants { key: &key, at: &at },
                Intervals {
                    key: &okey,
                    start: &ostart,
                    end: &oend,
                },
            )
        })
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    table(vec![("start", Arc::new(Int64Array::from(starts)))])
}

/// Named columns as one table for Python.
fn table(columns: Vec<(&str, ArrayRef)>) -> PyResult<ArrowTable> {
    let fields: Vec<Field> = columns
        .iter()
        .map(|(name, a)| Field::new(*name, a.data_type().clone(), a.null_count() > 0))
        .collect();
    let batch = RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns.into_iter().map(|(_, a)| a).collect(),
    )
    .map_err(|e| PyValueError::new_err(format!("timeline table: {e}")))?;
    Ok(ArrowTable::new(batch))
}

/// The vCPU threads' timelines before spin episodes, in one pass
/// (cratrace-timelines' `vcpu::vcpu_timelines`, which documents the
/// rules): `threads` (`tid`, `_key`), `runs` (`tid`, `start`, `end`, `cpu`;
/// sorted by thread and start), `outs` (`tid`, `ts`, `prev_state`),
/// `entries` (`tid`, `ts`; time order), `exits` (`tid`, `ts`, `reason`;
/// time order), `wakeups` (`tid`, `ts`). A frame of `_key`, `tid`,
/// `state` (a code of `VCPU_STATES`), `start`, `end` and `pcpu` (null off
/// any CPU), sorted by key and start. A time window of a timeline built
/// in windows: `span` is the window's, `lead` false after the first, and
/// `marked` when the threads have KVM marks (`vcpu::Inputs`).
#[pyfunction]
#[pyo3(signature = (*, threads, runs, outs, entries, exits, wakeups, span, halts, lead = true, marked = false))]
#[allow(clippy::too_many_arguments)]
pub fn vcpu_timelines(
    py: Python<'_>,
    threads: &Bound<'_, PyAny>,
    runs: &Bound<'_, PyAny>,
    outs: &Bound<'_, PyAny>,
    entries: &Bound<'_, PyAny>,
    exits: &Bound<'_, PyAny>,
    wakeups: &Bound<'_, PyAny>,
    span: (i64, i64),
    halts: Vec<i64>,
    lead: bool,
    marked: bool,
) -> PyResult<ArrowTable> {
    let i64s = |b: &[RecordBatch], what: &str, name: &str| values::<Int64Type>(b, what, name);
    let (tb, rb) = (read_stream(threads, "threads")?, read_stream(runs, "runs")?);
    let (ttid, tkey) = (
        i64s(&tb, "threads", "tid")?,
        values::<UInt32Type>(&tb, "threads", "_key")?,
    );
    let (rtid, rstart, rend) = (
        i64s(&rb, "runs", "tid")?,
        i64s(&rb, "runs", "start")?,
        i64s(&rb, "runs", "end")?,
    );
    let rcpu = values::<Int32Type>(&rb, "runs", "cpu")?;
    let ob = read_stream(outs, "outs")?;
    let (otid, ots, ostate) = (
        i64s(&ob, "outs", "tid")?,
        i64s(&ob, "outs", "ts")?,
        i64s(&ob, "outs", "prev_state")?,
    );
    let nb = read_stream(entries, "entries")?;
    let (ntid, nts) = (i64s(&nb, "entries", "tid")?, i64s(&nb, "entries", "ts")?);
    let xb = read_stream(exits, "exits")?;
    let (xtid, xts, xreason) = (
        i64s(&xb, "exits", "tid")?,
        i64s(&xb, "exits", "ts")?,
        i64s(&xb, "exits", "reason")?,
    );
    let wb = read_stream(wakeups, "wakeups")?;
    let (wtid, wts) = (i64s(&wb, "wakeups", "tid")?, i64s(&wb, "wakeups", "ts")?);
    drop((tb, rb, ob, nb, xb, wb));
    let tl = py
        .detach(|| {
            vcpu::vcpu_timelines(vcpu::Inputs {
                threads: vcpu::Threads {
                    tid: &ttid,
                    key: &tkey,
                },
                runs: vcpu::Stretches {
                    tid: &rtid,
                    start: &rstart,
                    end: &rend,
                    cpu: &rcpu,
                },
                outs: vcpu::Events {
                    tid: &otid,
                    ts: &ots,
                    value: &ostate,
                },
                entries: vcpu::Events {
                    tid: &ntid,
                    ts: &nts,
                    value: &[],
                },
                exits: vcpu::Events {
                    tid: &xtid,
                    ts: &xts,
                    value: &xreason,
                },
                wakeups: vcpu::Events {
                    tid: &wtid,
                    ts: &wts,
                    value: &[],
                },
                span,
                lead,
                marked,
                halts: &halts,
            })
        })
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let pcpu: Int32Array = tl
        .cpu
        .iter()
        .map(|&c| (c != vcpu::NO_CPU).then_some(c))
        .collect();
    table(vec![
        ("_key", Arc::new(UInt32Array::from(tl.key))),
        ("tid", Arc::new(Int64Array::from(tl.tid))),
        ("state", Arc::new(UInt8Array::from(tl.state))),
        ("start", Arc::new(Int64Array::from(tl.start))),
        ("end", Arc::new(Int64Array::from(tl.end))),
        ("pcpu", Arc::new(pcpu)),
    ])
}

/// `exits` (a polars frame of `tid`, `ts`: vCPU threads' PAUSE exits, in
/// time order) as spin episodes (cratrace-timelines' `spins::
/// pause_clusters`: a new one after a thread's gap over `gap_ns`): a frame
/// of `tid`, `start`, `end` and `exits`, in the order they began.
#[pyfunction]
#[pyo3(signature = (*, exits, gap_ns))]
pub fn pause_clusters(
    py: Python<'_>,
    exits: &Bound<'_, PyAny>,
    gap_ns: i64,
) -> PyResult<ArrowTable> {
    let b = read_stream(exits, "exits")?;
    let (tid, ts) = (
        values::<Int64Type>(&b, "exits", "tid")?,
        values::<Int64Type>(&b, "exits", "ts")?,
    );
    drop(b);
    let c = py
        .detach(|| spins::pause_clusters(&tid, &ts, gap_ns))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    table(vec![
        ("tid", Arc::new(Int64Array::from(c.tid))),
        ("start", Arc::new(Int64Array::from(c.start))),
        ("end", Arc::new(Int64Array::from(c.end))),
        ("exits", Arc::new(UInt32Array::from(c.exits))),
    ])
}

/// Each spin episode's candidate lock holder (cratrace-timelines' `spins::
/// lock_holders`: the lowest other vCPU of its VM preempted when it
/// began): `episodes` (`_vm`, `vcpu`, `start`) and `preemptions` (`_vm`,
/// `vcpu`, `start`, `end`), the VMs numbered alike; a frame of
/// `holder_vcpu`, null where no sibling was preempted.
#[pyfunction]
#[pyo3(signature = (*, episodes, preemptions))]
pub fn lock_holders(
    py: Python<'_>,
    episodes: &Bound<'_, PyAny>,
    preemptions: &Bound<'_, PyAny>,
) -> PyResult<ArrowTable> {
    let (eb, pb) = (
        read_stream(episodes, "episodes")?,
        read_stream(preemptions, "preemptions")?,
    );
    let (evm, evcpu, es) = (
        values::<UInt32Type>(&eb, "episodes", "_vm")?,
        values::<Int32Type>(&eb, "episodes", "vcpu")?,
        values::<Int64Type>(&eb, "episodes", "start")?,
    );
    let (pvm, pvcpu, ps, pe) = (
        values::<UInt32Type>(&pb, "preemptions", "_vm")?,
        values::<Int32Type>(&pb, "preemptions", "vcpu")?,
        values::<Int64Type>(&pb, "preemptions", "start")?,
        values::<Int64Type>(&pb, "preemptions", "end")?,
    );
    drop((eb, pb));
    let holders = py
        .detach(|| {
            spins::lock_holders(
                spins::Episodes {
                    vm: &evm,
                    vcpu: &evcpu,
                    start: &es,
                },
                spins::Preemptions {
                    vm: &pvm,
                    vcpu: &pvcpu,
                    start: &ps,
                    end: &pe,
                },
            )
        })
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    table(vec![("holder_vcpu", Arc::new(Int32Array::from(holders)))])
}
