//! The seam between readers and storage.
//!
//! A reader declares one table per event type ([`TableSpec`]), then streams
//! rows to an [`EventSink`] in timestamp order. Every table implicitly starts
//! with the common columns `ts` (i64 ns), `cpu` (u32), `pid` (i32, nullable:
//! ftrace's common_pid, a thread id; null for xentrace) and `instance`
//! (string: the ftrace buffer instance, "" for the top-level buffer); the
//! spec lists only the event's own columns after those.
//!
//! Rows are passed as a slice of borrowed [`Value`]s so a reader can decode
//! straight out of its page buffer without allocating per event.

use crate::batch::RowBatch;
use std::collections::BTreeMap;

/// Whether `name` may name a table: letters, digits and `_` only. A
/// table's name becomes a file name (`events/<name>.parquet`) and a SQL
/// view's name, and a trace's formats choose it (issue 42).
pub fn valid_table_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The columns every event table starts with.
pub const COMMON_COLUMNS: [&str; 4] = ["ts", "cpu", "pid", "instance"];

/// Column name for an event's own field: its format name, except that a
/// field named like a common column (`pid` in sched_wakeup, `cpu` in
/// sched_load_se) becomes `field_<name>` so it cannot shadow the common one.
pub fn field_column_name(field: &str) -> String {
    if COMMON_COLUMNS.contains(&field) {
        format!("field_{field}")
    } else {
        field.to_string()
    }
}

/// Type of one event column, as the reader decoded it from the format.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ColumnType {
    /// Boolean.
    Bool,
    /// Signed integers.
    I8,
    /// Signed 16-bit.
    I16,
    /// Signed 32-bit.
    I32,
    /// Signed 64-bit.
    I64,
    /// Unsigned 8-bit.
    U8,
    /// Unsigned 16-bit.
    U16,
    /// Unsigned 32-bit.
    U32,
    /// Unsigned 64-bit.
    U64,
    /// 64-bit float.
    F64,
    /// UTF-8 text (invalid bytes replaced).
    Str,
    /// Raw bytes.
    Bytes,
    /// Variable-length list of signed integers (stored as i64).
    ListI64,
    /// Variable-length list of unsigned integers (stored as u64; cpumasks
    /// are lists of CPU numbers).
    ListU64,
    /// Text that is one of a fixed set of distinct names (run states,
    /// operations, handler names): stored as text, carried until then as
    /// an index into the names, so neither reader nor storage handles the
    /// bytes of each row.
    Enum(&'static [&'static str]),
}

/// One event column after the common columns.
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnSpec {
    /// Column name (the field name in the event format).
    pub name: String,
    /// Column type.
    pub ty: ColumnType,
}

/// A table to be written: one per event type.
#[derive(Clone, Debug, PartialEq)]
pub struct TableSpec {
    /// Table name, e.g. `sched_switch` (file `events/<name>.parquet`).
    pub name: String,
    /// Subsystem the event came from (`sched`, `kvm`, `xen.sched`), for metadata.
    pub system: String,
    /// The event's own columns, in format order.
    pub columns: Vec<ColumnSpec>,
}

/// Handle returned by [`EventSink::declare_table`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableId(pub u32);

/// The common columns of one row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowHeader {
    /// Timestamp in nanoseconds on the capture clock.
    pub ts: i64,
    /// CPU whose buffer held the record.
    pub cpu: u32,
    /// common_pid (a thread id); None where the format has none (xentrace).
    pub pid: Option<i32>,
    /// Index into the instance names given to [`EventSink::set_instances`].
    pub instance: u16,
}

