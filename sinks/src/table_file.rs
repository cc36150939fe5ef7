//! Whole tables to and from one Parquet file, for the model tables built in
//! Rust: read the named columns of an event table; write a table whose
//! columns are encoded in parallel, and as soon as each exists.

use crate::Codec;
use arrow_array::RecordBatch;
use arrow_array::{Array, ArrayRef};
use arrow_schema::SchemaRef;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::arrow_writer::{compute_leaves, ArrowColumnChunk, ArrowRowGroupWriterFactory};
use parquet::arrow::{add_encoded_arrow_schema_to_metadata, ArrowSchemaConverter, ProjectionMask};
use parquet::basic::Encoding;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::ColumnPath;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

/// Rows per record batch read and per row group written: large enough that
/// per-batch costs vanish, small enough that readers can split the file.
pub const ROWS: usize = 1 << 18;

/// The columns of `path` named in `columns` that it has (in file order),
/// as record batches, all at once (the tests' way of reading a file back).
#[cfg(test)]
pub(crate) fn read_columns(path: &Path, columns: &[&str]) -> Result<Vec<RecordBatch>, String> {
    TableReader::open(path, columns)?.collect()
}

/// Batches of some columns of a Parquet file, read one at a time (a caller
/// that is done with each before the next keeps one batch in memory, and
/// the allocator hands the next one the same pages), with the sizes a
/// caller needs to allocate its output once.
pub struct TableReader {
    batches: parquet::arrow::arrow_reader::ParquetRecordBatchReader,
    path: String,
    rows: usize,
    bytes: Vec<(String, usize)>,
}

impl TableReader {
    /// Open `path` for the columns named in `columns` that it has.
    pub fn open(path: &Path, columns: &[&str]) -> Result<Self, String> {
        let at = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
        let f = File::open(path).map_err(|e| at(&e))?;
        let b = ParquetRecordBatchReaderBuilder::try_new(f).map_err(|e| at(&e))?;
        let wanted: Vec<usize> = b
            .schema()
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, f)| columns.contains(&f.name().as_str()))
            .map(|(i, _)| i)
            .collect();
        let md = b.metadata().clone();
        let rows = md.file_metadata().num_rows().max(0) as usize;
        let leaves = b.parquet_schema().columns();
        let bytes = wanted
            .iter()
            .filter_map(|&i| {
                leaves.get(i).map(|c| {
                    (
                        c.name().to_string(),
                        md.row_groups()
                            .iter()
                            .map(|g| g.column(i).uncompressed_size().max(0) as usize)
                            .sum(),
                    )
                })
            })
            .collect();
        let mask = ProjectionMask::roots(b.parquet_schema(), wanted);
        let batches = b
            .with_projection(mask)
            .with_batch_size(ROWS)
            .build()
            .map_err(|e| at(&e))?;
        Ok(TableReader {
            batches,
            path: path.display().to_string(),
            rows,
            bytes,
        })
    }

    /// Rows in the file.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Uncompressed bytes of column `name` in the file (values, lengths and
    /// page headers: an upper bound on its values' bytes); 0 if not read.
    pub fn uncompressed_bytes(&self, name: &str) -> usize {
        self.bytes
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, b)| *b)
    }
}

impl Iterator for TableReader {
    type Item = Result<RecordBatch, String>;

    fn next(&mut self) -> Option<Self::Item> {
        self.batches
            .next()
            .map(|b| b.map_err(|e| format!("{}: {e}", self.path)))
    }
}

/// How some columns of a written table are encoded (the others: plain,
/// with min/max statistics).
#[derive(Default)]
pub struct Encodings<'a> {
    /// Dictionary-encoded: columns of few distinct values (it costs more
    /// than it saves on per-row text).
    pub dictionary: &'a [&'a str],
    /// Delta-encoded: timestamps, CPU numbers.
    pub delta: &'a [&'a str],
    /// Without min/max statistics: free text, where comparing every value
    /// to find them is a visible part of the write and no query prunes on
    /// them.
    pub without_statistics: &'a [&'a str],
}

/// Write `batch` to `path` (created or truncated) compressed with `codec`,
/// encoded as `enc` says (the tests' way of making a file).
#[cfg(test)]
pub(crate) fn write_batch(
    path: &Path,
    batch: &RecordBatch,
    codec: Codec,
    enc: &Encodings,
) -> Result<(), String> {
    let mut t = EncodedTable::new(batch.schema(), batch.num_rows(), codec, enc)?;
    let all: Vec<usize> = (0..batch.num_columns()).collect();
    t.encode(&all, batch.columns())?;
    t.write(path)
}

