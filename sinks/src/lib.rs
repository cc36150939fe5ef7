//! Arrow/Parquet storage for decoded events.
//!
//! # Brief overview
//!
//! [`ParquetSink`] implements the readers' [`EventSink`]: every declared
//! table gets a [`RowBatch`] the reader appends to (`ts`, `cpu`, `pid`,
//! `instance`, then the event's own columns) and, once it has rows, a
//! Parquet file `<dir>/<table>.parquet`. A full batch is copied out (the
//! table goes on filling its own, in cache) and the copy goes to a thread
//! of its own, where each column is encoded and compressed as pages
//! (`event_file`, with the encodings in `encoding`), and every few
//! batches become a row group, so memory is bounded by the tables'
//! batches and row groups (held encoded) and the batches in flight
//! (16 MiB) however long the trace is. A process that may run on one
//! CPU only has no writer thread: a full batch is encoded where it lies,
//! on the reader's thread (`writer`). The files carry the Arrow schema, so
//! every reader gets the declared types back.
#![deny(missing_docs)]

mod encoding;
mod event_file;
pub mod markers;
mod table_file;
mod writer;

use arrow_schema::{DataType, Field, Schema, SchemaRef};
use cratrace_format::{ColumnType, EventSink, RowBatch, TableId, TableSpec};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::reader::FileReader;
use parquet::file::serialized_reader::SerializedFileReader;
use std::collections::VecDeque;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use writer::{BackgroundWriter, NewFile, TailFile, TailPool, TailWork};

#[cfg(test)]
pub(crate) use table_file::{read_columns, write_batch};
pub use table_file::{EncodedTable, Encodings, TableReader};

struct Table {
    spec: TableSpec,
    types: Vec<ColumnType>,
    /// A row's bytes in a batch but for text and list contents
    /// ([`fixed_row_bytes`]): what a batch in flight and a tail weigh.
    row_bytes: usize,
    schema: SchemaRef,
    rows: RowBatch,
    /// Emptied batches back from the writer, to fill next.
    spare: Vec<RowBatch>,
    /// Rows the current batch is sent at (see [`FIRST_BATCH_ROWS`]).
    limit: usize,
    /// Rows sent to the writer.
    sent: usize,
    opened: bool,
    path: PathBuf,
}

impl Table {
    /// Its file, to create at its first batch or, never sent, at the end.
    fn new_file(&self, instances: &[String]) -> NewFile {
        NewFile {
            path: self.path.clone(),
            schema: self.schema.clone(),
            types: self.types.clone(),
            instances: instances.to_vec(),
        }
    }
}

/// Rows per row group, whatever the batch size. The writer holds each
/// column chunk encoded until its group closes; groups of 65,536 rows
/// (DuckDB writes 122,880) keep a table's chunks in cache where 262,144
/// did not (docs/performance-log.md).
pub(crate) const GROUP_ROWS: usize = 1 << 16;

/// Rows of a table's first batch; after it, a batch is as large as all
/// the table's batches before it (1, 1, 2, 4, ... times this), up to the
/// sink's batch size (or [`FILL_BUDGET`]'s cut), so that the rows sent stay a multiple of the batch
/// size and row groups end where they did with full batches only. The
/// writer encodes a table only once it is sent a batch, so a table of
/// fewer rows than a full batch was all encoded after the reader had
/// finished, on one thread: on the 181 k-record Xen fixture (18 tables)
/// that serial tail was a fifth of the import.
const FIRST_BATCH_ROWS: usize = 1024;

/// Bytes of rows all tables' batches may hold together as they fill,
/// at the rows' fixed widths: a table's batch is cut to the power of two
/// of rows that keeps the sum within this (not below [`FIRST_BATCH_ROWS`]).
/// Each row is written to the next line of every column of its table;
/// 31 tables of 4,096-row batches (the real credit2 fixture's record mix)
/// are about 5 MB of such lines, beyond a core's L2 here, and the import
/// took 0.93 of the time with this budget (a Rust harness through the
/// Parquet writer, medians of 15 in turns; measured before batches were
/// copied out, see `flush_table`; since then 1 and 4 MiB are within 3%
/// either way). A file of three tables keeps 4,096 rows (1,024 took 1.07
/// of the time there).
const FILL_BUDGET: usize = 2 << 20;

/// Bytes of batches the writer may have queued before the reader waits
/// for it (the tables' fixed row widths, and their text and lists).
const BYTES_IN_FLIGHT: usize = 16 << 20;

/// Bytes of text and lists after which a table's rows are written even if
/// the batch is not full (keeps 32-bit offsets and memory bounded when
/// rows are large).
const BATCH_VAR_BYTES: usize = 64 << 20;

