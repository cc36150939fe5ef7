//! `overlay_timeline` and `split_runs`: one sorted pass each
//! (cratrace-timelines) for `cratrace.model.vcpu_states`: the spin
//! overlay, and running stretches cut at KVM entries and exits. Columns are read in place (copied only when polars hands
//! over more than one chunk) and the pieces' columns become Arrow arrays
//! without a copy.

use crate::arrow_stream::{read_stream, ArrowTable};
use arrow::compute::{cast, concat};
use arrow_array::cast::AsArray;
use arrow_array::types::{ArrowPrimitiveType, Int64Type, UInt32Type, UInt8Type};
use arrow_array::{
    Array, ArrayRef, BooleanArray, Int64Array, RecordBatch, UInt32Array, UInt8Array,
};
use arrow_buffer::ScalarBuffer;
use arrow_schema::{DataType, Field, Schema};
use cratrace_timelines::{overlay, split_runs as split, Intervals, Marks, Runs, Segments};
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
    let w = "segments";
    let (key, start, end) = (
        values::<UInt32Type>(&sb, w, "_key")?,
        values::<Int64Type>(&sb, w, "start")?,
        values::<Int64Type>(&sb, w, "end")?,
    );
    let eligible: Vec<bool> = column(&sb, w, "eligible", &DataType::Boolean)?
        .as_boolean()
        .values()
        .iter()
        .collect();
    let w = "over";
    let (okey, ostart, oend) = (
        values::<UInt32Type>(&ob, w, "_key")?,
        values::<Int64Type>(&ob, w, "start")?,
        values::<Int64Type>(&ob, w, "end")?,
    );
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

/// Named columns (none null) as one table for Python.
fn table(columns: Vec<(&str, ArrayRef)>) -> PyResult<ArrowTable> {
    let fields: Vec<Field> = columns
        .iter()
        .map(|(name, a)| Field::new(*name, a.data_type().clone(), false))
        .collect();
    let batch = RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns.into_iter().map(|(_, a)| a).collect(),
    )
    .map_err(|e| PyValueError::new_err(format!("timeline table: {e}")))?;
    Ok(ArrowTable::new(batch))
}

/// `runs` (a polars frame of `tid`, `start`, `end`: sorted by thread and
/// start, a thread's runs disjoint) cut at `marks` (`tid`, `ts`, `state`: a
/// u8 code; in time order): a frame of `run` (the run's row), `start`,
/// `end` and `state`, in the runs' order. A run begins in the state of its
/// thread's last mark at or before it (`initial` if none).
#[pyfunction]
#[pyo3(signature = (*, runs, marks, initial))]
pub fn split_runs(
    py: Python<'_>,
    runs: &Bound<'_, PyAny>,
    marks: &Bound<'_, PyAny>,
    initial: u8,
) -> PyResult<ArrowTable> {
    let (rb, mb) = (read_stream(runs, "runs")?, read_stream(marks, "marks")?);
    let w = "runs";
    let (tid, start, end) = (
        values::<Int64Type>(&rb, w, "tid")?,
        values::<Int64Type>(&rb, w, "start")?,
        values::<Int64Type>(&rb, w, "end")?,
    );
    let w = "marks";
    let (mtid, ts, state) = (
        values::<Int64Type>(&mb, w, "tid")?,
        values::<Int64Type>(&mb, w, "ts")?,
        values::<UInt8Type>(&mb, w, "state")?,
    );
    let pieces = py
        .detach(|| {
            split(
                Runs {
                    tid: &tid,
                    start: &start,
                    end: &end,
                },
                Marks {
                    tid: &mtid,
                    ts: &ts,
                    state: &state,
                },
                initial,
            )
        })
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    drop((rb, mb));
    table(vec![
        ("run", Arc::new(UInt32Array::from(pieces.run))),
        ("start", Arc::new(Int64Array::from(pieces.start))),
        ("end", Arc::new(Int64Array::from(pieces.end))),
        ("state", Arc::new(UInt8Array::from(pieces.state))),
    ])
}
