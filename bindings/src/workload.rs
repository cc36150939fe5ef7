//! `vcpu_phases` and `host_phases`: the vCPUs' recorded timelines and the
//! host threads' CPU slices turned into replay phases, each in one call
//! (cratrace-replay's `demand` module says how), for
//! `cratrace.replay.workload`.

use crate::arrow_stream::read_stream;
use crate::packed::{to_bytes, to_bytes_with};
use arrow::compute::cast;
use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type, UInt32Type, UInt8Type};
use arrow_array::{
    Array, ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, UInt8Array,
};
use arrow_schema::DataType;
use cratrace_replay::demand::{
    host_phases as host_phases_of, trim_leading_blocks, vcpu_phases as phases_of, with_barriers,
    PhaseRow, Segment, SegmentState, Slice, SwitchCosts,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// Phase columns, packed (see `packed`): thread (u32), kind (u8), a and b
/// (i64).
type PhaseBytes<'py> = (
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
);

fn packed<'py>(py: Python<'py>, thread: &[u32], rows: &[PhaseRow]) -> PyResult<PhaseBytes<'py>> {
    Ok((
        to_bytes(py, thread)?,
        to_bytes_with(py, rows, |p| p.kind)?,
        to_bytes_with(py, rows, |p| p.a)?,
        to_bytes_with(py, rows, |p| p.b)?,
    ))
}

/// A column of `b` as type `to`.
fn column(b: &RecordBatch, what: &str, name: &str, to: &DataType) -> PyResult<ArrayRef> {
    let i = b
        .schema()
        .index_of(name)
        .map_err(|_| PyValueError::new_err(format!("{what}: no column {name}")))?;
    cast(b.column(i), to).map_err(|e| PyValueError::new_err(format!("{what}: column {name}: {e}")))
}

/// The optional `speed` column of `b` (a CPU's recorded speed per row;
/// see `cratrace_replay::model::Host::cpu_speed`), checked: finite, > 0.
fn optional_speed(b: &RecordBatch, what: &str) -> PyResult<Option<Float64Array>> {
    if b.schema().index_of("speed").is_err() {
        return Ok(None);
    }
    let s = column(b, what, "speed", &DataType::Float64)?
        .as_primitive::<Float64Type>()
        .clone();
    if let Some(i) =
        (0..s.len()).find(|&i| s.is_valid(i) && !(s.value(i).is_finite() && s.value(i) > 0.0))
    {
        return Err(PyValueError::new_err(format!(
            "{what}: row {i}: speed {} is not a finite number above 0",
            s.value(i)
        )));
    }
    Ok(Some(s))
}

/// Row `i`'s speed in an optional `speed` column (1 without one, or
/// where it is null).
fn speed_of(speed: Option<&Float64Array>, i: usize) -> f64 {
    speed.filter(|s| s.is_valid(i)).map_or(1.0, |s| s.value(i))
}

/// The `state` column's codes: the model's vcpu_states names as the
/// Python side numbers them for [`vcpu_phases`] (from
/// `_native.replay_segment_state_codes()`, so the two cannot drift). Any
/// other code (preempted, null) is [`SegmentState::Other`].
pub(crate) const SEGMENT_STATE_CODES: &[(&str, u8, SegmentState)] = &[
    ("guest", 0, SegmentState::Guest),
    ("vmm", 1, SegmentState::Vmm),
    ("spinning", 2, SegmentState::Spinning),
    ("blocked", 3, SegmentState::Blocked),
    ("halted", 4, SegmentState::Halted),
    ("lost", 5, SegmentState::Lost),
];

/// State codes of the `state` column.
fn state(code: u8) -> SegmentState {
    SEGMENT_STATE_CODES
        .iter()
        .find(|&&(_, c, _)| c == code)
        .map_or(SegmentState::Other, |&(_, _, s)| s)
}

/// Per thread, its rows' index range in a table sorted by `_t`.
fn ranges(t: &[u32], threads: usize, what: &str) -> PyResult<Vec<std::ops::Range<usize>>> {
    let mut r = vec![0..0; threads];
    let mut i = 0;
    while i < t.len() {
        let k = t[i] as usize;
        let j = i + t[i..].iter().take_while(|&&x| x == t[i]).count();
        if k >= threads || !r[k].is_empty() {
            return Err(PyValueError::new_err(format!(
                "{what}: row {i}: thread {k} is not one of 0..{threads} or its rows are not together"
            )));
        }
        r[k] = i..j;
        i = j;
    }
    Ok(r)
}