/// Rows in a Parquet file, from its footer (no column is read).
pub fn parquet_row_count(path: &Path) -> Result<u64, String> {
    let f = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let r = SerializedFileReader::new(f).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(r.metadata().file_metadata().num_rows().max(0) as u64)
}

/// Codec of a Parquet file's first column chunk, named as Parquet writers
/// take it (`lz4`, `zstd`, `snappy`, `gzip`, `brotli`, `lzo`,
/// `uncompressed`); None for a file without row groups.
pub fn parquet_codec(path: &Path) -> Result<Option<&'static str>, String> {
    let f = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let r = SerializedFileReader::new(f).map_err(|e| format!("{}: {e}", path.display()))?;
    let first = r
        .metadata()
        .row_groups()
        .first()
        .and_then(|g| g.columns().first())
        .map(|c| c.compression());
    Ok(first.map(|c| match c {
        Compression::UNCOMPRESSED => "uncompressed",
        Compression::SNAPPY => "snappy",
        Compression::GZIP(_) => "gzip",
        Compression::LZO => "lzo",
        Compression::BROTLI(_) => "brotli",
        Compression::LZ4 | Compression::LZ4_RAW => "lz4",
        Compression::ZSTD(_) => "zstd",
    }))
}

/// The distinct values of an integer column of a Parquet file, as 64-bit
/// patterns (a signed value sign-extended, as a kernel address printed from
/// a `long` is), read a batch at a time: the import resolves the symbols
/// `%ps` prints without holding the column or loading a dataframe library.
/// The first of `names` the file has is read; None if it has none of them.
pub fn parquet_distinct_u64(path: &Path, names: &[&str]) -> Result<Option<Vec<u64>>, String> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int64Type, UInt64Type};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::arrow::ProjectionMask;

    let at = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let f = File::open(path).map_err(|e| at(&e))?;
    let b = ParquetRecordBatchReaderBuilder::try_new(f).map_err(|e| at(&e))?;
    let Some(name) = names.iter().find(|n| b.schema().index_of(n).is_ok()) else {
        return Ok(None);
    };
    let leaf = b
        .parquet_schema()
        .columns()
        .iter()
        .position(|c| c.path().parts() == [name.to_string()])
        .ok_or_else(|| at(&format!("column {name} is not a flat column")))?;
    let mask = ProjectionMask::leaves(b.parquet_schema(), [leaf]);
    let reader = b.with_projection(mask).build().map_err(|e| at(&e))?;
    let mut seen = std::collections::HashSet::new();
    for batch in reader {
        let batch = batch.map_err(|e| at(&e))?;
        let col = batch.column(0);
        if let DataType::UInt64 = col.data_type() {
            seen.extend(col.as_primitive::<UInt64Type>().iter().flatten());
            continue;
        }
        let wide = arrow_cast::cast(col, &DataType::Int64)
            .map_err(|e| at(&format!("column {name}: {e}")))?;
        seen.extend(
            wide.as_primitive::<Int64Type>()
                .iter()
                .flatten()
                .map(|v| v as u64),
        );
    }
    let mut out: Vec<u64> = seen.into_iter().collect();
    out.sort_unstable();
    Ok(Some(out))
}

/// Writes one Parquet file per table into a directory.
pub struct ParquetSink {
    dir: PathBuf,
    batch_rows: usize,
    /// The fixed bytes of a row of every table declared, summed (see
    /// [`FILL_BUDGET`]).
    row_bytes: usize,
    instances: Vec<String>,
    tables: Vec<Table>,
    codec: Codec,
    writer: BackgroundWriter,
    /// Bytes of each batch sent and not back yet, oldest first (the
    /// writer returns them in the order sent), and their sum.
    in_flight: VecDeque<usize>,
    in_flight_bytes: usize,
}

/// How the Parquet pages are compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    /// LZ4 (raw): the default; an import about a fifth faster than with
    /// zstd here, files larger.
    Lz4,
    /// zstd level 1: smallest files, for archiving.
    Zstd,
    /// No compression.
    None,
}

impl Codec {
    /// `lz4`, `zstd` or `none` (`uncompressed` too, as Parquet names it).
    pub fn parse(name: &str) -> Option<Codec> {
        match name {
            "lz4" => Some(Codec::Lz4),
            "zstd" => Some(Codec::Zstd),
            "none" | "uncompressed" => Some(Codec::None),
            _ => None,
        }
    }

    fn parquet(self) -> Compression {
        match self {
            Codec::Lz4 => Compression::LZ4_RAW,
            Codec::Zstd => Compression::ZSTD(ZstdLevel::try_new(1).expect("level 1 is valid")),
            Codec::None => Compression::UNCOMPRESSED,
        }
    }
}

