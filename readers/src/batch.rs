//! Rows of one table, column by column, as a reader appends them.
//!
//! A [`RowBatch`] is what crosses the reader → storage seam: the common
//! columns (`ts`, `cpu`, `pid`, `instance`) and one typed [`Column`] per
//! event field, each a plain `Vec` of its own width. Readers append in
//! place — a decoder writes a field straight into its column — so a row
//! costs no intermediate values, and the sink takes whole batches.
//!
//! Nulls are rare (a field beyond a short payload, a sample without a
//! period), so a column records the rows that are null instead of a
//! validity bit per row: a null row holds a placeholder (0, "", []) in the
//! data and its index in [`Column::null_rows`].

use crate::sink::{ColumnType, RowHeader, Value};

/// Text (or bytes) column: Arrow-style offsets into one byte buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Text {
    /// `offsets[i]..offsets[i + 1]` is row `i`; starts with 0.
    pub offsets: Vec<i32>,
    /// All rows' bytes, back to back.
    pub bytes: Vec<u8>,
}

impl Text {
    fn with_capacity(rows: usize) -> Self {
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0);
        Text {
            offsets,
            bytes: Vec::with_capacity(rows * 16),
        }
    }

    /// Append one row's bytes.
    #[inline]
    pub fn push(&mut self, b: &[u8]) {
        self.bytes.extend_from_slice(b);
        self.offsets.push(self.bytes.len() as i32);
    }

    /// Row `i`'s bytes.
    pub fn get(&self, i: usize) -> &[u8] {
        &self.bytes[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// Rows held.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// No rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// List-of-integers column: offsets into one values buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct List<T> {
    /// `offsets[i]..offsets[i + 1]` is row `i`; starts with 0.
    pub offsets: Vec<i32>,
    /// All rows' values, back to back.
    pub values: Vec<T>,
}

impl<T: Copy> List<T> {
    fn with_capacity(rows: usize) -> Self {
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0);
        List {
            offsets,
            values: Vec::new(),
        }
    }

    /// Close the row whose values were pushed onto `values` since the last.
    #[inline]
    pub fn end_row(&mut self) {
        self.offsets.push(self.values.len() as i32);
    }

    /// Append one row.
    #[inline]
    pub fn push(&mut self, xs: &[T]) {
        self.values.extend_from_slice(xs);
        self.end_row();
    }

    /// Row `i`'s values.
    pub fn get(&self, i: usize) -> &[T] {
        &self.values[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }
}

/// One column's values, at the width of its [`ColumnType`].
#[derive(Clone, Debug, PartialEq)]
pub enum ColumnData {
    /// Booleans.
    Bool(Vec<bool>),
    /// Signed 8-bit.
    I8(Vec<i8>),
    /// Signed 16-bit.
    I16(Vec<i16>),
    /// Signed 32-bit.
    I32(Vec<i32>),
    /// Signed 64-bit.
    I64(Vec<i64>),
    /// Unsigned 8-bit.
    U8(Vec<u8>),
    /// Unsigned 16-bit.
    U16(Vec<u16>),
    /// Unsigned 32-bit.
    U32(Vec<u32>),
    /// Unsigned 64-bit.
    U64(Vec<u64>),
    /// 64-bit floats.
    F64(Vec<f64>),
    /// UTF-8 text (every row is valid UTF-8: see [`Column::push_str`]).
    Str(Text),
    /// Raw bytes.
    Bytes(Text),
    /// Lists of signed integers.
    ListI64(List<i64>),
    /// Lists of unsigned integers.
    ListU64(List<u64>),
    /// Indices into fixed names (see [`ColumnType::Enum`]).
    Enum {
        /// One index per row.
        keys: Vec<u16>,
        /// The names the keys index.
        names: &'static [&'static str],
    },
}

/// One column of a batch.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    /// The values (a placeholder where the row is null).
    pub data: ColumnData,
    /// Rows that are null, ascending.
    pub null_rows: Vec<u32>,
}

macro_rules! push_int {
    ($name:ident, $variant:ident, $t:ty) => {
        /// Append an integer to a column of this width (anything else: null).
        #[inline]
        pub fn $name(&mut self, row: u32, v: $t) {
            match &mut self.data {
                ColumnData::$variant(d) => d.push(v),
                _ => self.push_null(row),
            }
        }
    };
}