/// A table's columns encoded into Parquet column chunks before its file is
/// written: the columns can be encoded on several threads, each as soon as
/// it exists (a table whose last columns wait for another table gets the
/// rest done first), and row group by row group as a reader streams them.
pub struct EncodedTable {
    schema: SchemaRef,
    props: Arc<WriterProperties>,
    parquet_root: parquet::schema::types::TypePtr,
    factory: ArrowRowGroupWriterFactory,
    /// rows per row group
    groups: Vec<usize>,
    /// per column, its chunk for each row group encoded so far
    chunks: Vec<Vec<ArrowColumnChunk>>,
}

impl EncodedTable {
    /// A table of `rows` rows (in row groups of up to `ROWS`) with this
    /// schema, to be compressed with `codec` and encoded as `enc` says.
    pub fn new(
        schema: SchemaRef,
        rows: usize,
        codec: Codec,
        enc: &Encodings,
    ) -> Result<Self, String> {
        let mut t = Self::streamed(schema, codec, enc)?;
        t.groups = (0..rows)
            .step_by(ROWS)
            .map(|start| ROWS.min(rows - start))
            .collect();
        Ok(t)
    }

    /// A table whose row groups are added by [`Self::push_group`].
    pub fn streamed(schema: SchemaRef, codec: Codec, enc: &Encodings) -> Result<Self, String> {
        let mut props = WriterProperties::builder()
            .set_compression(codec.parquet())
            .set_dictionary_enabled(false)
            .set_max_row_group_row_count(Some(ROWS));
        for c in enc.dictionary {
            props = props.set_column_dictionary_enabled(ColumnPath::from(*c), true);
        }
        for c in enc.delta {
            props = props.set_column_encoding(ColumnPath::from(*c), Encoding::DELTA_BINARY_PACKED);
        }
        for c in enc.without_statistics {
            props =
                props.set_column_statistics_enabled(ColumnPath::from(*c), EnabledStatistics::None);
        }
        let mut props = props.build();
        // what ArrowWriter stores too: readers get the Arrow types back exactly
        add_encoded_arrow_schema_to_metadata(&schema, &mut props);
        let props = Arc::new(props);
        let parquet_schema = ArrowSchemaConverter::new()
            .convert(&schema)
            .map_err(|e| format!("schema: {e}"))?;
        if parquet_schema.num_columns() != schema.fields().len() {
            return Err("schema: nested columns are not supported here".into());
        }
        let parquet_root = parquet_schema.root_schema_ptr();
        // the factory only needs the file's schema and properties, not the file
        let probe = SerializedFileWriter::new(std::io::sink(), parquet_root.clone(), props.clone())
            .map_err(|e| format!("schema: {e}"))?;
        let factory = ArrowRowGroupWriterFactory::new(&probe, schema.clone());
        let chunks = (0..schema.fields().len()).map(|_| Vec::new()).collect();
        Ok(EncodedTable {
            schema,
            props,
            parquet_root,
            factory,
            groups: Vec::new(),
            chunks,
        })
    }

    /// Rows in the row groups so far.
    pub fn rows(&self) -> usize {
        self.groups.iter().sum()
    }

    /// Encode the columns at `indices` from `arrays` (one per index, each of
    /// the table's rows), spread over the machine's cores.
    pub fn encode(&mut self, indices: &[usize], arrays: &[ArrayRef]) -> Result<(), String> {
        self.check(indices, arrays, self.rows(), 0)?;
        let groups = self.groups.clone();
        self.encode_groups(indices, arrays, 0, &groups)
    }

    /// Add a row group of `arrays.len()` rows, encoding the columns at
    /// `indices` from `arrays` (the other columns of the group are encoded
    /// later, with [`Self::encode`], from arrays of all the table's rows).
    pub fn push_group(&mut self, indices: &[usize], arrays: &[ArrayRef]) -> Result<(), String> {
        let g = self.groups.len();
        let n = arrays.first().map_or(0, |a| a.len());
        self.check(indices, arrays, n, g)?;
        self.encode_groups(indices, arrays, g, &[n])?;
        self.groups.push(n);
        Ok(())
    }

    fn check(
        &self,
        indices: &[usize],
        arrays: &[ArrayRef],
        rows: usize,
        groups_done: usize,
    ) -> Result<(), String> {
        if indices.len() != arrays.len() || indices.iter().any(|&i| i >= self.chunks.len()) {
            return Err("encode: one array per column of the table".into());
        }
        if let Some(a) = arrays.iter().find(|a| a.len() != rows) {
            return Err(format!("encode: a column of {} rows for {rows}", a.len()));
        }
        if let Some(&i) = indices
            .iter()
            .find(|&&i| self.chunks[i].len() != groups_done)
        {
            return Err(format!(
                "encode: column {} encoded out of turn",
                self.schema.field(i).name()
            ));
        }
        Ok(())
    }