/// Arrow type of a column type.
pub fn arrow_type(t: &ColumnType) -> DataType {
    match t {
        ColumnType::Bool => DataType::Boolean,
        ColumnType::I8 => DataType::Int8,
        ColumnType::I16 => DataType::Int16,
        ColumnType::I32 => DataType::Int32,
        ColumnType::I64 => DataType::Int64,
        ColumnType::U8 => DataType::UInt8,
        ColumnType::U16 => DataType::UInt16,
        ColumnType::U32 => DataType::UInt32,
        ColumnType::U64 => DataType::UInt64,
        ColumnType::F64 => DataType::Float64,
        ColumnType::Str => DataType::Utf8,
        ColumnType::Bytes => DataType::Binary,
        ColumnType::ListI64 => DataType::List(Arc::new(Field::new("item", DataType::Int64, true))),
        ColumnType::ListU64 => DataType::List(Arc::new(Field::new("item", DataType::UInt64, true))),
        ColumnType::Enum(_) => DataType::Utf8,
        _ => DataType::Null,
    }
}

/// Bytes a row of these columns takes in a batch, but for its text and
/// list contents (their offsets counted): the header's ts and cpu, then
/// each column.
fn fixed_row_bytes(types: &[ColumnType]) -> usize {
    let width = |t: &ColumnType| match t {
        ColumnType::Bool | ColumnType::I8 | ColumnType::U8 => 1,
        ColumnType::I16 | ColumnType::U16 => 2,
        ColumnType::I32 | ColumnType::U32 | ColumnType::Enum(_) => 4,
        ColumnType::I64 | ColumnType::U64 | ColumnType::F64 => 8,
        _ => 4,
    };
    12 + types.iter().map(width).sum::<usize>()
}

fn schema_for(spec: &TableSpec) -> SchemaRef {
    let mut fields = vec![
        Field::new("ts", DataType::Int64, false),
        Field::new("cpu", DataType::Int32, false),
        Field::new("pid", DataType::Int32, true),
        Field::new("instance", DataType::Utf8, false),
    ];
    for c in &spec.columns {
        fields.push(Field::new(&c.name, arrow_type(&c.ty), true));
    }
    Arc::new(Schema::new(fields))
}

impl ParquetSink {
    /// A sink writing into `dir` (which must exist), flushing every
    /// `batch_rows` rows per table, pages compressed with `codec`.
    pub fn new(dir: &Path, batch_rows: usize, codec: Codec) -> Self {
        Self::with_writer(
            dir,
            batch_rows,
            codec,
            BackgroundWriter::start(codec, GROUP_ROWS),
        )
    }

    fn with_writer(dir: &Path, batch_rows: usize, codec: Codec, writer: BackgroundWriter) -> Self {
        let batch_rows = batch_rows.max(1);
        ParquetSink {
            dir: dir.to_path_buf(),
            batch_rows,
            row_bytes: 0,
            instances: vec![String::new()],
            tables: Vec::new(),
            codec,
            writer,
            in_flight: VecDeque::new(),
            in_flight_bytes: 0,
        }
    }

    fn flush_table(&mut self, idx: usize) -> Result<(), String> {
        let t = &mut self.tables[idx];
        if t.rows.is_empty() {
            return Ok(());
        }
        if !t.opened {
            let file = t.new_file(&self.instances);
            self.writer.open(idx, file)?;
            t.opened = true;
        }
        // The full batch is copied into one the writer is done with (or
        // else a new one at full capacity: growing one by doubling would
        // cost reallocations and page faults), which goes to the writer,
        // and the table goes on filling its own batch. Filling is a store
        // to the next line of every column; the batch's lines are in this
        // core's cache from its last fill, where a batch back from the
        // writer's core was not, and every store missed (the copy is one
        // sequential pass). The import of the x25 credit2 tiling took 0.89
        // of the time, trace.dat bench1x 0.79 (Rust harness, medians of 15
        // in turns). A spare from before the limit last grew is too small:
        // dropped.
        while let Ok((i, b)) = self.writer.returned.try_recv() {
            self.take_back(i, b);
        }
        let most = self.fill_rows();
        let t = &mut self.tables[idx];
        t.sent += t.rows.len();
        t.limit = t.sent.max(t.limit).min(most);
        let limit = t.limit;
        // A writer on this thread (one CPU) encodes the batch where it
        // lies, in cache: no copy, and it is refilled at once.
        if let Some(written) = self.writer.write_here(idx, &mut t.rows) {
            written?;
            if t.rows.capacity() < limit {
                t.rows = RowBatch::new(&t.types, limit);
            }
            return Ok(());
        }
        t.spare.retain(|b| b.capacity() >= limit);
        let mut out = t
            .spare
            .pop()
            .unwrap_or_else(|| RowBatch::new(&t.types, limit));
        t.rows.copy_into(&mut out);
        t.rows.clear();
        if t.rows.capacity() < limit {
            t.rows = RowBatch::new(&t.types, limit);
        }
        let bytes = out.len() * t.row_bytes + out.var_bytes;
        self.writer.write(idx, out)?;
        self.in_flight.push_back(bytes);
        self.in_flight_bytes += bytes;
        // Memory is bounded by bytes in flight, not batches: waiting for
        // the writer whenever four batches were queued cost the reader a
        // sleep and a wake-up each time while the writer kept up on
        // average (this bound instead: 0.91 of the time on the x25 tiling,
        // 0.86 on trace.dat bench1x, 0.84 on the generated xentrace file,
        // 0.88 on the credit2 fixture; Rust harness, medians of 9 in turns).
        while self.in_flight_bytes > BYTES_IN_FLIGHT {
            match self.writer.returned.recv() {
                Ok((i, b)) => self.take_back(i, b),
                // the writer stopped: the next send says why
                Err(_) => break,
            }
        }
        Ok(())
    }