/// One field value, borrowed from the reader's buffer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value<'a> {
    /// Missing (e.g. a field that could not be typed or a short record).
    Null,
    /// Boolean.
    Bool(bool),
    /// Any signed integer column.
    I64(i64),
    /// Any unsigned integer column.
    U64(u64),
    /// Float.
    F64(f64),
    /// Text.
    Str(&'a str),
    /// Raw bytes.
    Bytes(&'a [u8]),
    /// List of signed integers.
    ListI64(&'a [i64]),
    /// List of unsigned integers.
    ListU64(&'a [u64]),
}

/// Named counters of recoverable problems and volumes (Perfetto-style
/// stats): e.g. `corrupt_pages`, `unknown_event_id` (trace.dat's keys are
/// declared in [`crate::tracedat::stats`]). Keys are stable; values add up
/// over the read.
pub type Stats = BTreeMap<String, u64>;

/// Where decoded rows go. Implemented by `cratrace-arrow`'s Parquet sink
/// and by in-memory sinks in tests.
///
/// A reader appends each row in place to its table's [`RowBatch`]: the
/// header with [`RowBatch::push_header`], then one value per column, then
/// it calls [`EventSink::row_done`], where the sink takes full batches.
/// [`EventSink::write_row`] does all three for a row given as values.
pub trait EventSink {
    /// Names of the buffer instances (index 0 is usually "" = top level).
    fn set_instances(&mut self, names: &[String]);
    /// Declare a table; declaring the same name twice with the same columns
    /// returns the same id, with different columns is an error.
    fn declare_table(&mut self, spec: &TableSpec) -> Result<TableId, String>;
    /// The rows of a declared table that the sink has not taken yet.
    fn batch(&mut self, table: TableId) -> &mut RowBatch;
    /// A whole row was appended to `table`'s batch. Rows arrive in
    /// non-decreasing `ts` order per table.
    fn row_done(&mut self, table: TableId) -> Result<(), String>;
    /// Append one row given as values: `fields.len()` must equal the
    /// declared column count.
    fn write_row(
        &mut self,
        table: TableId,
        head: &RowHeader,
        fields: &[Value<'_>],
    ) -> Result<(), String> {
        self.batch(table).push_row(head, fields)?;
        self.row_done(table)
    }
}

/// A sink that keeps every row in memory, one batch per table: what tests
/// and small tools read results from.
#[derive(Debug, Default)]
pub struct MemorySink {
    /// Instance names given by the reader.
    pub instances: Vec<String>,
    /// Each declared table with all its rows.
    pub tables: Vec<(TableSpec, RowBatch)>,
}

impl MemorySink {
    /// The rows of table `name`, if declared.
    pub fn table(&self, name: &str) -> Option<&RowBatch> {
        self.tables
            .iter()
            .find(|(s, _)| s.name == name)
            .map(|(_, b)| b)
    }
}

impl EventSink for MemorySink {
    fn set_instances(&mut self, names: &[String]) {
        self.instances = names.to_vec();
    }

    fn declare_table(&mut self, spec: &TableSpec) -> Result<TableId, String> {
        if let Some(i) = self.tables.iter().position(|(s, _)| s.name == spec.name) {
            if self.tables[i].0.columns != spec.columns {
                return Err(format!(
                    "table {} declared twice with different columns",
                    spec.name
                ));
            }
            return Ok(TableId(i as u32));
        }
        let types: Vec<ColumnType> = spec.columns.iter().map(|c| c.ty.clone()).collect();
        self.tables.push((spec.clone(), RowBatch::new(&types, 0)));
        Ok(TableId(self.tables.len() as u32 - 1))
    }

    fn batch(&mut self, table: TableId) -> &mut RowBatch {
        &mut self.tables[table.0 as usize].1
    }

    fn row_done(&mut self, _table: TableId) -> Result<(), String> {
        Ok(())
    }
}

#[cfg(test)]
mod name_tests {
    use super::valid_table_name;

    #[test]
    fn table_names_keep_to_letters_digits_and_underscore() {
        for ok in ["sched_switch", "kvm_exit", "perf_sample", "x86_fpu_regs_2"] {
            assert!(valid_table_name(ok), "{ok}");
        }
        // what a crafted format name would smuggle into a file name or SQL
        for bad in [
            "",
            "a\"; COPY (SELECT 1) TO 'x.csv'; --",
            "../up",
            ".hidden",
            "with space",
            "dash-ed",
            "uni\u{e9}",
            "nul\0",
        ] {
            assert!(!valid_table_name(bad), "{bad:?}");
        }
    }
}