/// The columns of one record batch of segments.
struct SegmentColumns {
    start: Int64Array,
    end: Int64Array,
    state: UInt8Array,
    in_spin: BooleanArray,
    cpu: Int64Array,
    /// The optional `speed` column (None: every segment at 1).
    speed: Option<Float64Array>,
}

impl SegmentColumns {
    /// Rows `rows` of the batches taken as one table, as `Segment`s in
    /// `out` (cleared first).
    fn gather(batches: &[SegmentColumns], rows: std::ops::Range<usize>, out: &mut Vec<Segment>) {
        out.clear();
        out.reserve(rows.len());
        let (mut first, mut left) = (rows.start, rows.len());
        for b in batches {
            let n = b.start.len();
            if first >= n {
                first -= n;
                continue;
            }
            let take = left.min(n - first);
            out.extend((first..first + take).map(|i| Segment {
                start: b.start.value(i),
                end: b.end.value(i),
                state: state(b.state.value(i)),
                in_spin: b.in_spin.is_valid(i) && b.in_spin.value(i),
                cpu: b.cpu.is_valid(i).then(|| b.cpu.value(i)),
                speed: speed_of(b.speed.as_ref(), i),
            }));
            left -= take;
            if left == 0 {
                break;
            }
            first = 0;
        }
    }
}

/// Phases of `critical_ns.len()` vCPU threads. `segments`: a polars frame
/// of `_t` (thread index), `start`, `end`, `state` (0 guest, 1 vmm, 2
/// spinning, 3 blocked, 4 halted, 5 lost, else other), `in_spin` and
/// `pcpu` (null: unknown), each thread's rows together and in time order;
/// `marks`: `_t` and `ts`, likewise; `barriers` (optional): `_t`,
/// `start` and `end` of each gang-barrier wait, likewise (what the vCPU
/// did during one is replaced by a barrier phase). Returns each thread's start when its
/// leading blocked or halted segments were dropped (None: none were), and
/// the phases as packed columns: thread (`first_thread` + the `_t`
/// index), kind, a, b.
#[pyfunction]
#[pyo3(signature = (*, segments, marks, critical_ns, switch_ns, migration_ns, first_thread = 0, barriers = None))]
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
pub fn vcpu_phases<'py>(
    py: Python<'py>,
    segments: &Bound<'py, PyAny>,
    marks: &Bound<'py, PyAny>,
    critical_ns: Vec<i64>,
    switch_ns: i64,
    migration_ns: i64,
    first_thread: u32,
    barriers: Option<&Bound<'py, PyAny>>,
) -> PyResult<(Vec<Option<i64>>, PhaseBytes<'py>)> {
    // The segments stay in their Arrow arrays (polars' buffers, not
    // copied) and become `Segment`s one thread at a time: all of them at
    // once were 40 bytes a segment, 150 MB for 30 s of kvm-heavy-spin.
    let (mut seg_t, mut batches) = (Vec::new(), Vec::new());
    for b in read_stream(segments, "segments")? {
        let w = "segments";
        let t = column(&b, w, "_t", &DataType::UInt32)?;
        seg_t.extend(t.as_primitive::<UInt32Type>().values().iter().copied());
        batches.push(SegmentColumns {
            start: column(&b, w, "start", &DataType::Int64)?
                .as_primitive::<Int64Type>()
                .clone(),
            end: column(&b, w, "end", &DataType::Int64)?
                .as_primitive::<Int64Type>()
                .clone(),
            state: column(&b, w, "state", &DataType::UInt8)?
                .as_primitive::<UInt8Type>()
                .clone(),
            in_spin: column(&b, w, "in_spin", &DataType::Boolean)?
                .as_boolean()
                .clone(),
            cpu: column(&b, w, "pcpu", &DataType::Int64)?
                .as_primitive::<Int64Type>()
                .clone(),
            speed: optional_speed(&b, w)?,
        });
    }
    let (mut mark_t, mut mark_ts) = (Vec::new(), Vec::new());
    for b in read_stream(marks, "marks")? {
        let t = column(&b, "marks", "_t", &DataType::UInt32)?;
        let ts = column(&b, "marks", "ts", &DataType::Int64)?;
        mark_t.extend(t.as_primitive::<UInt32Type>().values().iter().copied());
        mark_ts.extend(ts.as_primitive::<Int64Type>().values().iter().copied());
    }
    let (mut wait_t, mut waits) = (Vec::new(), Vec::new());
    if let Some(barriers) = barriers {
        for b in read_stream(barriers, "barriers")? {
            let t = column(&b, "barriers", "_t", &DataType::UInt32)?;
            let start = column(&b, "barriers", "start", &DataType::Int64)?;
            let end = column(&b, "barriers", "end", &DataType::Int64)?;
            wait_t.extend(t.as_primitive::<UInt32Type>().values().iter().copied());
            waits.extend(
                start
                    .as_primitive::<Int64Type>()
                    .values()
                    .iter()
                    .zip(end.as_primitive::<Int64Type>().values().iter())
                    .map(|(&a, &b)| (a, b)),
            );
        }
    }
    let threads = critical_ns.len();
    let (seg_at, mark_at, wait_at) = (
        ranges(&seg_t, threads, "segments")?,
        ranges(&mark_t, threads, "marks")?,
        ranges(&wait_t, threads, "barriers")?,
    );
    let costs = SwitchCosts {
        switch_ns,
        migration_ns,
    };
    let (starts, thread, rows) = py.detach(|| {
        let mut starts = Vec::with_capacity(threads);
        let (mut thread, mut rows): (Vec<u32>, Vec<PhaseRow>) = (Vec::new(), Vec::new());
        let mut segs = Vec::new();
        for (t, crit) in critical_ns.iter().enumerate() {
            SegmentColumns::gather(&batches, seg_at[t].clone(), &mut segs);
            if !wait_at[t].is_empty() {
                segs = with_barriers(&segs, &waits[wait_at[t].clone()]);
            }
            let (rest, start) = trim_leading_blocks(&segs);
            starts.push(start);
            phases_of(rest, &mark_ts[mark_at[t].clone()], *crit, costs, &mut rows);
            thread.resize(rows.len(), first_thread + t as u32);
        }
        (starts, thread, rows)
    });
    // the inputs go before the outputs are packed: the phase builder's
    // peak is then its rows and their bytes, not the segments as well
    drop((batches, seg_t, mark_t, mark_ts, wait_t, waits));
    Ok((starts, packed(py, &thread, &rows)?))
}

