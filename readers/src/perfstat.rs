//! `perf stat -I <ms> -x, -A` interval output → the `perf_counter` table.
//!
//! Each line is `time,CPU<n>,value,unit,event,run,percent,...`: one CPU's
//! counter delta over the interval ending at `time` (seconds since perf
//! started). `# ...` lines and blank lines are perf's comments and padding.
//! A value perf could not read (`<not supported>`, `<not counted>`) is
//! null. Times become nanoseconds on the trace clock by adding perf's
//! start time on CLOCK_MONOTONIC, which the collector records; without it
//! they stay relative to perf's start.
//!
//! perf writes intervals in time order, so lines stream straight to the
//! sink; a line that goes back in time is damage and stops the read.

use crate::error::{ReadError, ReadResult};
use crate::sink::{ColumnSpec, ColumnType, EventSink, RowHeader, TableSpec, Value};
use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

/// What a perf stat file held.
#[derive(Debug, Default)]
pub struct PerfStatSummary {
    /// Rows written to `perf_counter`.
    pub rows: u64,
    /// Counter (event) names, sorted.
    pub counters: BTreeSet<String>,
    /// Highest CPU number + 1.
    pub cpus: u32,
    /// First and last row time (ns on the output clock).
    pub time_range: Option<(i64, i64)>,
}

fn corrupt(path: &Path, offset: u64, line: usize, what: String) -> ReadError {
    ReadError::corrupt(path, offset, "corrupt-csv", format!("line {line}: {what}"))
}

