//! Parsing marker lines into [`MarkerLines`]' columns: the line's name,
//! its fields as JSON, its own `vm=` and `vcpu=`, and the text kept.

use super::{cast, column, required, MarkerLines};
use arrow_array::builder::{Int32Builder, Int64Builder, StringBuilder};
use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow_buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::DataType;
use cratrace_format::ftrace::marker;

/// The columns of [`MarkerLines`] as they are parsed, batch by batch.
pub(super) struct Parser {
    // read by the streamed parse, which checks time order and copies the
    // named lines it keeps
    pub(super) ts: Vec<i64>,
    pub(super) cpu: Vec<i32>,
    pub(super) tid: Int64Builder,
    text: Strings,
    name: Strings,
    fields: Strings,
    vm: StringBuilder,
    vcpu: Int32Builder,
}

impl Parser {
    /// For about `rows` lines, whose text columns hold about `text_rows`
    /// lines of `bytes` bytes of text at a time.
    pub(super) fn with_capacity(rows: usize, text_rows: usize, bytes: usize) -> Self {
        Parser {
            ts: Vec::with_capacity(rows),
            cpu: Vec::with_capacity(rows),
            tid: Int64Builder::with_capacity(rows),
            text: Strings::with_capacity(text_rows, bytes),
            name: Strings::with_capacity(text_rows, text_rows * 8),
            // a JSON object holds the fields' text plus quotes, colons and commas
            fields: Strings::with_capacity(text_rows, bytes + text_rows * 8),
            vm: StringBuilder::with_capacity(rows, rows * 4),
            vcpu: Int32Builder::with_capacity(rows),
        }
    }

    pub(super) fn push(&mut self, b: &RecordBatch) -> Result<(), String> {
        let what = "print";
        let buf = required(b, "buf", &DataType::Utf8, what)?;
        let t = required(b, "ts", &DataType::Int64, what)?;
        let c = required(b, "cpu", &DataType::Int32, what)?;
        let p = required(b, "pid", &DataType::Int64, what)?;
        let inst = column(b, "instance")
            .map(|a| cast(a, &DataType::Utf8, what, "instance"))
            .transpose()?;
        let (t, c, p, buf) = (
            t.as_primitive::<Int64Type>(),
            c.as_primitive::<Int32Type>(),
            p.as_primitive::<Int64Type>(),
            buf.as_string::<i32>(),
        );
        let inst = inst.as_ref().map(|a| a.as_string::<i32>());
        for i in 0..b.num_rows() {
            if inst.is_some_and(|a| a.is_valid(i) && !a.value(i).is_empty()) {
                continue;
            }
            let line = if buf.is_valid(i) {
                buf.value(i).trim_end_matches('\n')
            } else {
                ""
            };
            self.push_line(t.value(i), c.value(i), p.value(i), p.is_valid(i), line);
        }
        Ok(())
    }

    pub(super) fn push_line(&mut self, ts: i64, cpu: i32, tid: i64, has_tid: bool, line: &str) {
        self.ts.push(ts);
        self.cpu.push(cpu);
        self.tid.append_option(has_tid.then_some(tid));
        self.text.push(line);
        let (nm, v, vc) = marker::parse_line_onto(line, &mut self.fields.values);
        self.fields.end_row();
        self.name.push(nm);
        self.vm.append_option(v);
        self.vcpu
            .append_option(vc.and_then(|s| s.parse::<i32>().ok()));
    }

    /// A line kept for its name, VM and vCPU only: its text and fields
    /// are left empty (`scratch` takes the fields' JSON, then is cleared).
    /// The spin marker lines a streamed parse keeps are a third of a
    /// marker-heavy capture's lines: whole, they were most of the model
    /// build's peak at 100 M events.
    pub(super) fn push_named(
        &mut self,
        ts: i64,
        cpu: i32,
        tid: i64,
        has_tid: bool,
        line: &str,
        scratch: &mut String,
    ) {
        self.ts.push(ts);
        self.cpu.push(cpu);
        self.tid.append_option(has_tid.then_some(tid));
        self.text.end_row();
        let (nm, v, vc) = marker::parse_line_onto(line, scratch);
        self.fields.end_row();
        self.name.push(nm);
        self.vm.append_option(v);
        self.vcpu
            .append_option(vc.and_then(|s| s.parse::<i32>().ok()));
        scratch.clear();
    }

    /// The text columns of the lines since the last call.
    pub(super) fn take_texts(&mut self) -> (StringArray, StringArray, StringArray) {
        (self.name.take(), self.fields.take(), self.text.take())
    }

    /// Hand the text columns' buffers back, for the next batch.
    pub(super) fn give_back_texts(
        &mut self,
        name: StringArray,
        fields: StringArray,
        text: StringArray,
    ) {
        self.name.reuse(name);
        self.fields.reuse(fields);
        self.text.reuse(text);
    }

    pub(super) fn finish_columns(mut self) -> MarkerLines {
        MarkerLines {
            ts: Int64Array::from(self.ts),
            cpu: Int32Array::from(self.cpu),
            tid: self.tid.finish(),
            text: self.text.take(),
            name: self.name.take(),
            fields: self.fields.take(),
            vm: self.vm.finish(),
            vcpu: self.vcpu.finish(),
            streamed: None,
        }
    }

    pub(super) fn finish(self) -> Result<MarkerLines, String> {
        self.finish_columns().in_time_order()
    }
}

/// A string column without nulls, appended to in place (the JSON writer
/// appends straight into `values`, then `end_row` closes the row).
struct Strings {
    offsets: Vec<i32>,
    values: String,
}

impl Strings {
    fn with_capacity(rows: usize, bytes: usize) -> Self {
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0);
        Strings {
            offsets,
            values: String::with_capacity(bytes),
        }
    }

    fn push(&mut self, s: &str) {
        self.values.push_str(s);
        self.end_row();
    }

    fn end_row(&mut self) {
        self.offsets.push(self.values.len() as i32);
    }

    /// The rows so far as an array; the column starts again empty.
    fn take(&mut self) -> StringArray {
        let offsets = std::mem::replace(&mut self.offsets, vec![0]);
        let values = std::mem::take(&mut self.values);
        let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
        // SAFETY: `values` is a `String` and every offset is its length
        // after a whole `&str` (or JSON text) was appended: each row is
        // valid UTF-8 between char boundaries. Checking again read every
        // byte of the table's three text columns once more.
        unsafe { StringArray::new_unchecked(offsets, Buffer::from_vec(values.into_bytes()), None) }
    }

    /// Take the buffers of `a` (from [`Self::take`], no longer shared)
    /// back, emptied; a shared buffer is left to its other owners.
    fn reuse(&mut self, a: StringArray) {
        let (offsets, values, _) = a.into_parts();
        if let Ok(mut o) = offsets.into_inner().into_inner().into_vec::<i32>() {
            o.clear();
            o.push(0);
            self.offsets = o;
        }
        if let Ok(mut v) = values.into_vec::<u8>() {
            v.clear();
            // empty: valid UTF-8
            self.values = String::from_utf8(v).unwrap_or_default();
        }
    }
}
