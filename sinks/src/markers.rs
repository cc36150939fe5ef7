//! The model's `markers` table as Arrow columns: trace_marker lines (the
//! `print` event table) parsed into a name and `key=value` fields, each
//! line given the VM and vCPU it names or, failing that, its writer
//! thread's.
//!
//! Marker-heavy traces have a line for every transaction, so this table is
//! often the model's largest; built in Python it was most of the model
//! build (parsing, joining with the threads, encoding the text twice).
//! Parsing needs only the print events, attribution needs the threads
//! table, so they are two steps: the build parses while it computes the
//! threads. A print table in time order (as imports write it) is parsed
//! and its text columns encoded batch by batch ([`MarkerLines::stream`]),
//! so the table is never in memory whole; [`MarkerLines::from_batches`]
//! and [`MarkerLines::from_reader`] keep it all (and sort it if needed).

use crate::{Codec, EncodedTable, Encodings};
use arrow_array::builder::{Int32Builder, Int64Builder, StringBuilder};
use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray, UInt32Array};
use arrow_buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Schema};
use cratrace_format::ftrace::marker;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

/// Parsed marker lines of the top-level buffer, in time order, before
/// attribution.
pub struct MarkerLines {
    ts: Int64Array,
    cpu: Int32Array,
    tid: Int64Array,
    text: StringArray,
    name: StringArray,
    fields: StringArray,
    /// the line's own `vm=` value
    vm: StringArray,
    /// the line's own `vcpu=` value, when an integer
    vcpu: Int32Array,
    /// Read by [`Self::stream`]: the text columns were encoded as they were
    /// parsed and are not here (`text`, `name` and `fields` are empty); the
    /// lines of these names are, whole.
    streamed: Option<(Vec<String>, Box<MarkerLines>)>,
}

/// Writer thread → (VM, vCPU), from the `threads` table.
pub struct WriterVms {
    of: HashMap<i64, (Option<String>, Option<i32>), BuildHasherDefault<TidHash>>,
}

/// A hash for thread ids, which are small distinct integers: a multiply
/// and fold, where the default SipHash cost a tenth of the markers write.
#[derive(Default)]
struct TidHash(u64);

impl Hasher for TidHash {
    fn finish(&self) -> u64 {
        let h = self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^ (h >> 32)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | b as u64;
        }
    }
    fn write_i64(&mut self, v: i64) {
        self.0 = v as u64;
    }
}

fn column<'a>(b: &'a RecordBatch, name: &str) -> Option<&'a ArrayRef> {
    b.schema().index_of(name).ok().map(|i| b.column(i))
}

fn cast(a: &ArrayRef, to: &DataType, what: &str, name: &str) -> Result<ArrayRef, String> {
    arrow_cast::cast(a, to).map_err(|e| format!("{what}: column {name}: {e}"))
}

fn required(b: &RecordBatch, name: &str, to: &DataType, what: &str) -> Result<ArrayRef, String> {
    let a = column(b, name).ok_or_else(|| format!("{what}: no column {name}"))?;
    cast(a, to, what, name)
}

impl WriterVms {
    /// From batches with `tid`, `vm` and `vcpu` columns (the first row of a
    /// repeated tid wins).
    pub fn from_batches(batches: &[RecordBatch]) -> Result<Self, String> {
        let what = "threads";
        let mut of = HashMap::default();
        for b in batches {
            let tid = required(b, "tid", &DataType::Int64, what)?;
            let vm = required(b, "vm", &DataType::Utf8, what)?;
            let vcpu = required(b, "vcpu", &DataType::Int32, what)?;
            let (tid, vm, vcpu) = (
                tid.as_primitive::<Int64Type>(),
                vm.as_string::<i32>(),
                vcpu.as_primitive::<Int32Type>(),
            );
            for i in 0..b.num_rows() {
                if tid.is_valid(i) {
                    of.entry(tid.value(i)).or_insert_with(|| {
                        (
                            vm.is_valid(i).then(|| vm.value(i).to_string()),
                            vcpu.is_valid(i).then(|| vcpu.value(i)),
                        )
                    });
                }
            }
        }
        Ok(WriterVms { of })
    }
}

