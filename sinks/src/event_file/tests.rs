//! Event files read back by the `parquet` crate's Arrow reader: every row,
//! null and type as written, across batches, pages and row groups, with
//! every column encoding (delta, dictionary and its fallbacks, plain).

use crate::{Codec, ParquetSink};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;
use cratrace_format::{ColumnSpec, ColumnType, EventSink, RowHeader, TableSpec, Value};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::reader::FileReader;
use parquet::file::serialized_reader::SerializedFileReader;
use parquet::file::statistics::Statistics;
use proptest::prelude::*;
use std::fs::File;
use std::path::{Path, PathBuf};

/// An owned cell, comparable whatever the column type.
#[derive(Clone, Debug, PartialEq)]
enum Cell {
    Null,
    Bool(bool),
    Int(i128),
    Float(u64),
    Text(String),
    Bytes(Vec<u8>),
    List(Vec<i128>),
}

fn cell(v: &Value<'_>, ty: &ColumnType) -> Cell {
    let int = |x: i128| -> i128 {
        // what the column keeps of the value: its own width
        match ty {
            ColumnType::I8 => x as i8 as i128,
            ColumnType::I16 => x as i16 as i128,
            ColumnType::I32 => x as i32 as i128,
            ColumnType::I64 => x as i64 as i128,
            ColumnType::U8 => x as u8 as i128,
            ColumnType::U16 => x as u16 as i128,
            ColumnType::U32 => x as u32 as i128,
            _ => x as u64 as i128,
        }
    };
    match v {
        Value::Null => Cell::Null,
        Value::Bool(b) => Cell::Bool(*b),
        Value::I64(x) => Cell::Int(int(*x as i128)),
        Value::U64(x) => Cell::Int(int(*x as i128)),
        Value::F64(x) => Cell::Float(x.to_bits()),
        Value::Str(s) => Cell::Text(s.to_string()),
        Value::Bytes(b) => Cell::Bytes(b.to_vec()),
        Value::ListI64(l) => Cell::List(l.iter().map(|&x| x as i128).collect()),
        Value::ListU64(l) => Cell::List(l.iter().map(|&x| x as i128).collect()),
    }
}

fn cell_at(a: &ArrayRef, i: usize) -> Cell {
    use arrow_array::cast::AsArray;
    use arrow_array::types::*;
    if a.is_null(i) {
        return Cell::Null;
    }
    match a.data_type() {
        DataType::Boolean => Cell::Bool(a.as_boolean().value(i)),
        DataType::Int8 => Cell::Int(a.as_primitive::<Int8Type>().value(i) as i128),
        DataType::Int16 => Cell::Int(a.as_primitive::<Int16Type>().value(i) as i128),
        DataType::Int32 => Cell::Int(a.as_primitive::<Int32Type>().value(i) as i128),
        DataType::Int64 => Cell::Int(a.as_primitive::<Int64Type>().value(i) as i128),
        DataType::UInt8 => Cell::Int(a.as_primitive::<UInt8Type>().value(i) as i128),
        DataType::UInt16 => Cell::Int(a.as_primitive::<UInt16Type>().value(i) as i128),
        DataType::UInt32 => Cell::Int(a.as_primitive::<UInt32Type>().value(i) as i128),
        DataType::UInt64 => Cell::Int(a.as_primitive::<UInt64Type>().value(i) as i128),
        DataType::Float64 => Cell::Float(a.as_primitive::<Float64Type>().value(i).to_bits()),
        DataType::Utf8 => Cell::Text(a.as_string::<i32>().value(i).to_string()),
        DataType::Binary => Cell::Bytes(a.as_binary::<i32>().value(i).to_vec()),
        DataType::List(_) => {
            let l = a.as_list::<i32>().value(i);
            Cell::List(
                (0..l.len())
                    .map(|j| match cell_at(&l, j) {
                        Cell::Int(x) => x,
                        other => panic!("list item {other:?}"),
                    })
                    .collect(),
            )
        }
        t => panic!("unexpected type {t}"),
    }
}

/// A row as written: header and one value per column (owned).
#[derive(Clone, Debug)]
struct Row {
    ts: i64,
    cpu: u32,
    pid: Option<i32>,
    instance: u16,
    values: Vec<Cell>,
}

