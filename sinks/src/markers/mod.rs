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
use arrow_schema::{DataType, Field, Schema};
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

mod parse;
use parse::Parser;

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
    /// lines of these names are, with empty `text` and `fields`.
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
    /// per 4 KiB here). Only the lines named in `keep` are kept, for
    /// [`Self::table`], and without their text and fields (empty there):
    /// what pairs them is their time, writer, name, VM and vCPU. `Ok(None)` when the rows are not in time order (then
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
        let mut scratch = String::new();
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
                            kept.push_named(
                                p.ts[row],
                                p.cpu[row],
                                p.tid.values_slice()[row],
                                p.tid
                                    .validity_slice()
                                    .is_none_or(|v| arrow_buffer::bit_util::get_bit(v, row)),
                                text.value(i),
                                &mut scratch,
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

    /// Spin episodes from marker pairs: per (VM, vCPU) as attributed (as in
    /// [`Self::table`]; lines without both are left out), a `begin` line
    /// whose next line of the two names is an `end` line opens an episode
    /// it closes. A frame of `vm`, `vcpu`, `tid` (the `begin` line's
    /// writer), `start` and `end`, in the order the episodes ended. The
    /// pairs were a polars query over a table of the lines: at 100 M events
    /// (6.8 M spin lines) that table and the query took a GB.
    pub fn pairs(
        &self,
        writers: &WriterVms,
        begin: &str,
        end: &str,
    ) -> Result<RecordBatch, String> {
        if let Some((keep, kept)) = &self.streamed {
            if ![begin, end].iter().all(|n| keep.iter().any(|k| k == n)) {
                return Err(format!("markers: the lines were encoded as they were read; only those named {keep:?} were kept"));
            }
            return kept.pairs(writers, begin, end);
        }
        let rows: Vec<u32> = (0..self.len() as u32)
            .filter(|&i| [begin, end].contains(&self.name.value(i as usize)))
            .collect();
        let lines = if rows.len() == self.len() {
            None
        } else {
            Some(self.rows(&UInt32Array::from(rows))?)
        };
        let lines = lines.as_ref().unwrap_or(self);
        let (vm, vcpu) = lines.attributed(writers);
        let (vm, vcpu) = (vm.as_string::<i32>(), vcpu.as_primitive::<Int32Type>());
        let n = lines.len();
        let mut out_vm = StringBuilder::with_capacity(n / 2, n * 2);
        let (mut out_vcpu, mut out_tid) = (
            Int32Builder::with_capacity(n / 2),
            Int64Builder::with_capacity(n / 2),
        );
        let (mut start, mut stop) = (Vec::with_capacity(n / 2), Vec::with_capacity(n / 2));
        // each (VM, vCPU)'s last line: whether it was a `begin`, its row
        let mut last: HashMap<(&str, i32), (bool, usize)> = HashMap::new();
        for i in 0..n {
            if vm.is_null(i) || vcpu.is_null(i) {
                continue;
            }
            let is_begin = lines.name.value(i) == begin;
            let key = (vm.value(i), vcpu.value(i));
            if let Some((true, b)) = last.insert(key, (is_begin, i)) {
                if !is_begin {
                    out_vm.append_value(key.0);
                    out_vcpu.append_value(key.1);
                    out_tid.append_option(lines.tid.is_valid(b).then(|| lines.tid.value(b)));
                    start.push(lines.ts.value(b));
                    stop.push(lines.ts.value(i));
                }
            }
        }
        let cols: Vec<ArrayRef> = vec![
            Arc::new(out_vm.finish()),
            Arc::new(out_vcpu.finish()),
            Arc::new(out_tid.finish()),
            Arc::new(Int64Array::from(start)),
            Arc::new(Int64Array::from(stop)),
        ];
        let schema = Schema::new(vec![
            Field::new("vm", DataType::Utf8, true),
            Field::new("vcpu", DataType::Int32, true),
            Field::new("tid", DataType::Int64, true),
            Field::new("start", DataType::Int64, false),
            Field::new("end", DataType::Int64, false),
        ]);
        RecordBatch::try_new(Arc::new(schema), cols).map_err(|e| format!("marker pairs: {e}"))
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

#[cfg(test)]
mod tests;