impl MarkerLines {
    /// Parse the rows of the top-level buffer (`instance` "", or every row
    /// without an `instance` column) of print-event batches: `ts`, `cpu`,
    /// `pid` and `buf`, the text, whose trailing newlines are dropped.
    pub fn from_batches(batches: &[RecordBatch]) -> Result<Self, String> {
        let rows = batches.iter().map(|b| b.num_rows()).sum();
        let bytes = batches
            .iter()
            .filter_map(|b| column(b, "buf"))
            .map(|a| a.get_buffer_memory_size())
            .sum();
        let mut p = Parser::with_capacity(rows, rows, bytes);
        for b in batches {
            p.push(b)?;
        }
        p.finish()
    }

    /// Parse the print table `r` reads, a batch at a time.
    pub fn from_reader(r: crate::TableReader) -> Result<Self, String> {
        let mut p = Parser::with_capacity(r.rows(), r.rows(), r.uncompressed_bytes("buf"));
        for b in r {
            p.push(&b?)?;
        }
        p.finish()
    }

    /// Parse the print table `r` reads, encoding each batch's text columns
    /// (`name`, `fields`, `text`) as a row group of a file compressed with
    /// `codec` as soon as the batch is parsed, then `ts`, `cpu` and `tid`:
    /// the table of a million lines is never in memory whole, and the
    /// buffers of one batch serve the next (fresh memory costs a page fault
    /// per 4 KiB here). Only the lines named in `keep` are kept whole, for
    /// [`Self::table`]. `Ok(None)` when the rows are not in time order (then
    /// use [`Self::from_reader`], which sorts them).
    pub fn stream(
        r: crate::TableReader,
        codec: Codec,
        keep: &[&str],
    ) -> Result<Option<(Self, EncodedTable)>, String> {
        let batch_rows = crate::table_file::ROWS.min(r.rows().max(1));
        let bytes_per_row = r.uncompressed_bytes("buf") / r.rows().max(1) + 1;
        let mut p = Parser::with_capacity(r.rows(), batch_rows, batch_rows * bytes_per_row);
        let mut kept = Parser::with_capacity(0, 0, 0);
        let t = EncodedTable::streamed(schema(), codec, &ENCODINGS)?;
        // A batch's text columns are encoded on a thread of their own while
        // the next batch is read and parsed (the encoding, mostly LZ4 over
        // the raw text, took as long as the parse when they took turns).
        // The encoder hands each batch's buffers back for a later batch.
        let (to_encoder, batches) = std::sync::mpsc::sync_channel::<[StringArray; 3]>(1);
        let (give_back, spent) = std::sync::mpsc::channel::<[StringArray; 3]>();
        std::thread::scope(|s| {
            let encoder = s.spawn(move || -> Result<EncodedTable, String> {
                let mut t = t;
                for texts in batches {
                    let arrays: Vec<ArrayRef> = texts
                        .iter()
                        .map(|a| Arc::new(a.clone()) as ArrayRef)
                        .collect();
                    t.push_group(&[5, 6, 7], &arrays)?;
                    drop(arrays);
                    // the parser may have finished: then nothing needs them
                    let _ = give_back.send(texts);
                }
                Ok(t)
            });
            let parsed = (|| -> Result<bool, String> {
                for b in r {
                    let start = p.ts.len();
                    p.push(&b?)?;
                    if p.ts.len() == start {
                        continue;
                    }
                    // this batch's rows, and the last row before them
                    if !p.ts[start.saturating_sub(1)..]
                        .windows(2)
                        .all(|w| w[0] <= w[1])
                    {
                        return Ok(false);
                    }
                    let (name, fields, text) = p.take_texts();
                    for i in 0..name.len() {
                        if keep.contains(&name.value(i)) {
                            let row = start + i;
                            kept.push_line(
                                p.ts[row],
                                p.cpu[row],
                                p.tid.values_slice()[row],
                                p.tid
                                    .validity_slice()
                                    .is_none_or(|v| arrow_buffer::bit_util::get_bit(v, row)),
                                text.value(i),
                            );
                        }
                    }
                    if to_encoder.send([name, fields, text]).is_err() {
                        // the encoder stopped on an error: joining it says which
                        return Ok(true);
                    }
                    if let Ok([name, fields, text]) = spent.try_recv() {
                        p.give_back_texts(name, fields, text);
                    }
                }
                Ok(true)
            })();
            drop(to_encoder);
            let t = encoder
                .join()
                .unwrap_or_else(|_| Err("markers: the text encoder panicked".into()));
            let (in_order, mut t) = match (parsed, t) {
                (Err(e), _) | (Ok(_), Err(e)) => return Err(e),
                (Ok(in_order), Ok(t)) => (in_order, t),
            };
            if !in_order {
                return Ok(None);
            }
            let mut lines =
                std::mem::replace(&mut p, Parser::with_capacity(0, 0, 0)).finish_columns();
            let arrays: Vec<ArrayRef> = vec![
                Arc::new(lines.ts.clone()),
                Arc::new(lines.cpu.clone()),
                Arc::new(lines.tid.clone()),
            ];
            t.encode(&[0, 1, 2], &arrays)?;
            lines.streamed = Some((
                keep.iter().map(|k| k.to_string()).collect(),
                Box::new(
                    std::mem::replace(&mut kept, Parser::with_capacity(0, 0, 0)).finish_columns(),
                ),
            ));
            Ok(Some((lines, t)))
        })
    }