impl Column {
    /// An empty column of type `ty` with room for `rows` rows.
    pub fn new(ty: &ColumnType, rows: usize) -> Self {
        let data = match ty {
            ColumnType::Bool => ColumnData::Bool(Vec::with_capacity(rows)),
            ColumnType::I8 => ColumnData::I8(Vec::with_capacity(rows)),
            ColumnType::I16 => ColumnData::I16(Vec::with_capacity(rows)),
            ColumnType::I32 => ColumnData::I32(Vec::with_capacity(rows)),
            ColumnType::I64 => ColumnData::I64(Vec::with_capacity(rows)),
            ColumnType::U8 => ColumnData::U8(Vec::with_capacity(rows)),
            ColumnType::U16 => ColumnData::U16(Vec::with_capacity(rows)),
            ColumnType::U32 => ColumnData::U32(Vec::with_capacity(rows)),
            ColumnType::U64 => ColumnData::U64(Vec::with_capacity(rows)),
            ColumnType::F64 => ColumnData::F64(Vec::with_capacity(rows)),
            ColumnType::Str => ColumnData::Str(Text::with_capacity(rows)),
            ColumnType::Bytes => ColumnData::Bytes(Text::with_capacity(rows)),
            ColumnType::ListI64 => ColumnData::ListI64(List::with_capacity(rows)),
            ColumnType::ListU64 => ColumnData::ListU64(List::with_capacity(rows)),
            ColumnType::Enum(names) => ColumnData::Enum {
                keys: Vec::with_capacity(rows),
                names,
            },
        };
        Column {
            data,
            null_rows: Vec::new(),
        }
    }

    /// Rows held.
    pub fn len(&self) -> usize {
        match &self.data {
            ColumnData::Bool(v) => v.len(),
            ColumnData::I8(v) => v.len(),
            ColumnData::I16(v) => v.len(),
            ColumnData::I32(v) => v.len(),
            ColumnData::I64(v) => v.len(),
            ColumnData::U8(v) => v.len(),
            ColumnData::U16(v) => v.len(),
            ColumnData::U32(v) => v.len(),
            ColumnData::U64(v) => v.len(),
            ColumnData::F64(v) => v.len(),
            ColumnData::Str(t) | ColumnData::Bytes(t) => t.len(),
            ColumnData::ListI64(l) => l.offsets.len() - 1,
            ColumnData::ListU64(l) => l.offsets.len() - 1,
            ColumnData::Enum { keys, .. } => keys.len(),
        }
    }

    /// No rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Append a null as row `row` (the column's next row).
    #[cold]
    pub fn push_null(&mut self, row: u32) {
        self.null_rows.push(row);
        match &mut self.data {
            ColumnData::Bool(v) => v.push(false),
            ColumnData::I8(v) => v.push(0),
            ColumnData::I16(v) => v.push(0),
            ColumnData::I32(v) => v.push(0),
            ColumnData::I64(v) => v.push(0),
            ColumnData::U8(v) => v.push(0),
            ColumnData::U16(v) => v.push(0),
            ColumnData::U32(v) => v.push(0),
            ColumnData::U64(v) => v.push(0),
            ColumnData::F64(v) => v.push(0.0),
            ColumnData::Str(t) | ColumnData::Bytes(t) => t.push(&[]),
            ColumnData::ListI64(l) => l.end_row(),
            ColumnData::ListU64(l) => l.end_row(),
            ColumnData::Enum { keys, .. } => keys.push(0),
        }
    }

    push_int!(push_i8, I8, i8);
    push_int!(push_i16, I16, i16);
    push_int!(push_i32, I32, i32);
    push_int!(push_i64, I64, i64);
    push_int!(push_u8, U8, u8);
    push_int!(push_u16, U16, u16);
    push_int!(push_u32, U32, u32);
    push_int!(push_u64, U64, u64);

    /// Append text (to a text column; anything else: null).
    #[inline]
    pub fn push_str(&mut self, row: u32, s: &str) {
        match &mut self.data {
            ColumnData::Str(t) => t.push(s.as_bytes()),
            _ => self.push_null(row),
        }
    }