    /// A batch the writer is done with: a spare for its table.
    fn take_back(&mut self, table: usize, b: RowBatch) {
        if let Some(bytes) = self.in_flight.pop_front() {
            self.in_flight_bytes -= bytes;
        }
        self.tables[table].spare.push(b);
    }

    /// Rows a batch holds at most: the sink's batch size, or fewer when
    /// all tables' batches would not fit in [`FILL_BUDGET`] (a power of
    /// two, so rows sent stay a multiple of it and row groups end where
    /// they would with full batches).
    fn fill_rows(&self) -> usize {
        let fit = (FILL_BUDGET / self.row_bytes.max(1)).max(FIRST_BATCH_ROWS);
        let pow2 = 1 << fit.ilog2();
        pow2.min(self.batch_rows)
    }

    /// Flush every table and close the files. Returns (table, path) pairs,
    /// in the order the tables were declared.
    ///
    /// What is left at the end (each table's last rows, and its last row
    /// group, held encoded until now, to write with the footer) is shared
    /// between the writer's thread and this one, which is idle otherwise:
    /// on the 0.18 M-record Xen fixture that tail, all on the writer, was
    /// a quarter of the import. The writer hands its files back once every
    /// batch sent is written, and both threads take tables from one pool,
    /// the largest first, until none is left.
    pub fn finish(mut self) -> Result<Vec<(String, PathBuf)>, String> {
        let opened: Vec<usize> = (0..self.tables.len())
            .filter(|&i| self.tables[i].opened)
            .collect();
        let mut released = if opened.is_empty() {
            Vec::new()
        } else {
            self.writer.release(opened)?
        }
        .into_iter()
        .peekable();
        let mut work = Vec::new();
        for (i, t) in self.tables.iter_mut().enumerate() {
            let file = match released.next_if(|(j, _, _)| *j == i) {
                Some((_, f, path)) => TailFile::Open(Box::new(f), path),
                // never created anew: that would truncate what was written
                None if t.opened => {
                    return Err(format!(
                        "{}: the Parquet writer did not hand the file back",
                        t.path.display()
                    ))
                }
                None if t.rows.is_empty() => continue,
                None => TailFile::New(t.new_file(&self.instances)),
            };
            // the rows of its open row group, and a file's fixed cost
            let rows = t.sent % GROUP_ROWS + t.rows.len();
            work.push(TailWork {
                idx: i,
                file,
                size: (64 << 10) + rows * t.row_bytes,
                rows: std::mem::replace(&mut t.rows, RowBatch::new(&t.types, 0)),
            });
        }
        let pool = Arc::new(TailPool::new(work, self.codec, GROUP_ROWS));
        // the writer may have failed meanwhile: the join below says why
        let helped = self.writer.help(pool.clone());
        let mine = pool.drain();
        let theirs = self.writer.join();
        helped?;
        let mut files = mine?;
        files.extend(theirs?);
        files.sort_by_key(|&(i, _)| i);
        Ok(files
            .into_iter()
            .map(|(i, path)| (self.tables[i].spec.name.clone(), path))
            .collect())
    }
}

impl EventSink for ParquetSink {
    fn set_instances(&mut self, names: &[String]) {
        self.instances = names.to_vec();
    }

