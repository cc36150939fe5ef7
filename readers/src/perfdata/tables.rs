//! The tables samples go to: one per ftrace event, typed from the event
//! formats in the tracing data exactly as trace.dat's are, and
//! `perf_sample` for every other sample (hardware counters and the like).

use super::header::Attr;
use super::sample::parse;
use super::{PerfSummary, TRACEPOINT};
use crate::bytes::Endian;
use crate::error::{ReadError, ReadResult};
use crate::ftrace::field::{FieldDecoder, FieldKind};
use crate::ftrace::format::EventFormat;
use crate::sink::{
    field_column_name, ColumnSpec, ColumnType, EventSink, RowHeader, TableId, TableSpec, Value,
};
use std::collections::HashMap;
use std::path::Path;

/// An ftrace event's table and the decoder of its fields.
struct Tp {
    spec: TableSpec,
    table: Option<TableId>,
    decoder: FieldDecoder,
    pid_offset: usize,
    rows: u64,
}

/// Samples that are not tracepoints (`perf_sample`).
#[derive(Default)]
struct Other {
    table: Option<TableId>,
    rows: u64,
}

/// Where samples go: a table per ftrace event, indexed by its event id,
/// and `perf_sample` for the rest.
pub(super) struct Tables {
    tps: Vec<Option<Tp>>,
    other: Other,
    /// Tracepoint samples no event format describes, stored untyped in
    /// `perf_sample`: (tracepoint id) -> (count, first offset).
    untyped: std::collections::BTreeMap<u64, (u64, u64)>,
    /// Samples shorter than their sample_type: (count, first offset).
    short: (u64, u64),
}

/// A table per ftrace event, indexed by its event id.
fn tracepoint_tables(
    formats: &[EventFormat],
    long: usize,
    path: &Path,
    s: &mut PerfSummary,
) -> Vec<Option<Tp>> {
    let mut count: HashMap<&str, usize> = HashMap::new();
    for fm in formats {
        *count.entry(fm.name.as_str()).or_default() += 1;
    }
    // Indexed by ftrace event id, which the kernel keeps to 16 bits
    // (`common_type`); a format claiming more is left out.
    let mut tps: Vec<Option<Tp>> = Vec::new();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for fm in formats {
        let n = seen.entry(fm.name.as_str()).or_default();
        *n += 1;
        let name = if count[fm.name.as_str()] > 1 && *n > 1 {
            format!("{}__{}", fm.system, fm.name)
        } else {
            fm.name.clone()
        };
        let mut typed = Vec::new();
        let mut columns = Vec::new();
        for fld in &fm.fields {
            let kind = FieldKind::classify(fld, long);
            columns.push(ColumnSpec {
                name: field_column_name(&fld.name),
                ty: kind.column_type(),
            });
            typed.push((fld, kind));
        }
        let pid_offset = fm
            .common
            .iter()
            .find(|c| c.name == "common_pid")
            .map_or(4, |c| c.offset);
        let id = fm.id as usize;
        if id > u16::MAX as usize {
            s.problem(format!(
                "{}: event {}:{} has id {id}, beyond 16 bits; its samples are stored untyped",
                path.display(),
                fm.system,
                fm.name
            ));
            continue;
        }
        if !crate::sink::valid_table_name(&name) {
            // the name becomes a file's and a SQL view's (issue 42)
            s.problem(format!(
                "{}: event format {:?} of system {:?}: a name outside [A-Za-z0-9_]; its samples are stored untyped",
                path.display(),
                fm.name,
                fm.system
            ));
            continue;
        }
        if tps.len() <= id {
            tps.resize_with(id + 1, || None);
        }
        tps[id] = Some(Tp {
            spec: TableSpec {
                name,
                system: fm.system.clone(),
                columns,
            },
            table: None,
            decoder: FieldDecoder::new(&typed, Endian::Little, long),
            pid_offset,
            rows: 0,
        });
    }
    tps
}

impl Tables {
    /// The tables the tracing data's formats describe (none is declared
    /// to the sink until a sample of it arrives).
    pub(super) fn new(
        formats: &[EventFormat],
        long: usize,
        path: &Path,
        s: &mut PerfSummary,
    ) -> Self {
        Tables {
            tps: tracepoint_tables(formats, long, path, s),
            other: Other::default(),
            untyped: Default::default(),
            short: (0, 0),
        }
    }