    /// Append one of an enumerated column's names (given from its list, it
    /// is found by address); any other text or column: null.
    #[inline]
    pub fn push_name(&mut self, row: u32, s: &str) {
        match &mut self.data {
            ColumnData::Enum { keys, names } => match name_index(names, s) {
                Some(k) => keys.push(k),
                None => self.push_null(row),
            },
            _ => self.push_null(row),
        }
    }

    /// Append the name at `k` in an enumerated column's list (a reader
    /// that picked the name by index skips [`Column::push_name`]'s search);
    /// out of range or another column type: null.
    #[inline]
    pub fn push_key(&mut self, row: u32, k: usize) {
        match &mut self.data {
            ColumnData::Enum { keys, names } if k < names.len() => keys.push(k as u16),
            _ => self.push_null(row),
        }
    }

    /// Append a list to a list-of-unsigned column (anything else: null).
    #[inline]
    pub fn push_list_u64(&mut self, row: u32, xs: &[u64]) {
        match &mut self.data {
            ColumnData::ListU64(l) => l.push(xs),
            _ => self.push_null(row),
        }
    }

    /// Append an integer's bits to any integer column, cut to its width
    /// (the column was typed from a field of that width, so only zeros or
    /// sign bits are dropped); a bool column takes nonzero as true.
    #[inline(always)]
    pub fn push_int_bits(&mut self, row: u32, v: u64) {
        match &mut self.data {
            ColumnData::I8(d) => d.push(v as i8),
            ColumnData::I16(d) => d.push(v as i16),
            ColumnData::I32(d) => d.push(v as i32),
            ColumnData::I64(d) => d.push(v as i64),
            ColumnData::U8(d) => d.push(v as u8),
            ColumnData::U16(d) => d.push(v as u16),
            ColumnData::U32(d) => d.push(v as u32),
            ColumnData::U64(d) => d.push(v),
            ColumnData::Bool(d) => d.push(v != 0),
            _ => self.push_null(row),
        }
    }

    /// Append a [`Value`]; one of the wrong shape for the column is null.
    pub fn push_value(&mut self, row: u32, v: &Value<'_>) {
        match (v, &mut self.data) {
            (Value::I64(x), _) => self.push_int_bits(row, *x as u64),
            (Value::U64(x), _) => self.push_int_bits(row, *x),
            (Value::Bool(b), ColumnData::Bool(d)) => d.push(*b),
            (Value::F64(x), ColumnData::F64(d)) => d.push(*x),
            (Value::Str(s), ColumnData::Str(t)) => t.push(s.as_bytes()),
            (Value::Bytes(b), ColumnData::Bytes(t)) => t.push(b),
            (Value::ListI64(xs), ColumnData::ListI64(l)) => l.push(xs),
            (Value::ListU64(xs), ColumnData::ListU64(l)) => l.push(xs),
            (Value::Str(s), ColumnData::Enum { keys, names }) => match name_index(names, s) {
                Some(k) => keys.push(k),
                None => self.push_null(row),
            },
            _ => self.push_null(row),
        }
    }

    /// Row `i` as a [`Value`] (for tests and in-memory sinks).
    pub fn value(&self, i: usize) -> Value<'_> {
        if self.null_rows.binary_search(&(i as u32)).is_ok() {
            return Value::Null;
        }
        match &self.data {
            ColumnData::Bool(v) => Value::Bool(v[i]),
            ColumnData::I8(v) => Value::I64(v[i] as i64),
            ColumnData::I16(v) => Value::I64(v[i] as i64),
            ColumnData::I32(v) => Value::I64(v[i] as i64),
            ColumnData::I64(v) => Value::I64(v[i]),
            ColumnData::U8(v) => Value::U64(v[i] as u64),
            ColumnData::U16(v) => Value::U64(v[i] as u64),
            ColumnData::U32(v) => Value::U64(v[i] as u64),
            ColumnData::U64(v) => Value::U64(v[i]),
            ColumnData::F64(v) => Value::F64(v[i]),
            // SAFETY-free: text columns only ever receive &str bytes
            ColumnData::Str(t) => Value::Str(std::str::from_utf8(t.get(i)).unwrap_or("")),
            ColumnData::Bytes(t) => Value::Bytes(t.get(i)),
            ColumnData::ListI64(l) => Value::ListI64(l.get(i)),
            ColumnData::ListU64(l) => Value::ListU64(l.get(i)),
            ColumnData::Enum { keys, names } => Value::Str(names[keys[i] as usize]),
        }
    }
}