    /// Rows sorted by `ts`, ties in input order (print tables from an
    /// import already are: then this costs one pass).
    fn in_time_order(self) -> Result<Self, String> {
        let t = self.ts.values();
        if t.windows(2).all(|w| w[0] <= w[1]) {
            return Ok(self);
        }
        let mut order: Vec<u32> = (0..t.len() as u32).collect();
        order.sort_by_key(|&i| t[i as usize]); // stable
        self.rows(&UInt32Array::from(order))
    }

    /// The lines at these row numbers, in their order.
    fn rows(&self, order: &UInt32Array) -> Result<Self, String> {
        let take = |a: &dyn Array| {
            arrow_select::take::take(a, order, None).map_err(|e| format!("print: {e}"))
        };
        Ok(MarkerLines {
            ts: take(&self.ts)?.as_primitive::<Int64Type>().clone(),
            cpu: take(&self.cpu)?.as_primitive::<Int32Type>().clone(),
            tid: take(&self.tid)?.as_primitive::<Int64Type>().clone(),
            text: take(&self.text)?.as_string::<i32>().clone(),
            name: take(&self.name)?.as_string::<i32>().clone(),
            fields: take(&self.fields)?.as_string::<i32>().clone(),
            vm: take(&self.vm)?.as_string::<i32>().clone(),
            vcpu: take(&self.vcpu)?.as_primitive::<Int32Type>().clone(),
            streamed: None,
        })
    }

    /// Lines parsed.
    pub fn len(&self) -> usize {
        self.ts.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ts.is_empty()
    }

    /// The `markers` table (`ts`, `cpu`, `tid`, `vm`, `vcpu`, `name`,
    /// `fields`, `text`), in time order; a line without its own
    /// `vm=`/`vcpu=` takes its writer's. With `names`, only the lines of
    /// those names.
    pub fn table(
        &self,
        writers: &WriterVms,
        names: Option<&[&str]>,
    ) -> Result<RecordBatch, String> {
        if let Some((keep, kept)) = &self.streamed {
            return match names {
                Some(names) if names.iter().all(|n| keep.iter().any(|k| k == n)) => kept.table(writers, Some(names)),
                _ => Err(format!("markers: the lines were encoded as they were read; only those named {keep:?} were kept")),
            };
        }
        if let Some(names) = names {
            // only those lines are attributed: the spin marker lines of a
            // capture of a million transaction markers are a handful
            let keep: Vec<u32> = (0..self.len() as u32)
                .filter(|&i| names.contains(&self.name.value(i as usize)))
                .collect();
            return self.rows(&UInt32Array::from(keep))?.table(writers, None);
        }
        let (vm, vcpu) = self.attributed(writers);
        let cols: Vec<ArrayRef> = vec![
            Arc::new(self.ts.clone()),
            Arc::new(self.cpu.clone()),
            Arc::new(self.tid.clone()),
            vm,
            vcpu,
            Arc::new(self.name.clone()),
            Arc::new(self.fields.clone()),
            Arc::new(self.text.clone()),
        ];
        RecordBatch::try_new(schema(), cols).map_err(|e| format!("markers: {e}"))
    }

