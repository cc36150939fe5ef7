//! Parquet encoding and compression on a thread of their own.
//!
//! Decoding a trace and encoding Parquet each take about half of an
//! import's CPU time, and neither needs the other's state: the reader's
//! thread builds Arrow batches, this thread encodes, compresses and writes
//! them. A bounded channel keeps at most [`IN_FLIGHT`] batches between the
//! two, so memory stays bounded however far the reader runs ahead.

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use std::fs::File;
use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

/// Batches queued between the reader's thread and the writer's.
const IN_FLIGHT: usize = 4;

enum Msg {
    /// Table `idx` starts: create its file with this schema.
    Open(usize, PathBuf, SchemaRef),
    /// Rows for table `idx` (opened before).
    Batch(usize, RecordBatch),
}

/// The sending half; the thread owns the files.
pub(crate) struct BackgroundWriter {
    tx: Option<SyncSender<Msg>>,
    thread: Option<JoinHandle<Result<Vec<(usize, PathBuf)>, String>>>,
    failed: Option<String>,
}

impl BackgroundWriter {
    pub(crate) fn start(props: WriterProperties) -> Self {
        let (tx, rx) = sync_channel(IN_FLIGHT);
        match std::thread::Builder::new()
            .name("cratrace-parquet".into())
            .spawn(move || run(rx, props))
        {
            Ok(thread) => BackgroundWriter {
                tx: Some(tx),
                thread: Some(thread),
                failed: None,
            },
            // Reported by the first write, as a one-line error, not a panic.
            Err(e) => BackgroundWriter {
                tx: None,
                thread: None,
                failed: Some(format!("cannot start the Parquet writer thread: {e}")),
            },
        }
    }

    pub(crate) fn open(
        &mut self,
        idx: usize,
        path: PathBuf,
        schema: SchemaRef,
    ) -> Result<(), String> {
        self.send(Msg::Open(idx, path, schema))
    }

    pub(crate) fn write(&mut self, idx: usize, batch: RecordBatch) -> Result<(), String> {
        self.send(Msg::Batch(idx, batch))
    }

    fn send(&mut self, m: Msg) -> Result<(), String> {
        let sent = self
            .tx
            .as_ref()
            .map(|tx| tx.send(m).is_ok())
            .unwrap_or(false);
        if sent {
            return Ok(());
        }
        // The thread stopped on an error: report that error, not the send's.
        Err(self
            .join()
            .err()
            .unwrap_or_else(|| "the Parquet writer stopped".into()))
    }

    /// Close every file; (table index, path) of each file written.
    pub(crate) fn join(&mut self) -> Result<Vec<(usize, PathBuf)>, String> {
        self.tx = None;
        match self.thread.take() {
            Some(t) => t
                .join()
                .unwrap_or_else(|_| Err("the Parquet writer thread panicked".into())),
            None => Err(self
                .failed
                .clone()
                .unwrap_or_else(|| "the Parquet writer already stopped".into())),
        }
    }
}

impl Drop for BackgroundWriter {
    fn drop(&mut self) {
        // An abandoned import (error in the reader) still lets the thread
        // finish and close its files; the caller discards the directory.
        if self.thread.is_some() {
            let _ = self.join();
        }
    }
}

/// `props` without min/max statistics for the table's string columns.
/// Their bounds prune nothing a query asks for: per-event text
/// (trace_marker and trace_printk lines) differs on every row, and names
/// (tasks, buffer instances, states) are a few values that span every row
/// group. Each value's comparison against a page's bounds is a libc
/// `memcmp` call, and where glibc picks its AVX-512 string functions those
/// calls cost tens of ns each: 7 M of them were 40% of a 2.9 M-event
/// trace.dat import (1.26 s → 0.79 s on one core without them).
fn without_text_statistics(
    props: &WriterProperties,
    schema: &arrow_schema::Schema,
) -> WriterProperties {
    let mut b = props.clone().into_builder();
    for f in schema.fields() {
        if matches!(f.data_type(), arrow_schema::DataType::Utf8) {
            b = b.set_column_statistics_enabled(
                parquet::schema::types::ColumnPath::from(f.name().as_str()),
                parquet::file::properties::EnabledStatistics::None,
            );
        }
    }
    b.build()
}

fn run(rx: Receiver<Msg>, props: WriterProperties) -> Result<Vec<(usize, PathBuf)>, String> {
    let mut files: Vec<Option<(ArrowWriter<File>, PathBuf)>> = Vec::new();
    for m in rx {
        match m {
            Msg::Open(idx, path, schema) => {
                let f = File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                let w = ArrowWriter::try_new(
                    f,
                    schema.clone(),
                    Some(without_text_statistics(&props, &schema)),
                )
                .map_err(|e| format!("{}: {e}", path.display()))?;
                if files.len() <= idx {
                    files.resize_with(idx + 1, || None);
                }
                files[idx] = Some((w, path));
            }
            Msg::Batch(idx, batch) => {
                let (w, path) = files
                    .get_mut(idx)
                    .and_then(Option::as_mut)
                    .ok_or_else(|| format!("table {idx} written before it was opened"))?;
                w.write(&batch)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
            }
        }
    }
    let mut out = Vec::new();
    for (idx, f) in files.into_iter().enumerate() {
        if let Some((w, path)) = f {
            w.close().map_err(|e| format!("{}: {e}", path.display()))?;
            out.push((idx, path));
        }
    }
    Ok(out)
}