/// Index of `s` among `names`: the same `&'static str` a reader took from
/// the list matches by address, anything else by text.
#[inline]
fn name_index(names: &[&str], s: &str) -> Option<u16> {
    names
        .iter()
        .position(|n| std::ptr::eq(n.as_ptr(), s.as_ptr()) && n.len() == s.len())
        .or_else(|| names.iter().position(|n| *n == s))
        .map(|k| k as u16)
}

/// The rows of one table not yet taken by the sink.
#[derive(Clone, Debug, PartialEq)]
pub struct RowBatch {
    /// Timestamps (ns).
    pub ts: Vec<i64>,
    /// CPU of each row (as Parquet stores it: i32).
    pub cpu: Vec<i32>,
    /// common_pid (0 where null; see `pid_null_rows`). Call
    /// [`RowBatch::settle`] before reading it or `pid_null_rows`.
    pub pid: Vec<i32>,
    /// Rows whose pid is null (xentrace, samples without a tid).
    pub pid_null_rows: Vec<u32>,
    /// Index into the sink's instance names. Call
    /// [`RowBatch::settle`] before reading it.
    pub instance: Vec<u16>,
    /// The event's own columns, as declared.
    pub columns: Vec<Column>,
    /// Bytes appended to text and list columns (a sink may take the batch
    /// early when rows are large).
    pub var_bytes: usize,
    /// Rows (all of the batch's so far) whose null pid `pid` and
    /// `pid_null_rows` do not hold yet: a table without pids (every
    /// xentrace table) writes nothing per row for them, where the two
    /// pushes per row were a tenth of the xentrace reader's time.
    unsettled_null_pids: u32,
    /// Rows (all of the batch's so far) from the top instance (0) that
    /// `instance` does not hold yet: most traces have no other buffer
    /// instance, and xentrace none at all.
    unsettled_top_instances: u32,
}

impl RowBatch {
    /// An empty batch for these column types, with room for `rows` rows.
    pub fn new(types: &[ColumnType], rows: usize) -> Self {
        RowBatch {
            ts: Vec::with_capacity(rows),
            cpu: Vec::with_capacity(rows),
            pid: Vec::with_capacity(rows),
            pid_null_rows: Vec::new(),
            instance: Vec::with_capacity(rows),
            columns: types.iter().map(|t| Column::new(t, rows)).collect(),
            var_bytes: 0,
            unsettled_null_pids: 0,
            unsettled_top_instances: 0,
        }
    }

    /// Write the null pids of the rows before the first non-null one into
    /// `pid` and `pid_null_rows`, and the instance of the rows before the
    /// first from another instance than the top one into `instance` (see
    /// the fields `unsettled_null_pids` and `unsettled_top_instances`).
    pub fn settle(&mut self) {
        self.settle_pids();
        self.settle_instances();
    }

    fn settle_pids(&mut self) {
        let n = std::mem::take(&mut self.unsettled_null_pids);
        if n > 0 {
            // only while no pid was written: both vectors are empty
            self.pid.resize(n as usize, 0);
            self.pid_null_rows.extend(0..n);
        }
    }

    fn settle_instances(&mut self) {
        let n = std::mem::take(&mut self.unsettled_top_instances);
        if n > 0 {
            // only while no instance was written: `instance` is empty
            self.instance.resize(n as usize, 0);
        }
    }

    /// Rows held.
    #[inline]
    pub fn len(&self) -> usize {
        self.ts.len()
    }

    /// Rows it has room for without growing.
    pub fn capacity(&self) -> usize {
        self.ts.capacity()
    }

    /// No rows.
    pub fn is_empty(&self) -> bool {
        self.ts.is_empty()
    }