    fn declare_table(&mut self, spec: &TableSpec) -> Result<TableId, String> {
        if let Some(i) = self.tables.iter().position(|t| t.spec.name == spec.name) {
            if self.tables[i].spec.columns != spec.columns {
                return Err(format!(
                    "table {} declared twice with different columns",
                    spec.name
                ));
            }
            return Ok(TableId(i as u32));
        }
        // a file name here and a SQL view's name later (issue 42): the
        // readers keep to these characters; anything else is refused
        if !cratrace_format::valid_table_name(&spec.name) {
            return Err(format!(
                "unsafe table name {:?} (letters, digits and _ only)",
                spec.name
            ));
        }
        let schema = schema_for(spec);
        let types: Vec<ColumnType> = spec.columns.iter().map(|c| c.ty.clone()).collect();
        let row_bytes = fixed_row_bytes(&types);
        self.row_bytes += row_bytes;
        let limit = FIRST_BATCH_ROWS.min(self.batch_rows);
        self.tables.push(Table {
            spec: spec.clone(),
            rows: RowBatch::new(&types, limit),
            spare: Vec::new(),
            limit,
            sent: 0,
            types,
            row_bytes,
            schema,
            opened: false,
            path: self.dir.join(format!("{}.parquet", spec.name)),
        });
        Ok(TableId(self.tables.len() as u32 - 1))
    }

    #[inline]
    fn batch(&mut self, table: TableId) -> &mut RowBatch {
        &mut self.tables[table.0 as usize].rows
    }