    /// The columns that do not depend on the writer threads (all but `vm`
    /// and `vcpu`) encoded for a file compressed with `codec`: the model
    /// build does this before the threads table exists.
    pub fn encode_ahead(&self, codec: Codec) -> Result<EncodedTable, String> {
        if self.streamed.is_some() {
            return Err(
                "markers: the lines were encoded as they were read, with their codec".into(),
            );
        }
        let mut t = EncodedTable::new(schema(), self.len(), codec, &ENCODINGS)?;
        let arrays: Vec<ArrayRef> = vec![
            Arc::new(self.ts.clone()),
            Arc::new(self.cpu.clone()),
            Arc::new(self.tid.clone()),
            Arc::new(self.name.clone()),
            Arc::new(self.fields.clone()),
            Arc::new(self.text.clone()),
        ];
        t.encode(&[0, 1, 2, 5, 6, 7], &arrays)?;
        Ok(t)
    }

    /// Write the table to `path` as Parquet (with the rest of `ahead`, from
    /// [`Self::encode_ahead`] with the same codec, when given); returns its rows.
    pub fn write(
        &self,
        writers: &WriterVms,
        ahead: Option<EncodedTable>,
        codec: Codec,
        path: &std::path::Path,
    ) -> Result<usize, String> {
        let (vm, vcpu) = self.attributed(writers);
        let mut t = match ahead {
            Some(t) => t,
            None => self.encode_ahead(codec)?,
        };
        t.encode(&[3, 4], &[vm, vcpu])?;
        t.write(path)?;
        Ok(self.len())
    }

    /// The `vm` and `vcpu` columns: the line's own, else its writer's. A
    /// line naming a VM the threads table does not know (a guest's own
    /// name for itself, where the host's VMs are named `qemu-<pid>` for
    /// want of an inventory) takes its writer's VM and vCPU, when its
    /// writer is a VM's thread: attributed to the name it gave, its
    /// transactions counted for no VM at all.
    fn attributed(&self, writers: &WriterVms) -> (ArrayRef, ArrayRef) {
        let n = self.len();
        let mut vm = StringBuilder::with_capacity(n, n * 4);
        let mut vcpu = Int32Builder::with_capacity(n);
        let known: HashSet<&str> = writers.of.values().filter_map(|w| w.0.as_deref()).collect();
        // most lines name the VM the line before named
        let mut last: Option<(&str, bool)> = None;
        for i in 0..n {
            // the writer is looked up only for a line that lacks a value:
            // most name both (a hash lookup per line was a tenth of the write:
            // 0.28 -> 0.25 s, medians of 6, on 5.2 M lines)
            let writer = || {
                if self.tid.is_valid(i) {
                    writers.of.get(&self.tid.value(i))
                } else {
                    None
                }
            };
            let own = self.vm.is_valid(i).then(|| self.vm.value(i));
            let own_known = own.map(|v| match last {
                Some((lv, k)) if lv == v => k,
                _ => {
                    let k = known.contains(v);
                    last = Some((v, k));
                    k
                }
            });
            let writers_vm = match own_known {
                // no thread has a VM to give: the name stands
                Some(false) if known.is_empty() => None,
                Some(true) => None,
                _ => writer().filter(|w| w.0.is_some()),
            };
            match (own, writers_vm) {
                (_, Some(w)) => {
                    vm.append_option(w.0.as_deref());
                    let line_vcpu = self.vcpu.is_valid(i).then(|| self.vcpu.value(i));
                    vcpu.append_option(match own {
                        // the writer's own numbering, unless it has none
                        Some(_) => w.1.or(line_vcpu),
                        None => line_vcpu.or(w.1),
                    });
                }
                (v, None) => {
                    vm.append_option(v);
                    vcpu.append_option(if self.vcpu.is_valid(i) {
                        Some(self.vcpu.value(i))
                    } else {
                        writer().and_then(|w| w.1)
                    });
                }
            }
        }
        (Arc::new(vm.finish()), Arc::new(vcpu.finish()))
    }
}