    /// Start a row: append its common columns; returns its index, which
    /// the event's own columns take for their nulls.
    #[inline(always)]
    pub fn push_header(&mut self, head: &RowHeader) -> u32 {
        let row = self.ts.len() as u32;
        self.ts.push(head.ts);
        self.cpu.push(head.cpu as i32);
        match head.pid {
            Some(p) => {
                if self.unsettled_null_pids > 0 {
                    self.settle_pids();
                }
                self.pid.push(p)
            }
            // every row so far without a pid: count it only
            None if self.pid.is_empty() => self.unsettled_null_pids += 1,
            None => {
                self.pid.push(0);
                self.pid_null_rows.push(row);
            }
        }
        match head.instance {
            // every row so far from the top instance: count it only
            0 if self.instance.is_empty() => self.unsettled_top_instances += 1,
            i => {
                if self.unsettled_top_instances > 0 {
                    self.settle_instances();
                }
                self.instance.push(i)
            }
        }
        row
    }

    /// Append a whole row given as values, one per column.
    pub fn push_row(&mut self, head: &RowHeader, fields: &[Value<'_>]) -> Result<(), String> {
        if fields.len() != self.columns.len() {
            return Err(format!(
                "{} values for {} columns",
                fields.len(),
                self.columns.len()
            ));
        }
        let row = self.push_header(head);
        for (c, v) in self.columns.iter_mut().zip(fields) {
            self.var_bytes += match (v, &c.data) {
                (Value::Str(s), ColumnData::Str(_)) => s.len(),
                (Value::Bytes(b), ColumnData::Bytes(_)) => b.len(),
                (Value::ListI64(x), ColumnData::ListI64(_)) => 8 * x.len(),
                (Value::ListU64(x), ColumnData::ListU64(_)) => 8 * x.len(),
                _ => 0,
            };
            c.push_value(row, v);
        }
        Ok(())
    }

    /// Row `i`: its header and values (for tests and in-memory sinks).
    pub fn row(&self, i: usize) -> (RowHeader, Vec<Value<'_>>) {
        let pid = if i < self.unsettled_null_pids as usize
            || self.pid_null_rows.binary_search(&(i as u32)).is_ok()
        {
            None
        } else {
            Some(self.pid[i])
        };
        (
            RowHeader {
                ts: self.ts[i],
                cpu: self.cpu[i] as u32,
                pid,
                instance: if i < self.unsettled_top_instances as usize {
                    0
                } else {
                    self.instance[i]
                },
            },
            self.columns.iter().map(|c| c.value(i)).collect(),
        )
    }

    /// Forget every row, keeping the buffers.
    pub fn clear(&mut self) {
        self.ts.clear();
        self.cpu.clear();
        self.pid.clear();
        self.pid_null_rows.clear();
        self.unsettled_null_pids = 0;
        self.unsettled_top_instances = 0;
        self.instance.clear();
        self.var_bytes = 0;
        for c in &mut self.columns {
            c.null_rows.clear();
            match &mut c.data {
                ColumnData::Bool(v) => v.clear(),
                ColumnData::I8(v) => v.clear(),
                ColumnData::I16(v) => v.clear(),
                ColumnData::I32(v) => v.clear(),
                ColumnData::I64(v) => v.clear(),
                ColumnData::U8(v) => v.clear(),
                ColumnData::U16(v) => v.clear(),
                ColumnData::U32(v) => v.clear(),
                ColumnData::U64(v) => v.clear(),
                ColumnData::F64(v) => v.clear(),
                ColumnData::Str(t) | ColumnData::Bytes(t) => {
                    t.offsets.truncate(1);
                    t.bytes.clear();
                }
                ColumnData::ListI64(l) => {
                    l.offsets.truncate(1);
                    l.values.clear();
                }
                ColumnData::ListU64(l) => {
                    l.offsets.truncate(1);
                    l.values.clear();
                }
                ColumnData::Enum { keys, .. } => keys.clear(),
            }
        }
    }

    /// Make `dst` a copy of this batch in `dst`'s own buffers (grown if
    /// need be): a sink can hand the copy on and go on filling this
    /// batch, whose lines are still in the reader's cache. `dst` must have
    /// the same column types; a column of another type is replaced.
    pub fn copy_into(&self, dst: &mut RowBatch) {
        fn copy<T: Copy>(dst: &mut Vec<T>, src: &[T]) {
            dst.clear();
            dst.extend_from_slice(src);
        }
        copy(&mut dst.ts, &self.ts);
        copy(&mut dst.cpu, &self.cpu);
        copy(&mut dst.pid, &self.pid);
        copy(&mut dst.pid_null_rows, &self.pid_null_rows);
        copy(&mut dst.instance, &self.instance);
        dst.var_bytes = self.var_bytes;
        dst.unsettled_null_pids = self.unsettled_null_pids;
        dst.unsettled_top_instances = self.unsettled_top_instances;
        dst.columns.truncate(self.columns.len());
        for (i, c) in self.columns.iter().enumerate() {
            if i == dst.columns.len() {
                dst.columns.push(c.clone());
                continue;
            }
            let d = &mut dst.columns[i];
            copy(&mut d.null_rows, &c.null_rows);
            match (&mut d.data, &c.data) {
                (ColumnData::Bool(d), ColumnData::Bool(s)) => copy(d, s),
                (ColumnData::I8(d), ColumnData::I8(s)) => copy(d, s),
                (ColumnData::I16(d), ColumnData::I16(s)) => copy(d, s),
                (ColumnData::I32(d), ColumnData::I32(s)) => copy(d, s),
                (ColumnData::I64(d), ColumnData::I64(s)) => copy(d, s),
                (ColumnData::U8(d), ColumnData::U8(s)) => copy(d, s),
                (ColumnData::U16(d), ColumnData::U16(s)) => copy(d, s),
                (ColumnData::U32(d), ColumnData::U32(s)) => copy(d, s),
                (ColumnData::U64(d), ColumnData::U64(s)) => copy(d, s),
                (ColumnData::F64(d), ColumnData::F64(s)) => copy(d, s),
                (ColumnData::Str(d), ColumnData::Str(s))
                | (ColumnData::Bytes(d), ColumnData::Bytes(s)) => {
                    copy(&mut d.offsets, &s.offsets);
                    copy(&mut d.bytes, &s.bytes);
                }
                (ColumnData::ListI64(d), ColumnData::ListI64(s)) => {
                    copy(&mut d.offsets, &s.offsets);
                    copy(&mut d.values, &s.values);
                }
                (ColumnData::ListU64(d), ColumnData::ListU64(s)) => {
                    copy(&mut d.offsets, &s.offsets);
                    copy(&mut d.values, &s.values);
                }
                (ColumnData::Enum { keys: d, names: dn }, ColumnData::Enum { keys: s, names }) => {
                    copy(d, s);
                    *dn = names;
                }
                (d, s) => *d = s.clone(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(ts: i64, pid: Option<i32>) -> RowHeader {
        RowHeader {
            ts,
            cpu: 1,
            pid,
            instance: 0,
        }
    }

    #[test]
    fn null_pids_before_the_first_pid_are_counted_then_settled() {
        let mut b = RowBatch::new(&[], 8);
        for pid in [None, None, Some(5), None, Some(6)] {
            b.push_header(&head(1, pid));
        }
        let pids: Vec<Option<i32>> = (0..5).map(|i| b.row(i).0.pid).collect();
        assert_eq!(pids, [None, None, Some(5), None, Some(6)]);
        b.settle();
        assert_eq!(
            (b.pid.clone(), b.pid_null_rows.clone()),
            (vec![0, 0, 5, 0, 6], vec![0, 1, 3])
        );
        // a table without pids: nothing per row, all of them on settling
        b.clear();
        for _ in 0..3 {
            b.push_header(&head(1, None));
        }
        assert!(b.pid.is_empty() && b.row(2).0.pid.is_none());
        b.settle();
        assert_eq!(
            (b.pid.clone(), b.pid_null_rows.clone()),
            (vec![0; 3], vec![0, 1, 2])
        );
        b.settle();
        assert_eq!(b.pid.len(), 3, "settling twice adds nothing");
    }

    #[test]
    fn top_instance_rows_before_another_instance_are_counted_then_settled() {
        let mut b = RowBatch::new(&[], 8);
        for inst in [0u16, 0, 2, 0, 1] {
            b.push_header(&RowHeader {
                instance: inst,
                ..head(1, Some(3))
            });
        }
        let seen: Vec<u16> = (0..5).map(|i| b.row(i).0.instance).collect();
        assert_eq!(seen, [0, 0, 2, 0, 1]);
        b.settle();
        assert_eq!(b.instance, [0, 0, 2, 0, 1]);
        // one instance only: nothing per row, all of them on settling
        b.clear();
        for _ in 0..3 {
            b.push_header(&head(1, None));
        }
        assert!(b.instance.is_empty() && b.row(2).0.instance == 0);
        b.settle();
        assert_eq!(b.instance, [0; 3]);
        b.settle();
        assert_eq!(b.instance.len(), 3, "settling twice adds nothing");
    }

    #[test]
    fn rows_read_back_as_they_were_pushed_nulls_included() {
        const OPS: [&str; 2] = ["map", "unmap"];
        let types = [
            ColumnType::I32,
            ColumnType::Str,
            ColumnType::ListU64,
            ColumnType::Bool,
            ColumnType::U8,
            ColumnType::Enum(&OPS),
        ];
        let mut b = RowBatch::new(&types, 4);
        b.push_row(
            &head(5, Some(7)),
            &[
                Value::I64(-3),
                Value::Str("ab"),
                Value::ListU64(&[1, 2]),
                Value::Bool(true),
                Value::U64(255),
                Value::Str(OPS[1]),
            ],
        )
        .unwrap();
        b.push_row(
            &head(6, None),
            &[
                Value::Null,
                Value::Str(""),
                Value::Null,
                Value::Null,
                Value::Str("wrong shape"),
                Value::Str("transfer"),
            ],
        )
        .unwrap();
        assert_eq!(b.len(), 2);
        let (h0, v0) = b.row(0);
        assert_eq!(h0, head(5, Some(7)));
        assert_eq!(
            v0,
            vec![
                Value::I64(-3),
                Value::Str("ab"),
                Value::ListU64(&[1, 2]),
                Value::Bool(true),
                Value::U64(255),
                Value::Str("unmap"),
            ]
        );
        let (h1, v1) = b.row(1);
        assert_eq!(h1.pid, None);
        assert_eq!(
            v1,
            vec![
                Value::Null,
                Value::Str(""),
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
            ]
        );
        assert_eq!(b.var_bytes, 2 + 16, "the bytes text and list columns hold");
        assert_eq!(
            b.columns[5].data,
            ColumnData::Enum {
                keys: vec![1, 0],
                names: &OPS
            }
        );
        assert!(b.push_row(&head(7, None), &[Value::Null]).is_err());
        assert_eq!(b.len(), 2, "a refused row leaves nothing behind");
        b.clear();
        assert!(b.is_empty());
        assert!(b
            .columns
            .iter()
            .all(|c| c.is_empty() && c.null_rows.is_empty()));
    }

    #[test]
    fn a_copy_equals_its_source_whatever_the_destination_held() {
        const OPS: [&str; 2] = ["map", "unmap"];
        let types = [
            ColumnType::U64,
            ColumnType::Str,
            ColumnType::ListU64,
            ColumnType::Enum(&OPS),
        ];
        let mut src = RowBatch::new(&types, 2);
        // rows without pids first (counted, unsettled), then one with a
        // pid, nulls and variable-width values, beyond the capacity of 2
        for (ts, pid) in [(1, None), (2, None), (3, Some(9)), (4, None)] {
            src.push_row(
                &head(ts, pid),
                &[
                    if ts == 2 {
                        Value::Null
                    } else {
                        Value::U64(ts as u64)
                    },
                    Value::Str(if ts == 3 { "three" } else { "" }),
                    Value::ListU64(&[ts as u64; 3][..ts as usize % 3]),
                    Value::Str(OPS[ts as usize % 2]),
                ],
            )
            .unwrap();
        }
        let mut dirty = RowBatch::new(&types, 8);
        dirty
            .push_row(
                &head(99, Some(1)),
                &[Value::U64(7), Value::Str("old"), Value::Null, Value::Null],
            )
            .unwrap();
        let mut other_shape = RowBatch::new(&[ColumnType::Bool], 1);
        for dst in [&mut dirty, &mut other_shape, &mut RowBatch::new(&types, 0)] {
            src.copy_into(dst);
            assert_eq!(*dst, src);
            assert_eq!(
                (0..4).map(|i| dst.row(i)).collect::<Vec<_>>(),
                (0..4).map(|i| src.row(i)).collect::<Vec<_>>()
            );
        }
    }
}