    /// Encode `arrays` (split into `groups` rows, numbered from `first`)
    /// on parallel threads, appending to the columns' chunks.
    fn encode_groups(
        &mut self,
        indices: &[usize],
        arrays: &[ArrayRef],
        first: usize,
        groups: &[usize],
    ) -> Result<(), String> {
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(indices.len())
            .max(1);
        // the largest columns first, dealt out in turn, so the threads finish together
        let mut order: Vec<usize> = (0..indices.len()).collect();
        order.sort_by_key(|&k| std::cmp::Reverse(arrays[k].get_array_memory_size()));
        let (schema, factory) = (&self.schema, &self.factory);
        let done: Vec<Result<Vec<EncodedColumn>, String>> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads)
                .map(|w| {
                    let mine: Vec<usize> = order.iter().copied().skip(w).step_by(threads).collect();
                    s.spawn(move || {
                        mine.into_iter()
                            .map(|k| {
                                Ok((
                                    indices[k],
                                    encode_column(
                                        schema, factory, first, groups, indices[k], &arrays[k],
                                    )?,
                                ))
                            })
                            .collect()
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err("encode: a column encoder panicked".into()))
                })
                .collect()
        });
        for r in done {
            for (i, chunks) in r? {
                self.chunks[i].extend(chunks);
            }
        }
        Ok(())
    }

    /// Write the file (every column must have been encoded).
    pub fn write(self, path: &Path) -> Result<(), String> {
        let at = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
        let mut columns = Vec::with_capacity(self.chunks.len());
        for (i, c) in self.chunks.into_iter().enumerate() {
            if c.len() != self.groups.len() {
                return Err(format!(
                    "{}: column {} was not encoded",
                    path.display(),
                    self.schema.field(i).name()
                ));
            }
            columns.push(c.into_iter());
        }
        let f = File::create(path).map_err(|e| at(&e))?;
        let mut w =
            SerializedFileWriter::new(f, self.parquet_root, self.props).map_err(|e| at(&e))?;
        for _ in &self.groups {
            let mut g = w.next_row_group().map_err(|e| at(&e))?;
            for c in &mut columns {
                c.next()
                    .ok_or_else(|| at(&"a column has too few row groups"))?
                    .append_to_row_group(&mut g)
                    .map_err(|e| at(&e))?;
            }
            g.close().map_err(|e| at(&e))?;
        }
        w.close().map_err(|e| at(&e))?;
        Ok(())
    }
}

/// A column's index and its chunks, one per row group.
type EncodedColumn = (usize, Vec<ArrowColumnChunk>);

