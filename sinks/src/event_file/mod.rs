//! One event table's Parquet file, written from the readers' row batches
//! by encoders made for them (`column.rs`, `crate::encoding`).
//!
//! A general Arrow-to-Parquet writer spends most of an import's encoding
//! time on work these columns do not need: computing definition levels
//! row by row for columns that are never null, hashing every string of a
//! column to look for repeats that a few hundred rows would have ruled
//! out, compressing 8-byte integers of a few distinct values. Here each
//! column's encoding is chosen for what it holds, and the `parquet` crate
//! only frames the result: page headers, row groups, the footer with the
//! Arrow schema, so readers get the declared Arrow types back.

mod column;
mod compress;
#[cfg(test)]
mod tests;

use crate::Codec;
use arrow_schema::SchemaRef;
use column::{ColumnWriter, Plan};
use compress::Compressor;
use cratrace_format::{Column, ColumnData, ColumnType, RowBatch};
use parquet::arrow::{add_encoded_arrow_schema_to_metadata, ArrowSchemaConverter};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Bytes written to the file at a time.
const WRITE_BUFFER: usize = 256 << 10;

/// How a column is encoded, from its name and type.
fn plan(name: &str, ty: Option<&ColumnType>) -> Plan {
    match (name, ty) {
        ("ts" | "cpu", None) => Plan::Delta,
        ("instance", None) | (_, Some(ColumnType::Enum(_))) => Plan::Keys,
        ("pid", None) => Plan::Dictionary,
        ("tsc", Some(ColumnType::U64 | ColumnType::I64)) => Plan::Delta,
        (_, Some(ColumnType::Str)) => Plan::Dictionary,
        (
            _,
            Some(
                ColumnType::I8
                | ColumnType::I16
                | ColumnType::I32
                | ColumnType::I64
                | ColumnType::U8
                | ColumnType::U16
                | ColumnType::U32
                | ColumnType::U64,
            ),
        ) => Plan::Dictionary,
        _ => Plan::Plain,
    }
}

/// The common columns of a batch as [`Column`]s (moved out of it; see
/// [`restore_common_columns`]).
fn common_columns(b: &mut RowBatch) -> [Column; 4] {
    b.settle();
    let col = |data, null_rows| Column { data, null_rows };
    [
        col(ColumnData::I64(std::mem::take(&mut b.ts)), Vec::new()),
        col(ColumnData::I32(std::mem::take(&mut b.cpu)), Vec::new()),
        col(
            ColumnData::I32(std::mem::take(&mut b.pid)),
            std::mem::take(&mut b.pid_null_rows),
        ),
        col(ColumnData::U16(std::mem::take(&mut b.instance)), Vec::new()),
    ]
}

/// Put the columns [`common_columns`] took back into the batch.
fn restore_common_columns(b: &mut RowBatch, common: [Column; 4]) {
    for (i, c) in common.into_iter().enumerate() {
        match (i, c.data) {
            (0, ColumnData::I64(v)) => b.ts = v,
            (1, ColumnData::I32(v)) => b.cpu = v,
            (2, ColumnData::I32(v)) => {
                b.pid = v;
                b.pid_null_rows = c.null_rows;
            }
            (3, ColumnData::U16(v)) => b.instance = v,
            _ => unreachable!("common_columns made these"),
        }
    }
}

/// An event table's file being written.
pub(crate) struct EventFile {
    path: PathBuf,
    group_rows: usize,
    writer: SerializedFileWriter<BufWriter<File>>,
    columns: Vec<ColumnWriter>,
    codec: Codec,
    comp: Compressor,
}

impl EventFile {
    /// Create `path` for a table of `schema` (the common columns, then the
    /// event's, typed as `types`).
    pub(crate) fn create(
        path: &Path,
        schema: SchemaRef,
        types: &[ColumnType],
        instances: Vec<String>,
        codec: Codec,
        group_rows: usize,
    ) -> Result<Self, String> {
        let at = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
        let parquet = ArrowSchemaConverter::new()
            .convert(&schema)
            .map_err(|e| at(&e))?;
        if parquet.num_columns() != schema.fields().len() {
            return Err(at(&"nested columns other than lists are not supported"));
        }
        let mut props = WriterProperties::builder()
            .set_compression(codec.parquet())
            .build();
        // what ArrowWriter stores too: readers get the Arrow types back exactly
        add_encoded_arrow_schema_to_metadata(&schema, &mut props);
        let columns = parquet
            .columns()
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let ty = i.checked_sub(4).and_then(|j| types.get(j));
                let names = match ty {
                    None if i == 3 => instances.clone(),
                    Some(ColumnType::Enum(names)) => names.iter().map(|n| n.to_string()).collect(),
                    _ => Vec::new(),
                };
                ColumnWriter::new(d.clone(), plan(schema.field(i).name(), ty), names)
            })
            .collect();
        let file = File::create(path).map_err(|e| at(&e))?;
        let file = BufWriter::with_capacity(WRITE_BUFFER, file);
        let writer = SerializedFileWriter::new(file, parquet.root_schema_ptr(), Arc::new(props))
            .map_err(|e| at(&e))?;
        Ok(EventFile {
            path: path.to_path_buf(),
            group_rows,
            writer,
            columns,
            codec,
            comp: Compressor::new(codec)?,
        })
    }

    fn at(&self, e: &dyn std::fmt::Display) -> String {
        format!("{}: {e}", self.path.display())
    }

    /// Encode a batch's rows; a row group is written once it has
    /// `group_rows` rows. The batch is left as it was (for reuse).
    pub(crate) fn write(&mut self, b: &mut RowBatch) -> Result<(), String> {
        if 4 + b.columns.len() != self.columns.len() {
            return Err(self.at(&format!(
                "{} columns for a table of {}",
                4 + b.columns.len(),
                self.columns.len()
            )));
        }
        let common = common_columns(b);
        let mut result = Ok(());
        for (w, c) in self
            .columns
            .iter_mut()
            .zip(common.iter().chain(b.columns.iter()))
        {
            result = w.write(c, &mut self.comp);
            if result.is_err() {
                break;
            }
        }
        restore_common_columns(b, common);
        result.map_err(|e| format!("{}: {e}", self.path.display()))?;
        if self.columns[0].chunk_rows() as usize >= self.group_rows {
            self.write_group()?;
        }
        Ok(())
    }

    fn write_group(&mut self) -> Result<(), String> {
        if self.columns[0].chunk_rows() == 0 {
            return Ok(());
        }
        let codec = self.codec.parquet();
        let mut chunks = Vec::with_capacity(self.columns.len());
        for w in &mut self.columns {
            chunks.push(
                w.finish_chunk(codec, &mut self.comp)
                    .map_err(|e| format!("{}: {e}", self.path.display()))?,
            );
        }
        let at = |e: parquet::errors::ParquetError| format!("{}: {e}", self.path.display());
        let mut group = self.writer.next_row_group().map_err(at)?;
        for (bytes, close) in chunks {
            group.append_column(&bytes, close).map_err(at)?;
        }
        group.close().map_err(at)?;
        Ok(())
    }

    /// Write the last row group and the footer.
    pub(crate) fn close(mut self) -> Result<(), String> {
        self.write_group()?;
        let path = self.path.clone();
        self.writer
            .close()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(())
    }
}