fn value_of(c: &Cell) -> Value<'_> {
    match c {
        Cell::Null => Value::Null,
        Cell::Bool(b) => Value::Bool(*b),
        Cell::Int(x) => {
            if *x < 0 {
                Value::I64(*x as i64)
            } else {
                Value::U64(*x as u64)
            }
        }
        Cell::Float(b) => Value::F64(f64::from_bits(*b)),
        Cell::Text(s) => Value::Str(s),
        Cell::Bytes(b) => Value::Bytes(b),
        Cell::List(_) => unreachable!("lists go through list_value"),
    }
}

const INSTANCES: [&str; 3] = ["", "guest-a", "second instance"];

/// Write `rows` as table `name` through a sink of `batch_rows`-row
/// batches, read the file back; (file, rows as read).
fn round_trip(
    dir: &Path,
    types: &[ColumnType],
    rows: &[Row],
    batch_rows: usize,
    codec: Codec,
) -> (PathBuf, Vec<Row>) {
    std::fs::create_dir_all(dir).unwrap();
    let spec = TableSpec {
        name: "ev".into(),
        system: "test".into(),
        columns: types
            .iter()
            .enumerate()
            .map(|(i, t)| ColumnSpec {
                name: format!("c{i}"),
                ty: t.clone(),
            })
            .collect(),
    };
    let mut sink = ParquetSink::new(dir, batch_rows, codec);
    sink.set_instances(&INSTANCES.map(String::from));
    let t = sink.declare_table(&spec).unwrap();
    let mut lists: Vec<Vec<i64>> = Vec::new();
    let mut ulists: Vec<Vec<u64>> = Vec::new();
    for r in rows {
        lists.clear();
        ulists.clear();
        for c in &r.values {
            if let Cell::List(l) = c {
                lists.push(l.iter().map(|&x| x as i64).collect());
                ulists.push(l.iter().map(|&x| x as u64).collect());
            }
        }
        let mut k = 0;
        let values: Vec<Value<'_>> = r
            .values
            .iter()
            .zip(types)
            .map(|(c, ty)| match (c, ty) {
                (Cell::List(_), ColumnType::ListI64) => {
                    k += 1;
                    Value::ListI64(&lists[k - 1])
                }
                (Cell::List(_), _) => {
                    k += 1;
                    Value::ListU64(&ulists[k - 1])
                }
                _ => value_of(c),
            })
            .collect();
        let head = RowHeader {
            ts: r.ts,
            cpu: r.cpu,
            pid: r.pid,
            instance: r.instance,
        };
        sink.write_row(t, &head, &values).unwrap();
    }
    let files = sink.finish().unwrap();
    let path = files[0].1.clone();
    let f = File::open(&path).unwrap();
    let batches: Vec<RecordBatch> = ParquetRecordBatchReaderBuilder::try_new(f)
        .unwrap()
        .build()
        .unwrap()
        .map(|b| b.unwrap())
        .collect();
    let mut out = Vec::new();
    for b in &batches {
        for i in 0..b.num_rows() {
            let Cell::Int(ts) = cell_at(b.column(0), i) else {
                panic!("ts")
            };
            let Cell::Int(cpu) = cell_at(b.column(1), i) else {
                panic!("cpu")
            };
            let pid = match cell_at(b.column(2), i) {
                Cell::Int(p) => Some(p as i32),
                _ => None,
            };
            let Cell::Text(inst) = cell_at(b.column(3), i) else {
                panic!("instance")
            };
            out.push(Row {
                ts: ts as i64,
                cpu: cpu as u32,
                pid,
                instance: INSTANCES.iter().position(|n| *n == inst).unwrap() as u16,
                values: (4..b.num_columns())
                    .map(|c| cell_at(b.column(c), i))
                    .collect(),
            });
        }
    }
    (path, out)
}

fn assert_same(written: &[Row], read: &[Row]) {
    assert_eq!(written.len(), read.len());
    for (i, (w, r)) in written.iter().zip(read).enumerate() {
        assert_eq!(
            (w.ts, w.cpu, w.pid, w.instance),
            (r.ts, r.cpu, r.pid, r.instance),
            "row {i}"
        );
        assert_eq!(w.values, r.values, "row {i}");
    }
}

const STATES: [&str; 5] = ["running", "runnable", "blocked", "offline", "unknown"];