/// Read `path` into `sink` as the `perf_counter` table. `start_ns` is
/// perf's start on the trace clock, if known.
pub fn read_perfstat<S: EventSink + ?Sized>(
    path: &Path,
    start_ns: Option<i64>,
    sink: &mut S,
) -> ReadResult<PerfStatSummary> {
    let file = File::open(path).map_err(|e| ReadError::io(path, e))?;
    let mut reader = BufReader::new(file);
    let columns = [
        ("counter", ColumnType::Str),
        ("value", ColumnType::F64),
        ("unit", ColumnType::Str),
        ("interval_ns", ColumnType::I64),
    ];
    let spec = TableSpec {
        name: "perf_counter".into(),
        system: "perf".into(),
        columns: columns
            .iter()
            .map(|(n, t)| ColumnSpec {
                name: (*n).into(),
                ty: t.clone(),
            })
            .collect(),
    };
    sink.set_instances(&[String::new()]);
    let mut table = None;
    let mut s = PerfStatSummary::default();
    // the previous interval's end per (cpu, counter): intervals are deltas
    let mut last_end: HashMap<(u32, String), i64> = HashMap::new();
    let (mut line, mut lineno, mut offset, mut prev_rel) = (String::new(), 0usize, 0u64, i64::MIN);
    loop {
        line.clear();
        let n = reader
            .read_line(&mut line)
            .map_err(|e| ReadError::io(path, e))?;
        if n == 0 {
            break;
        }
        lineno += 1;
        let at = offset;
        offset += n as u64;
        let text = line.trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() || text.trim_start().starts_with('#') {
            continue;
        }
        let f: Vec<&str> = text.split(',').collect();
        if f.len() < 5 {
            continue;
        }
        let t: f64 = f[0].trim().parse().map_err(|_| {
            corrupt(
                path,
                at,
                lineno,
                format!("interval time {:?} is not a number", f[0].trim()),
            )
        })?;
        if !t.is_finite() || t < 0.0 {
            return Err(corrupt(
                path,
                at,
                lineno,
                format!("interval time {t} is not a time"),
            ));
        }
        let cpu: u32 = f[1]
            .strip_prefix("CPU")
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| {
                corrupt(
                    path,
                    at,
                    lineno,
                    format!(
                        "{:?} is not CPU<n>: per-CPU counts are needed (perf stat -A)",
                        f[1]
                    ),
                )
            })?;
        let value = if f[2].starts_with('<') {
            None
        } else {
            Some(f[2].trim().parse::<f64>().map_err(|_| {
                corrupt(
                    path,
                    at,
                    lineno,
                    format!("counter value {:?} is not a number", f[2]),
                )
            })?)
        };
        let rel = (t * 1e9).round() as i64;
        if rel < prev_rel {
            return Err(corrupt(
                path,
                at,
                lineno,
                format!("interval time {t} s is earlier than the line before"),
            ));
        }
        prev_rel = rel;
        let counter = f[4];
        let interval = match last_end.entry((cpu, counter.to_string())) {
            Entry::Occupied(mut prev) => rel - prev.insert(rel),
            Entry::Vacant(first) => *first.insert(rel),
        };
        let ts = rel + start_ns.unwrap_or(0);
        let id = match table {
            Some(id) => id,
            None => *table.insert(
                sink.declare_table(&spec)
                    .map_err(|what| ReadError::Sink { what })?,
            ),
        };
        let unit = if f[3].is_empty() {
            Value::Null
        } else {
            Value::Str(f[3])
        };
        let row = [
            Value::Str(counter),
            value.map_or(Value::Null, Value::F64),
            unit,
            Value::I64(interval),
        ];
        sink.write_row(
            id,
            &RowHeader {
                ts,
                cpu,
                pid: None,
                instance: 0,
            },
            &row,
        )
        .map_err(|what| ReadError::Sink { what })?;
        s.rows += 1;
        s.cpus = s.cpus.max(cpu + 1);
        if !s.counters.contains(counter) {
            s.counters.insert(counter.to_string());
        }
        s.time_range = Some(
            s.time_range
                .map_or((ts, ts), |(a, b)| (a.min(ts), b.max(ts))),
        );
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::MemorySink;

    /// The `perf_counter` rows of a sink, as (ts, cpu, pid, values).
    fn rows(sink: &MemorySink) -> Vec<(i64, u32, Option<i32>, String)> {
        assert_eq!(sink.tables.len(), 1);
        let b = sink.table("perf_counter").expect("perf_counter declared");
        (0..b.len())
            .map(|i| {
                let (h, v) = b.row(i);
                (h.ts, h.cpu, h.pid, format!("{v:?}"))
            })
            .collect()
    }

    fn file(name: &str, text: &str) -> std::path::PathBuf {
        let p =
            std::env::temp_dir().join(format!("cratrace-perfstat-{}-{name}", std::process::id()));
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn intervals_become_rows_with_deltas_per_cpu_and_counter() {
        let p = file(
            "ok",
            "# started on Sun Nov 22 17:24:44 2026\n\n     0.100351624,CPU0,<not supported>,,cycles,0,100.00,,\n     0.100351624,CPU1,1234,,instructions,100,100.00,,\n     0.200000000,CPU1,99.5,msec,task-clock,100,100.00,,\n     0.300000000,CPU1,7,,instructions,100,100.00,,\n",
        );
        let mut sink = MemorySink::default();
        let s = read_perfstat(&p, Some(1_000), &mut sink).unwrap();
        assert_eq!(s.rows, 4);
        assert_eq!(s.cpus, 2);
        assert_eq!(
            s.counters.iter().map(String::as_str).collect::<Vec<_>>(),
            ["cycles", "instructions", "task-clock"]
        );
        assert_eq!(s.time_range, Some((100_352_624, 300_001_000)));
        let r = &rows(&sink);
        assert_eq!((r[0].0, r[0].1, r[0].2), (100_352_624, 0, None));
        assert_eq!(r[0].3, r#"[Str("cycles"), Null, Null, I64(100351624)]"#);
        assert_eq!(
            r[1].3,
            r#"[Str("instructions"), F64(1234.0), Null, I64(100351624)]"#
        );
        assert_eq!(
            r[2].3,
            r#"[Str("task-clock"), F64(99.5), Str("msec"), I64(200000000)]"#
        );
        // the second instructions interval on CPU1 is 0.1003 → 0.3
        assert_eq!(
            r[3].3,
            r#"[Str("instructions"), F64(7.0), Null, I64(199648376)]"#
        );
        std::fs::remove_file(p).ok();
    }

    #[test]
    fn damage_is_an_error_naming_the_line_and_byte() {
        for (name, text, want) in [
            (
                "time",
                "0.1,CPU0,1,,cycles,0,100.00,,\nabc,CPU0,1,,cycles,0,100.00,,\n",
                "line 2: interval time \"abc\"",
            ),
            ("cpu", "0.1,S0,1,,cycles,0,100.00,,\n", "(perf stat -A)"),
            (
                "value",
                "0.1,CPU0,1x,,cycles,0,100.00,,\n",
                "counter value \"1x\"",
            ),
            (
                "back",
                "0.2,CPU0,1,,cycles,0,100.00,,\n0.1,CPU0,1,,cycles,0,100.00,,\n",
                "earlier than the line before",
            ),
        ] {
            let p = file(name, text);
            let e = read_perfstat(&p, None, &mut MemorySink::default()).unwrap_err();
            let msg = e.to_string();
            assert!(
                msg.contains(want)
                    && msg.contains("ERR:corrupt-csv")
                    && msg.contains(&p.display().to_string()),
                "{msg}"
            );
            if name == "time" || name == "back" {
                assert!(msg.contains("at byte 30:"), "{msg}");
            }
            std::fs::remove_file(p).ok();
        }
    }
}
