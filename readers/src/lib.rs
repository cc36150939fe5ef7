//! Readers for the trace formats a virtualization host produces.
//!
//! # Brief overview
//!
//! Each format lives in its own module and follows the same shape, borrowed
//! from Perfetto's trace processor: a *tokenizer* that decodes only framing
//! (which CPU, what timestamp, which raw bytes), a *sorter* that merges the
//! per-CPU streams into one time-ordered stream, and a *parser* that decodes
//! payloads into typed fields and appends them, column by column, to the
//! [`RowBatch`]es of an [`EventSink`].
//!
//! The crate knows nothing about Arrow, Parquet or Python: the sink trait is
//! the seam (see `cratrace-arrow` for the Parquet implementation).
//!
//! Errors: recoverable bad data increments a named counter in [`Stats`] and
//! the read goes on; corruption that stops the read is a [`ReadError`] with
//! the file, the byte offset and a stable tag such as `ERR:corrupt-page`.
#![deny(missing_docs)]

pub mod batch;
pub mod bytes;
pub mod error;
pub mod ftrace;
pub mod input;
pub mod mapped;
pub mod perfdata;
pub mod perfstat;
pub mod sink;
pub mod tracedat;
pub mod xentrace;

pub use batch::{Column, ColumnData, List, RowBatch, Text};
pub use error::{ReadError, ReadResult};
pub use sink::{
    field_column_name, valid_table_name, ColumnSpec, ColumnType, EventSink, MemorySink, RowHeader,
    Stats, TableId, TableSpec, Value,
};