/// Column `i`'s chunks, one per row group of `groups` rows (numbered from
/// `first`), from `array` holding those rows.
fn encode_column(
    schema: &SchemaRef,
    factory: &ArrowRowGroupWriterFactory,
    first: usize,
    groups: &[usize],
    i: usize,
    array: &ArrayRef,
) -> Result<Vec<ArrowColumnChunk>, String> {
    let field = schema.field(i);
    let at = |e: &dyn std::fmt::Display| format!("column {}: {e}", field.name());
    let mut out = Vec::with_capacity(groups.len());
    let mut start = 0;
    for (k, &n) in groups.iter().enumerate() {
        let mut w = factory
            .create_column_writers(first + k)
            .map_err(|e| at(&e))?
            .swap_remove(i);
        for leaf in compute_leaves(field, &array.slice(start, n)).map_err(|e| at(&e))? {
            w.write(&leaf).map_err(|e| at(&e))?;
        }
        out.push(w.close().map_err(|e| at(&e))?);
        start += n;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Array, Int64Array, StringArray};
    use std::sync::Arc;

    #[test]
    fn a_batch_written_reads_back_by_column_name() {
        let path = std::env::temp_dir().join(format!(
            "cratrace-table-file-{}.parquet",
            std::process::id()
        ));
        let batch = RecordBatch::try_from_iter([
            ("ts", Arc::new(Int64Array::from(vec![1, 2, 3])) as _),
            (
                "name",
                Arc::new(StringArray::from(vec![Some("a"), None, Some("a")])) as _,
            ),
            (
                "text",
                Arc::new(StringArray::from(vec!["x", "y", "z"])) as _,
            ),
        ])
        .unwrap();
        write_batch(
            &path,
            &batch,
            Codec::Zstd,
            &Encodings {
                dictionary: &["name"],
                delta: &["ts"],
                without_statistics: &["text"],
            },
        )
        .unwrap();
        let back = read_columns(&path, &["text", "ts", "absent"]).unwrap();
        assert_eq!(back.len(), 1);
        let b = &back[0];
        assert_eq!(
            b.schema()
                .fields()
                .iter()
                .map(|f| f.name().as_str())
                .collect::<Vec<_>>(),
            ["ts", "text"]
        );
        assert_eq!(
            b.column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .values(),
            &[1, 2, 3]
        );
        assert_eq!(
            b.column(1)
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap()
                .value(2),
            "z"
        );
        assert_eq!(b.column(1).null_count(), 0);
        std::fs::remove_file(&path).ok();
        assert!(read_columns(&path, &["ts"])
            .unwrap_err()
            .starts_with(&path.display().to_string()));
    }

    #[test]
    fn columns_encoded_apart_make_row_groups_in_order() {
        let path = std::env::temp_dir().join(format!(
            "cratrace-table-groups-{}.parquet",
            std::process::id()
        ));
        let n = 2 * ROWS + 5;
        let ts: ArrayRef = Arc::new(Int64Array::from_iter_values(0..n as i64));
        let s: ArrayRef = Arc::new(StringArray::from_iter_values(
            (0..n).map(|i| format!("v{}", i % 7)),
        ));
        let schema = Arc::new(arrow_schema::Schema::new(vec![
            arrow_schema::Field::new("ts", arrow_schema::DataType::Int64, false),
            arrow_schema::Field::new("s", arrow_schema::DataType::Utf8, true),
        ]));
        let mut t = EncodedTable::new(
            schema.clone(),
            n,
            Codec::Lz4,
            &Encodings {
                dictionary: &["s"],
                ..Default::default()
            },
        )
        .unwrap();
        // the second column first, then the first: the file keeps schema order
        t.encode(&[1], std::slice::from_ref(&s)).unwrap();
        assert!(
            EncodedTable::new(schema.clone(), n, Codec::Lz4, &Encodings::default())
                .unwrap()
                .write(&path)
                .unwrap_err()
                .contains("column ts was not encoded")
        );
        t.encode(&[0], std::slice::from_ref(&ts)).unwrap();
        t.write(&path).unwrap();
        let back = read_columns(&path, &["ts", "s"]).unwrap();
        // row groups pushed one by one, of any size, hold the same table
        let mut u =
            EncodedTable::streamed(schema.clone(), Codec::Lz4, &Encodings::default()).unwrap();
        for (start, len) in [(0, 7), (7, ROWS), (ROWS + 7, n - ROWS - 7)] {
            u.push_group(&[1], &[s.slice(start, len)]).unwrap();
        }
        assert!(u
            .push_group(&[0], &[ts.slice(0, 3)])
            .unwrap_err()
            .contains("out of turn"));
        u.encode(&[0], std::slice::from_ref(&ts)).unwrap();
        let path2 = path.with_extension("streamed.parquet");
        u.write(&path2).unwrap();
        let md = parquet::file::serialized_reader::SerializedFileReader::new(
            File::open(&path2).unwrap(),
        )
        .unwrap();
        let groups: Vec<i64> = parquet::file::reader::FileReader::metadata(&md)
            .row_groups()
            .iter()
            .map(|g| g.num_rows())
            .collect();
        assert_eq!(groups, [7, ROWS as i64, (n - ROWS - 7) as i64]);
        let got2 = arrow_select::concat::concat_batches(
            &schema,
            &read_columns(&path2, &["ts", "s"]).unwrap(),
        )
        .unwrap();
        assert_eq!(got2.column(0).as_ref(), ts.as_ref());
        assert_eq!(got2.column(1).as_ref(), s.as_ref());
        std::fs::remove_file(&path2).ok();
        let rows: usize = back.iter().map(|b| b.num_rows()).sum();
        assert_eq!(rows, n);
        let got = arrow_select::concat::concat_batches(&schema, &back).unwrap();
        assert_eq!(got.column(0).as_ref(), ts.as_ref());
        assert_eq!(got.column(1).as_ref(), s.as_ref());
        let f = File::open(&path).unwrap();
        assert_eq!(
            parquet::file::reader::FileReader::metadata(
                &parquet::file::serialized_reader::SerializedFileReader::new(f).unwrap()
            )
            .num_row_groups(),
            3
        );
        std::fs::remove_file(&path).ok();
    }
}