fn any_type() -> impl Strategy<Value = ColumnType> {
    prop_oneof![
        Just(ColumnType::Enum(&STATES)),
        Just(ColumnType::Bool),
        Just(ColumnType::I8),
        Just(ColumnType::I16),
        Just(ColumnType::I32),
        Just(ColumnType::I64),
        Just(ColumnType::U8),
        Just(ColumnType::U16),
        Just(ColumnType::U32),
        Just(ColumnType::U64),
        Just(ColumnType::F64),
        Just(ColumnType::Str),
        Just(ColumnType::Bytes),
        Just(ColumnType::ListI64),
        Just(ColumnType::ListU64),
    ]
}

fn any_cell(ty: ColumnType, few: bool) -> BoxedStrategy<Cell> {
    // `few`: values from a small set, so dictionaries are kept
    let int = if few {
        prop_oneof![Just(0i128), Just(-1), Just(7), Just(u32::MAX as i128)].boxed()
    } else {
        any::<i64>().prop_map(|x| x as i128).boxed()
    };
    let value = match ty {
        ColumnType::Bool => any::<bool>().prop_map(Cell::Bool).boxed(),
        ColumnType::F64 => any::<f64>().prop_map(|x| Cell::Float(x.to_bits())).boxed(),
        ColumnType::Str if few => prop_oneof![Just("swapper/0"), Just("qemu-system-x86"), Just("")]
            .prop_map(|s| Cell::Text(s.into()))
            .boxed(),
        ColumnType::Str => "\\PC{0,40}".prop_map(Cell::Text).boxed(),
        ColumnType::Enum(names) => proptest::sample::select(names.to_vec())
            .prop_map(|s| Cell::Text(s.into()))
            .boxed(),
        ColumnType::Bytes => proptest::collection::vec(any::<u8>(), 0..20)
            .prop_map(Cell::Bytes)
            .boxed(),
        ColumnType::ListI64 | ColumnType::ListU64 => proptest::collection::vec(any::<i64>(), 0..6)
            .prop_map(|l| Cell::List(l.into_iter().map(|x| x as i128).collect()))
            .boxed(),
        _ => int.prop_map(Cell::Int).boxed(),
    };
    prop_oneof![1 => Just(Cell::Null), 12 => value].boxed()
}

/// Cells as the column stores them (integers cut to the column's width;
/// unsigned lists hold the bits of the values).
fn stored(c: Cell, ty: &ColumnType) -> Cell {
    match (c, ty) {
        (Cell::Int(x), t) => cell(&Value::I64(x as i64), t),
        (Cell::List(l), ColumnType::ListU64) => {
            Cell::List(l.into_iter().map(|x| x as u64 as i128).collect())
        }
        (c, _) => c,
    }
}

fn table() -> impl Strategy<Value = (Vec<ColumnType>, Vec<Row>, usize)> {
    (
        proptest::collection::vec(any_type(), 0..6),
        any::<bool>(),
        1usize..40,
    )
        .prop_flat_map(|(types, few, batch)| {
            let cells: Vec<BoxedStrategy<Cell>> =
                types.iter().map(|t| any_cell(t.clone(), few)).collect();
            let row = (
                any::<i64>(),
                0u32..4,
                proptest::option::of(any::<i32>()),
                0u16..3,
                cells,
            );
            (
                Just(types),
                proptest::collection::vec(row, 0..300),
                Just(batch),
            )
        })
        .prop_map(|(types, rows, batch)| {
            let rows = rows
                .into_iter()
                .map(|(ts, cpu, pid, instance, values)| Row {
                    ts,
                    cpu,
                    pid,
                    instance,
                    values: values
                        .into_iter()
                        .zip(&types)
                        .map(|(c, t)| stored(c, t))
                        .collect(),
                })
                .collect();
            (types, rows, batch)
        })
}

fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("cratrace-event-file-{}-{name}", std::process::id()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn every_row_reads_back_as_written((types, rows, batch) in table(), codec in prop_oneof![Just(Codec::Lz4), Just(Codec::Zstd), Just(Codec::None)]) {
        let dir = scratch("prop");
        if rows.is_empty() {
            return Ok(());
        }
        let (path, read) = round_trip(&dir, &types, &rows, batch, codec);
        assert_same(&rows, &read);
        std::fs::remove_file(path).ok();
    }
}