/// Phases of `threads` host threads from their CPU slices: `slices`, a
/// polars frame of `_t` (thread index), `start`, `end` and `cpu`, each
/// thread's rows together and in time order. Returns the phases as packed
/// columns: thread (`first_thread` + the `_t` index), kind, a, b.
#[pyfunction]
#[pyo3(signature = (*, slices, threads, switch_ns, migration_ns, first_thread = 0))]
pub fn host_phases<'py>(
    py: Python<'py>,
    slices: &Bound<'py, PyAny>,
    threads: usize,
    switch_ns: i64,
    migration_ns: i64,
    first_thread: u32,
) -> PyResult<PhaseBytes<'py>> {
    let (mut at_t, mut all) = (Vec::new(), Vec::new());
    for b in read_stream(slices, "slices")? {
        let w = "slices";
        let t = column(&b, w, "_t", &DataType::UInt32)?;
        let start = column(&b, w, "start", &DataType::Int64)?;
        let end = column(&b, w, "end", &DataType::Int64)?;
        let cpu = column(&b, w, "cpu", &DataType::Int64)?;
        if cpu.null_count() > 0 {
            return Err(PyValueError::new_err("slices: a slice without a cpu"));
        }
        let (start, end, cpu) = (
            start.as_primitive::<Int64Type>(),
            end.as_primitive::<Int64Type>(),
            cpu.as_primitive::<Int64Type>(),
        );
        let speed = optional_speed(&b, w)?;
        at_t.extend(t.as_primitive::<UInt32Type>().values().iter().copied());
        all.extend((0..b.num_rows()).map(|i| Slice {
            start: start.value(i),
            end: end.value(i),
            cpu: cpu.value(i),
            speed: speed_of(speed.as_ref(), i),
        }));
    }
    let at = ranges(&at_t, threads, "slices")?;
    let costs = SwitchCosts {
        switch_ns,
        migration_ns,
    };
    let (thread, rows) = py.detach(|| {
        let (mut thread, mut rows): (Vec<u32>, Vec<PhaseRow>) = (Vec::new(), Vec::new());
        for (t, r) in at.into_iter().enumerate() {
            host_phases_of(&all[r], costs, &mut rows);
            thread.resize(rows.len(), first_thread + t as u32);
        }
        (thread, rows)
    });
    drop((all, at_t));
    packed(py, &thread, &rows)
}