    /// Decode sample `rec` (at byte `at` of the file) of attribute
    /// `attr` into its table.
    #[inline]
    pub(super) fn emit<S: EventSink + ?Sized>(
        &mut self,
        rec: &[u8],
        at: u64,
        attr: Option<&Attr>,
        sink: &mut S,
        s: &mut PerfSummary,
    ) -> ReadResult<()> {
        let Some(a) = attr else {
            *s.records.entry(u32::MAX).or_default() += 1;
            return Ok(());
        };
        let Some(p) = parse(rec, a) else {
            if self.short.0 == 0 {
                self.short.1 = at;
            }
            self.short.0 += 1;
            return Ok(());
        };
        let ts = p.time.unwrap_or(0) as i64;
        s.time_range = Some(
            s.time_range
                .map_or((ts, ts), |(x, y)| (x.min(ts), y.max(ts))),
        );
        let cpu = p.cpu.unwrap_or(0);
        if a.kind == TRACEPOINT {
            if let (Some(raw), Some(tp)) = (
                p.raw,
                self.tps.get_mut(a.config as usize).and_then(Option::as_mut),
            ) {
                let t = match tp.table {
                    Some(t) => t,
                    None => {
                        let t = sink
                            .declare_table(&tp.spec)
                            .map_err(|what| ReadError::Sink { what })?;
                        tp.table = Some(t);
                        t
                    }
                };
                let pid = Endian::Little
                    .uint(raw, tp.pid_offset, 4)
                    .map(|v| v as u32 as i32);
                let batch = sink.batch(t);
                let row = batch.push_header(&RowHeader {
                    ts,
                    cpu,
                    pid,
                    instance: 0,
                });
                tp.decoder.append(raw, batch, row);
                sink.row_done(t).map_err(|what| ReadError::Sink { what })?;
                tp.rows += 1;
                return Ok(());
            }
            // a tracepoint sample that no format in the file describes
            // (its id damaged, the tracing data missing): kept, untyped,
            // and said (issue 42: a file cut inside the tracing data put
            // every event in perf_sample with exit 0)
            self.untyped.entry(a.config).or_insert((0, at)).0 += 1;
        }
        let t = match self.other.table {
            Some(t) => t,
            None => {
                let spec = TableSpec {
                    name: "perf_sample".into(),
                    system: "perf".into(),
                    columns: vec![
                        ColumnSpec {
                            name: "event".into(),
                            ty: ColumnType::Str,
                        },
                        ColumnSpec {
                            name: "ip".into(),
                            ty: ColumnType::U64,
                        },
                        ColumnSpec {
                            name: "period".into(),
                            ty: ColumnType::U64,
                        },
                        ColumnSpec {
                            name: "tid".into(),
                            ty: ColumnType::I64,
                        },
                    ],
                };
                let t = sink
                    .declare_table(&spec)
                    .map_err(|what| ReadError::Sink { what })?;
                self.other.table = Some(t);
                t
            }
        };
        let (pid, tid) = p
            .tid
            .map_or((None, None), |(a, b)| (Some(a as i32), Some(b as i64)));
        let vals = [
            Value::Str(&a.name),
            p.ip.map_or(Value::Null, Value::U64),
            p.period.map_or(Value::Null, Value::U64),
            tid.map_or(Value::Null, Value::I64),
        ];
        sink.write_row(
            t,
            &RowHeader {
                ts,
                cpu,
                pid,
                instance: 0,
            },
            &vals,
        )
        .map_err(|what| ReadError::Sink { what })?;
        self.other.rows += 1;
        Ok(())
    }

    /// The samples that could not be typed or read, into the summary's
    /// problems, one line per kind.
    pub(super) fn report(&self, path: &Path, s: &mut PerfSummary) {
        if !self.untyped.is_empty() {
            let n: u64 = self.untyped.values().map(|v| v.0).sum();
            let first = self.untyped.values().map(|v| v.1).min().unwrap_or(0);
            let why = if self.tps.iter().all(Option::is_none) && s.truncated_bytes > 0 {
                "the file holds no event formats (it is cut before its tracing data)"
            } else if self.tps.iter().all(Option::is_none) {
                "the file holds no event formats (its tracing data is missing or damaged)"
            } else {
                "their attributes' tracepoint ids match no event format in the file"
            };
            s.problem(format!(
                "{}: at byte {first}: {n} tracepoint samples stored untyped in perf_sample: {why}",
                path.display()
            ));
        }
        if self.short.0 > 0 {
            s.skipped_samples += self.short.0;
            s.problem(format!(
                "{}: at byte {}: {} samples shorter than their sample_type skipped (the first there)",
                path.display(),
                self.short.1,
                self.short.0
            ));
        }
    }

    /// Rows per table, into the summary.
    pub(super) fn count_rows(&self, s: &mut PerfSummary) {
        for tp in self.tps.iter().flatten().filter(|tp| tp.rows > 0) {
            *s.rows.entry(tp.spec.name.clone()).or_default() += tp.rows;
        }
        if self.other.rows > 0 {
            s.rows.insert("perf_sample".into(), self.other.rows);
        }
    }
}