/// The columns of [`MarkerLines`] as they are parsed, batch by batch.
struct Parser {
    ts: Vec<i64>,
    cpu: Vec<i32>,
    tid: Int64Builder,
    text: Strings,
    name: Strings,
    fields: Strings,
    vm: StringBuilder,
    vcpu: Int32Builder,
}

impl Parser {
    /// For about `rows` lines, whose text columns hold about `text_rows`
    /// lines of `bytes` bytes of text at a time.
    fn with_capacity(rows: usize, text_rows: usize, bytes: usize) -> Self {
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

    fn push(&mut self, b: &RecordBatch) -> Result<(), String> {
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

    fn push_line(&mut self, ts: i64, cpu: i32, tid: i64, has_tid: bool, line: &str) {
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

    /// The text columns of the lines since the last call.
    fn take_texts(&mut self) -> (StringArray, StringArray, StringArray) {
        (self.name.take(), self.fields.take(), self.text.take())
    }

    /// Hand the text columns' buffers back, for the next batch.
    fn give_back_texts(&mut self, name: StringArray, fields: StringArray, text: StringArray) {
        self.name.reuse(name);
        self.fields.reuse(fields);
        self.text.reuse(text);
    }

    fn finish_columns(mut self) -> MarkerLines {
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

    fn finish(self) -> Result<MarkerLines, String> {
        self.finish_columns().in_time_order()
    }
}

/// How the table is best encoded: few VMs and marker names, time-ordered
/// timestamps, free text.
pub const ENCODINGS: Encodings<'static> = Encodings {
    dictionary: &["vm", "name"],
    delta: &["ts", "cpu"],
    without_statistics: &["fields", "text"],
};

/// The `markers` table's Arrow schema (cratrace/tables.py declares it).
pub fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("ts", DataType::Int64, false),
        Field::new("cpu", DataType::Int32, true),
        Field::new("tid", DataType::Int64, true),
        Field::new("vm", DataType::Utf8, true),
        Field::new("vcpu", DataType::Int32, true),
        Field::new("name", DataType::Utf8, false),
        Field::new("fields", DataType::Utf8, true),
        Field::new("text", DataType::Utf8, false),
    ]))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn prints(
        ts: Vec<i64>,
        pid: Vec<Option<i64>>,
        inst: Vec<&str>,
        buf: Vec<Option<&str>>,
    ) -> RecordBatch {
        let n = ts.len();
        RecordBatch::try_from_iter([
            ("ts", Arc::new(Int64Array::from(ts)) as ArrayRef),
            ("cpu", Arc::new(Int32Array::from(vec![1; n])) as _),
            ("pid", Arc::new(Int64Array::from(pid)) as _),
            ("instance", Arc::new(StringArray::from(inst)) as _),
            ("buf", Arc::new(StringArray::from(buf)) as _),
        ])
        .unwrap()
    }

    /// Thread 9 writes for VM `w`, vCPU 3.
    fn writer_9_of_w_vcpu_3() -> WriterVms {
        let threads = RecordBatch::try_from_iter([
            ("tid", Arc::new(Int64Array::from(vec![9])) as ArrayRef),
            ("vm", Arc::new(StringArray::from(vec!["w"])) as _),
            ("vcpu", Arc::new(Int32Array::from(vec![3])) as _),
        ])
        .unwrap();
        WriterVms::from_batches(&[threads]).unwrap()
    }

    fn i32s(b: &RecordBatch, name: &str) -> Vec<Option<i32>> {
        b.column_by_name(name)
            .unwrap()
            .as_primitive::<Int32Type>()
            .iter()
            .collect()
    }

    fn strs(b: &RecordBatch, name: &str) -> Vec<Option<String>> {
        b.column_by_name(name)
            .unwrap()
            .as_string::<i32>()
            .iter()
            .map(|s| s.map(str::to_string))
            .collect()
    }

    #[test]
    fn lines_take_their_writers_vm_unless_they_name_one() {
        let p = prints(
            vec![30, 10, 20, 20],
            vec![Some(7), Some(7), None, Some(8)],
            vec!["", "", "", "inst"],
            vec![
                Some("txn_end vcpu=x n=1\n"),
                Some("spin_begin vm=a vcpu=2\n\n"),
                None,
                Some("elsewhere"),
            ],
        );
        // thread 11 makes VM `a` one the threads table knows
        let threads = RecordBatch::try_from_iter([
            (
                "tid",
                Arc::new(Int64Array::from(vec![7, 7, 11])) as ArrayRef,
            ),
            (
                "vm",
                Arc::new(StringArray::from(vec![Some("w"), Some("other"), Some("a")])) as _,
            ),
            (
                "vcpu",
                Arc::new(Int32Array::from(vec![Some(5), None, Some(0)])) as _,
            ),
        ])
        .unwrap();
        let lines = MarkerLines::from_batches(&[p]).unwrap();
        assert_eq!(lines.len(), 3);
        let t = lines
            .table(
                &WriterVms::from_batches(std::slice::from_ref(&threads)).unwrap(),
                None,
            )
            .unwrap();
        assert_eq!(
            t.column(0).as_primitive::<Int64Type>().values(),
            &[10, 20, 30]
        );
        assert_eq!(
            strs(&t, "text"),
            [
                Some("spin_begin vm=a vcpu=2".into()),
                Some("".into()),
                Some("txn_end vcpu=x n=1".into())
            ]
        );
        assert_eq!(
            strs(&t, "name"),
            [
                Some("spin_begin".into()),
                Some("".into()),
                Some("txn_end".into())
            ]
        );
        assert_eq!(strs(&t, "vm"), [Some("a".into()), None, Some("w".into())]);
        // `vcpu=x` is not a number: the writer's vCPU stands
        let vcpu = i32s(&t, "vcpu");
        assert_eq!(vcpu, [Some(2), None, Some(5)]);
        assert_eq!(
            strs(&t, "fields")[2].as_deref(),
            Some(r#"{"vcpu":"x","n":"1"}"#)
        );
        let spins = lines
            .table(
                &WriterVms::from_batches(&[threads]).unwrap(),
                Some(&["spin_begin", "spin_end"]),
            )
            .unwrap();
        assert_eq!(spins.num_rows(), 1);
    }

    #[test]
    fn a_line_naming_a_vm_the_threads_do_not_know_takes_its_writers() {
        // a guest calling itself `vm0` where the host's VM is `w`
        let p = prints(
            vec![1, 2, 3, 4],
            vec![Some(9), None, Some(9), Some(4)],
            vec!["", "", "", ""],
            vec![
                Some("txn_end vm=vm0 vcpu=0"),
                Some("txn_end vm=vm0 vcpu=1"),
                Some("txn_end vm=w vcpu=7"),
                Some("txn_end vm=vm0"),
            ],
        );
        let t = MarkerLines::from_batches(&[p])
            .unwrap()
            .table(&writer_9_of_w_vcpu_3(), None)
            .unwrap();
        // the writer's VM and vCPU; no writer (or one of no VM): the name
        // stays; a known name keeps its line's vCPU
        assert_eq!(
            strs(&t, "vm"),
            [
                Some("w".into()),
                Some("vm0".into()),
                Some("w".into()),
                Some("vm0".into())
            ]
        );
        let vcpu = i32s(&t, "vcpu");
        assert_eq!(vcpu, [Some(3), Some(1), Some(7), None]);
        assert_eq!(
            strs(&t, "fields")[0].as_deref(),
            Some(r#"{"vm":"vm0","vcpu":"0"}"#)
        );
    }

    #[test]
    fn the_written_file_holds_the_table_encoded_ahead_or_not() {
        let p = prints(
            vec![5, 1, 3],
            vec![Some(7), Some(9), None],
            vec!["", "", ""],
            vec![Some("a vm=x"), Some("b k=\"q\""), Some("c")],
        );
        let w = writer_9_of_w_vcpu_3();
        let lines = MarkerLines::from_batches(&[p]).unwrap();
        let want = lines.table(&w, None).unwrap();
        for ahead in [false, true] {
            let path = std::env::temp_dir().join(format!(
                "cratrace-markers-{}-{ahead}.parquet",
                std::process::id()
            ));
            let early = ahead.then(|| lines.encode_ahead(Codec::Zstd).unwrap());
            assert_eq!(lines.write(&w, early, Codec::Zstd, &path).unwrap(), 3);
            let schema = want.schema();
            let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
            let back = crate::read_columns(&path, &names).unwrap();
            assert_eq!(back, std::slice::from_ref(&want));
            std::fs::remove_file(&path).ok();
        }
    }

    #[test]
    fn a_streamed_read_writes_the_same_table_and_keeps_the_named_lines() {
        let dir = std::env::temp_dir();
        let src = dir.join(format!("cratrace-print-{}.parquet", std::process::id()));
        let n = 600_000i64; // three batches of the reader
        let texts: Vec<String> = (0..n)
            .map(|i| {
                if i % 100_000 == 7 {
                    format!("spin_begin vm=v vcpu={}", i % 3)
                } else {
                    format!("txn_end n={i} q=\"x\"\n")
                }
            })
            .collect();
        let batch = prints(
            (0..n).collect(),
            (0..n).map(|i| (i % 5 != 0).then_some(9)).collect(),
            vec![""; n as usize],
            texts.iter().map(|t| Some(t.as_str())).collect(),
        );
        crate::write_batch(&src, &batch, Codec::Lz4, &crate::Encodings::default()).unwrap();
        let w = writer_9_of_w_vcpu_3();
        let full = MarkerLines::from_reader(
            crate::TableReader::open(&src, &["ts", "cpu", "pid", "instance", "buf"]).unwrap(),
        )
        .unwrap();
        let (streamed, ahead) = MarkerLines::stream(
            crate::TableReader::open(&src, &["ts", "cpu", "pid", "instance", "buf"]).unwrap(),
            Codec::Lz4,
            &["spin_begin"],
        )
        .unwrap()
        .unwrap();
        assert_eq!(streamed.len(), n as usize);
        assert_eq!(
            streamed.table(&w, Some(&["spin_begin"])).unwrap(),
            full.table(&w, Some(&["spin_begin"])).unwrap()
        );
        assert_eq!(
            streamed
                .table(&w, Some(&["spin_begin"]))
                .unwrap()
                .num_rows(),
            6
        );
        assert!(streamed.table(&w, None).is_err() && streamed.encode_ahead(Codec::Lz4).is_err());
        let out = dir.join(format!(
            "cratrace-markers-streamed-{}.parquet",
            std::process::id()
        ));
        streamed.write(&w, Some(ahead), Codec::Lz4, &out).unwrap();
        let want = full.table(&w, None).unwrap();
        let schema = want.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        let got = arrow_select::concat::concat_batches(
            &schema,
            &crate::read_columns(&out, &names).unwrap(),
        )
        .unwrap();
        assert_eq!(got, want);
        // out of time order: not streamed (the caller reads it whole, sorted)
        let unsorted = prints(
            vec![2, 1],
            vec![Some(9), Some(9)],
            vec!["", ""],
            vec![Some("a"), Some("b")],
        );
        crate::write_batch(&src, &unsorted, Codec::Lz4, &crate::Encodings::default()).unwrap();
        assert!(MarkerLines::stream(
            crate::TableReader::open(&src, &["ts", "cpu", "pid", "instance", "buf"]).unwrap(),
            Codec::Lz4,
            &[]
        )
        .unwrap()
        .is_none());
        std::fs::remove_file(&src).ok();
        std::fs::remove_file(&out).ok();
    }

    #[test]
    fn a_batch_without_the_text_column_is_an_error_naming_it() {
        let b =
            RecordBatch::try_from_iter([("ts", Arc::new(Int64Array::from(vec![1])) as ArrayRef)])
                .unwrap();
        assert_eq!(
            MarkerLines::from_batches(&[b]).err().unwrap(),
            "print: no column buf"
        );
    }
}