#[test]
fn dictionaries_fall_back_pages_split_and_groups_follow_each_other() {
    let types = [
        ColumnType::U32, // 0: more distinct values than a dictionary holds
        ColumnType::Str, // 1: few names (dictionary)
        ColumnType::Str, // 2: every row different (the probe gives up)
        ColumnType::Str, // 3: long lines: several pages per batch
        ColumnType::U64, // 4: few values, the largest unsigned ones
        ColumnType::I16, // 5: negative and positive
    ];
    let n = 200_000;
    let long = "x".repeat(3000);
    let rows: Vec<Row> = (0..n)
        .map(|i| Row {
            ts: 1_000_000 + 3 * i as i64,
            cpu: (i % 3) as u32,
            pid: (i % 5 != 0).then_some(i as i32 % 1000),
            instance: (i / 10_000 % 3) as u16,
            values: vec![
                // a few values at first (the dictionary is kept), then
                // more distinct ones than it holds: it fills mid-chunk
                Cell::Int(if i < 2000 {
                    (i % 2) as i128
                } else {
                    (u32::MAX - i as u32) as i128
                }),
                if i % 11 == 0 {
                    Cell::Null
                } else {
                    Cell::Text(["kworker/0:1", "qemu-kvm", "CPU 0/KVM"][i % 3].into())
                },
                Cell::Text(format!("line {i} of the trace")),
                Cell::Text(format!("{}{i}", &long[..(i % 3000)])),
                Cell::Int([u64::MAX, u64::MAX - 1, 5][i % 3] as i128),
                Cell::Int([-32768i128, 32767, -1, 0][i % 4]),
            ],
        })
        .collect();
    let dir = scratch("big");
    let batch = 8192;
    let (path, read) = round_trip(&dir, &types, &rows, batch, Codec::Lz4);
    assert_same(&rows, &read);

    let meta = SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
    let md = meta.metadata();
    assert_eq!(
        md.num_row_groups(),
        n.div_ceil(crate::GROUP_ROWS),
        "row groups of GROUP_ROWS, whatever the batch size"
    );
    // column c's encodings in row group g, and in any row group
    let chunk_encodings = |g: usize, c: usize| -> Vec<String> {
        md.row_group(g)
            .column(c)
            .encodings()
            .map(|e| format!("{e:?}"))
            .collect()
    };
    let encodings = |c: usize| -> Vec<String> {
        let mut e: Vec<String> = (0..md.num_row_groups())
            .flat_map(|g| chunk_encodings(g, c))
            .collect();
        e.sort();
        e.dedup();
        e
    };
    assert!(
        encodings(0).contains(&"DELTA_BINARY_PACKED".into()),
        "ts: {:?}",
        encodings(0)
    );
    assert!(encodings(3).contains(&"RLE_DICTIONARY".into()), "instance");
    assert!(encodings(5).contains(&"RLE_DICTIONARY".into()), "few names");
    assert!(
        !encodings(6).contains(&"RLE_DICTIONARY".into()),
        "distinct lines"
    );
    let first = chunk_encodings(0, 4);
    assert!(
        first.contains(&"RLE_DICTIONARY".into()) && first.contains(&"PLAIN".into()),
        "the first chunk falls back: {first:?}"
    );
    let second = chunk_encodings(1, 4);
    assert!(
        !second.contains(&"RLE_DICTIONARY".into()),
        "and later chunks stay plain: {second:?}"
    );
    // statistics: exact bounds in the column's own order, null counts
    let stats = |c: usize| -> Vec<Statistics> {
        md.row_groups()
            .iter()
            .map(|g| g.column(c).statistics().unwrap().clone())
            .collect()
    };
    for (g, s) in stats(4).iter().enumerate() {
        let rows = &rows[g * crate::GROUP_ROWS..((g + 1) * crate::GROUP_ROWS).min(n)];
        let vals: Vec<u32> = rows
            .iter()
            .map(|r| match r.values[0] {
                Cell::Int(x) => x as u32,
                _ => 0,
            })
            .collect();
        let Statistics::Int32(v) = s else {
            panic!("{s:?}")
        };
        assert_eq!(
            *v.min_opt().unwrap() as u32,
            *vals.iter().min().unwrap(),
            "group {g}"
        );
        assert_eq!(
            *v.max_opt().unwrap() as u32,
            *vals.iter().max().unwrap(),
            "group {g}"
        );
    }
    for s in stats(8) {
        let Statistics::Int64(v) = s else {
            panic!("{s:?}")
        };
        assert_eq!(*v.min_opt().unwrap() as u64, 5);
        assert_eq!(*v.max_opt().unwrap() as u64, u64::MAX);
    }
    let pid_nulls: u64 = stats(2).iter().map(|s| s.null_count_opt().unwrap()).sum();
    assert_eq!(pid_nulls, (n / 5) as u64);
    std::fs::remove_dir_all(dir).ok();
}