    #[inline]
    fn row_done(&mut self, table: TableId) -> Result<(), String> {
        let idx = table.0 as usize;
        let t = &self.tables[idx];
        if t.rows.len() >= t.limit || t.rows.var_bytes >= BATCH_VAR_BYTES {
            self.flush_table(idx)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cratrace_format::{ColumnSpec, ColumnType, RowHeader, Value};

    /// Table `ev` with one u64 column `a`.
    fn one_u64_column() -> TableSpec {
        TableSpec {
            name: "ev".into(),
            system: "sys".into(),
            columns: vec![ColumnSpec {
                name: "a".into(),
                ty: ColumnType::U64,
            }],
        }
    }

    /// Column `i` of the Parquet file at `path`, a u64 column without nulls.
    fn u64_column(path: &Path, i: usize) -> Vec<u64> {
        let b = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            File::open(path).unwrap(),
        )
        .unwrap()
        .build()
        .unwrap();
        let mut out = Vec::new();
        for batch in b.map(|b| b.unwrap()) {
            let x = batch
                .column(i)
                .as_any()
                .downcast_ref::<arrow_array::UInt64Array>()
                .unwrap();
            out.extend(x.values().iter().copied());
        }
        out
    }

    /// Table `name` with `n` u64 columns: 12 + 8n fixed bytes a row.
    fn u64_columns(name: &str, n: usize) -> TableSpec {
        TableSpec {
            name: name.into(),
            system: "sys".into(),
            columns: (0..n)
                .map(|i| ColumnSpec {
                    name: format!("c{i}"),
                    ty: ColumnType::U64,
                })
                .collect(),
        }
    }

    #[test]
    fn batches_shrink_to_a_power_of_two_as_tables_add_up_and_row_groups_stay_whole() {
        let dir = std::env::temp_dir().join(format!("cratrace-sink-fill-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut sink = ParquetSink::new(&dir, 4096, Codec::Lz4);
        let first = sink.declare_table(&u64_columns("t0", 8)).unwrap();
        // one table of 76 bytes a row: full batches
        assert_eq!(sink.fill_rows(), 4096);
        let write = |sink: &mut ParquetSink, rows: std::ops::Range<u64>| {
            for i in rows {
                let head = RowHeader {
                    ts: i as i64,
                    cpu: 0,
                    pid: None,
                    instance: 0,
                };
                let vals: Vec<Value> = (0..8).map(|c| Value::U64(i * 8 + c)).collect();
                sink.write_row(first, &head, &vals).unwrap();
            }
        };
        write(&mut sink, 0..10_000);
        // 9 more such tables: 760 bytes a row of each, 2 MiB / 760 = 2759
        for k in 1..10 {
            sink.declare_table(&u64_columns(&format!("t{k}"), 8))
                .unwrap();
        }
        assert_eq!(sink.fill_rows(), 2048);
        // 40 tables: 3040 bytes; 689 rows fit, but batches stay 1024
        for k in 10..40 {
            sink.declare_table(&u64_columns(&format!("t{k}"), 8))
                .unwrap();
        }
        assert_eq!(sink.fill_rows(), FIRST_BATCH_ROWS);
        write(&mut sink, 10_000..70_000);
        let files = sink.finish().unwrap();
        let (_, path) = files.iter().find(|(n, _)| n == "t0").unwrap();
        let r = SerializedFileReader::new(File::open(path).unwrap()).unwrap();
        let groups: Vec<i64> = r
            .metadata()
            .row_groups()
            .iter()
            .map(|g| g.num_rows())
            .collect();
        assert_eq!(groups, vec![GROUP_ROWS as i64, 70_000 - GROUP_ROWS as i64]);
        let c7 = u64_column(path, 4 + 7);
        assert_eq!(c7, (0..70_000u64).map(|i| i * 8 + 7).collect::<Vec<_>>());
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_writer_on_the_readers_thread_writes_the_same_files_as_one_on_its_own() {
        // tables of several sizes, text with nulls, batches cut early by
        // the fill budget: every path of flush_table and finish
        let write = |threaded: bool| -> Vec<(String, Vec<u8>)> {
            let dir = std::env::temp_dir().join(format!(
                "cratrace-sink-inline-{threaded}-{}",
                std::process::id()
            ));
            std::fs::create_dir_all(&dir).unwrap();
            let writer = BackgroundWriter::start_with(Codec::Lz4, GROUP_ROWS, threaded);
            let mut sink = ParquetSink::with_writer(&dir, 4096, Codec::Lz4, writer);
            let mut spec = u64_columns("t", 3);
            spec.columns.push(ColumnSpec {
                name: "s".into(),
                ty: ColumnType::Str,
            });
            let tables: Vec<TableId> = (0..12)
                .map(|k| {
                    spec.name = format!("t{k}");
                    sink.declare_table(&spec).unwrap()
                })
                .collect();
            for i in 0..150_000u64 {
                // table k gets every 2^k-th row of what is left: 0 to 150 k rows
                let k = (i.trailing_zeros() as usize).min(tables.len() - 1);
                let head = RowHeader {
                    ts: i as i64,
                    cpu: (i % 3) as u32,
                    pid: (i % 5 != 0).then_some(i as i32),
                    instance: 0,
                };
                let text = format!("comm-{}", i % 700);
                let vals = [
                    Value::U64(i),
                    Value::U64(i % 17),
                    Value::U64(i * 3),
                    if i % 11 == 0 {
                        Value::Null
                    } else {
                        Value::Str(&text)
                    },
                ];
                sink.write_row(tables[k], &head, &vals).unwrap();
            }
            let mut out: Vec<(String, Vec<u8>)> = sink
                .finish()
                .unwrap()
                .into_iter()
                .map(|(n, p)| (n, std::fs::read(p).unwrap()))
                .collect();
            out.sort();
            std::fs::remove_dir_all(&dir).ok();
            out
        };
        let (threaded, inline) = (write(true), write(false));
        assert_eq!(threaded.len(), 12);
        assert!(threaded == inline, "the files differ");
    }

    #[test]
    fn batches_in_flight_are_bounded_by_bytes_not_by_count() {
        let dir = std::env::temp_dir().join(format!("cratrace-sink-bytes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // 256-row batches of 2 KiB texts (512 KiB each), compressed with
        // zstd: the writer is far slower than the rows come
        let mut sink = ParquetSink::new(&dir, 256, Codec::Zstd);
        let spec = TableSpec {
            name: "texts".into(),
            system: "sys".into(),
            columns: vec![ColumnSpec {
                name: "s".into(),
                ty: ColumnType::Str,
            }],
        };
        let t = sink.declare_table(&spec).unwrap();
        // distinct, noisy texts, made first: no dictionary, real
        // compression work for the writer, a copy per row for this thread
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let texts: Vec<String> = (0..10_000)
            .map(|_| {
                (0..2048)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        (b'a' + (x % 26) as u8) as char
                    })
                    .collect()
            })
            .collect();
        let mut most = 0;
        for (i, text) in texts.iter().enumerate() {
            let head = RowHeader {
                ts: i as i64,
                cpu: 0,
                pid: None,
                instance: 0,
            };
            sink.write_row(t, &head, &[Value::Str(text)]).unwrap();
            most = most.max(sink.in_flight_bytes);
            assert!(sink.in_flight_bytes <= BYTES_IN_FLIGHT);
        }
        // a bound of four batches queued (and one being written) would
        // keep this under 8 batches' bytes
        assert!(
            most > 8 * 256 * 2048,
            "more than eight batches in flight at once: {most}"
        );
        let files = sink.finish().unwrap();
        assert_eq!(parquet_row_count(&files[0].1).unwrap(), 10_000);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn the_tail_is_shared_and_every_table_reads_back_whole_in_declared_order() {
        let dir = std::env::temp_dir().join(format!("cratrace-sink-tail-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut sink = ParquetSink::new(&dir, 4096, Codec::Lz4);
        // rows per table: never sent (under the first batch), sent once,
        // sent across a row group; one declared without rows
        let sizes = [3usize, 5000, 70_000, 0, 1500, 700, 20_000, 1];
        let ids: Vec<TableId> = (0..sizes.len())
            .map(|k| {
                sink.declare_table(&u64_columns(&format!("t{k}"), 2))
                    .unwrap()
            })
            .collect();
        let most = *sizes.iter().max().unwrap();
        for i in 0..most {
            for (k, (&id, &n)) in ids.iter().zip(&sizes).enumerate() {
                if i < n {
                    let head = RowHeader {
                        ts: i as i64,
                        cpu: k as u32,
                        pid: None,
                        instance: 0,
                    };
                    let v = (i * 10 + k) as u64;
                    sink.write_row(id, &head, &[Value::U64(v), Value::U64(v + 1)])
                        .unwrap();
                }
            }
        }
        let files = sink.finish().unwrap();
        let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["t0", "t1", "t2", "t4", "t5", "t6", "t7"]);
        for (name, path) in &files {
            let k: usize = name[1..].parse().unwrap();
            let c1 = u64_column(path, 4 + 1);
            let want: Vec<u64> = (0..sizes[k]).map(|i| (i * 10 + k) as u64 + 1).collect();
            assert_eq!(c1, want, "{name}");
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn batches_of_nulls_only_read_back_as_nulls_beside_batches_with_values() {
        // a batch whose pid and `a` are null in every row is written as
        // levels only; the next batch has values again
        let dir = std::env::temp_dir().join(format!("cratrace-sink-nulls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut sink = ParquetSink::new(&dir, 4, Codec::Lz4);
        let t = sink.declare_table(&one_u64_column()).unwrap();
        let rows: Vec<(Option<i32>, Option<u64>)> = (0..12)
            .map(|i| {
                if i < 8 {
                    (None, None)
                } else {
                    (Some(i), Some(i as u64 * 3))
                }
            })
            .collect();
        for (i, (pid, a)) in rows.iter().enumerate() {
            let head = RowHeader {
                ts: i as i64,
                cpu: 0,
                pid: *pid,
                instance: 0,
            };
            sink.write_row(t, &head, &[a.map_or(Value::Null, Value::U64)])
                .unwrap();
        }
        let files = sink.finish().unwrap();
        let f = File::open(&files[0].1).unwrap();
        let r = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
            .unwrap()
            .build()
            .unwrap();
        let (mut pids, mut a) = (Vec::new(), Vec::new());
        for b in r.map(|b| b.unwrap()) {
            let p = b
                .column(2)
                .as_any()
                .downcast_ref::<arrow_array::Int32Array>()
                .unwrap();
            pids.extend(p.iter());
            let x = b
                .column(4)
                .as_any()
                .downcast_ref::<arrow_array::UInt64Array>()
                .unwrap();
            a.extend(x.iter());
        }
        let want_pids: Vec<Option<i32>> = rows.iter().map(|r| r.0).collect();
        let want_a: Vec<Option<u64>> = rows.iter().map(|r| r.1).collect();
        assert_eq!(pids, want_pids);
        assert_eq!(a, want_a);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn writes_typed_columns_in_batches() {
        let dir = std::env::temp_dir().join(format!("cratrace-sink-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut sink = ParquetSink::new(&dir, 3, Codec::Lz4);
        sink.set_instances(&["".into(), "inst".into()]);
        let spec = TableSpec {
            name: "ev".into(),
            system: "sys".into(),
            columns: vec![
                ColumnSpec {
                    name: "a".into(),
                    ty: ColumnType::I32,
                },
                ColumnSpec {
                    name: "s".into(),
                    ty: ColumnType::Str,
                },
                ColumnSpec {
                    name: "l".into(),
                    ty: ColumnType::ListU64,
                },
            ],
        };
        let t = sink.declare_table(&spec).unwrap();
        assert_eq!(sink.declare_table(&spec).unwrap(), t);
        for i in 0..7i64 {
            let head = RowHeader {
                ts: i,
                cpu: 1,
                pid: Some(i as i32),
                instance: (i % 2) as u16,
            };
            sink.write_row(
                t,
                &head,
                &[Value::I64(-i), Value::Str("x"), Value::ListU64(&[1, 2])],
            )
            .unwrap();
        }
        assert!(sink
            .write_row(
                t,
                &RowHeader {
                    ts: 0,
                    cpu: 0,
                    pid: None,
                    instance: 0
                },
                &[Value::Null]
            )
            .is_err());
        let files = sink.finish().unwrap();
        assert_eq!(files.len(), 1);
        let f = File::open(&files[0].1).unwrap();
        let r = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
            .unwrap()
            .build()
            .unwrap();
        let batches: Vec<arrow_array::RecordBatch> = r.map(|b| b.unwrap()).collect();
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        assert_eq!(rows, 7);
        let (mut inst, mut a, mut pid) = (Vec::new(), Vec::new(), Vec::new());
        for b in &batches {
            inst.extend(
                b.column(3)
                    .as_any()
                    .downcast_ref::<arrow_array::StringArray>()
                    .unwrap()
                    .iter()
                    .map(|s| s.unwrap().to_string()),
            );
            a.extend(
                b.column(4)
                    .as_any()
                    .downcast_ref::<arrow_array::Int32Array>()
                    .unwrap()
                    .iter(),
            );
            pid.extend(
                b.column(2)
                    .as_any()
                    .downcast_ref::<arrow_array::Int32Array>()
                    .unwrap()
                    .iter(),
            );
        }
        assert_eq!(inst, ["", "inst", "", "inst", "", "inst", ""]);
        assert_eq!(a, (0..7).map(|i| Some(-i)).collect::<Vec<_>>());
        assert_eq!(pid, (0..7).map(Some).collect::<Vec<_>>());
        // min/max for numbers, none for strings (their bounds prune nothing)
        let meta = SerializedFileReader::new(File::open(&files[0].1).unwrap()).unwrap();
        let rg = meta.metadata().row_group(0);
        let stats: Vec<(String, bool)> = rg
            .columns()
            .iter()
            .map(|c| (c.column_path().string(), c.statistics().is_some()))
            .collect();
        let has = |n: &str| stats.iter().find(|(c, _)| c == n).unwrap().1;
        assert!(has("ts") && has("pid") && has("a"), "{stats:?}");
        assert!(!has("instance") && !has("s"), "{stats:?}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn the_codec_is_read_back_from_the_footer() {
        for (codec, name) in [
            (Codec::Lz4, "lz4"),
            (Codec::Zstd, "zstd"),
            (Codec::None, "uncompressed"),
        ] {
            let dir = std::env::temp_dir()
                .join(format!("cratrace-sink-codec-{}-{name}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let mut sink = ParquetSink::new(&dir, 4, codec);
            let spec = one_u64_column();
            let t = sink.declare_table(&spec).unwrap();
            sink.write_row(
                t,
                &RowHeader {
                    ts: 1,
                    cpu: 0,
                    pid: None,
                    instance: 0,
                },
                &[Value::U64(1)],
            )
            .unwrap();
            let files = sink.finish().unwrap();
            assert_eq!(parquet_codec(&files[0].1).unwrap(), Some(name));
            std::fs::remove_dir_all(&dir).ok();
        }
        assert!(parquet_codec(Path::new("/nonexistent/x.parquet"))
            .unwrap_err()
            .contains("/nonexistent/x.parquet"));
    }

    #[test]
    fn a_file_that_cannot_be_created_is_an_error_naming_it() {
        let dir = std::env::temp_dir()
            .join(format!("cratrace-sink-missing-{}", std::process::id()))
            .join("nope");
        let mut sink = ParquetSink::new(&dir, 2, Codec::Zstd);
        let spec = one_u64_column();
        let t = sink.declare_table(&spec).unwrap();
        let mut first_err = None;
        for i in 0..64 {
            let head = RowHeader {
                ts: i,
                cpu: 0,
                pid: None,
                instance: 0,
            };
            if let Err(e) = sink.write_row(t, &head, &[Value::U64(i as u64)]) {
                first_err = Some(e);
                break;
            }
        }
        // the writer thread fails on its own; whichever call learns of it says why
        let err = match first_err {
            Some(e) => e,
            None => sink.finish().unwrap_err(),
        };
        assert!(err.contains("ev.parquet"), "{err}");
    }

    #[test]
    fn a_table_created_at_the_end_that_cannot_be_is_an_error_naming_it() {
        let dir = std::env::temp_dir()
            .join(format!("cratrace-sink-missing-end-{}", std::process::id()))
            .join("nope");
        let mut sink = ParquetSink::new(&dir, 4096, Codec::Lz4);
        let t = sink.declare_table(&one_u64_column()).unwrap();
        let head = RowHeader {
            ts: 0,
            cpu: 0,
            pid: None,
            instance: 0,
        };
        // one row: never sent to the writer, its file created by finish
        sink.write_row(t, &head, &[Value::U64(1)]).unwrap();
        let err = sink.finish().unwrap_err();
        assert!(err.contains("nope/ev.parquet"), "{err}");
    }
}
