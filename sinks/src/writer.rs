//! Parquet encoding and compression on a thread of their own.
//!
//! Decoding a trace and encoding Parquet each take about half of an
//! import's CPU time, and neither needs the other's state: the reader's
//! thread builds Arrow batches, this thread encodes, compresses and writes
//! them. A bounded channel keeps at most [`IN_FLIGHT`] batches between the
//! two, so memory stays bounded however far the reader runs ahead.

use crate::event_file::EventFile;
use crate::Codec;
use arrow_schema::SchemaRef;
use cratrace_format::{ColumnType, RowBatch};
use std::path::PathBuf;
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::thread::JoinHandle;

/// Batches queued between the reader's thread and the writer's.
const IN_FLIGHT: usize = 4;

enum Msg {
    /// Table `idx` starts: create its file with this schema (the event's
    /// columns typed as given) and instance names.
    Open(usize, PathBuf, SchemaRef, Vec<ColumnType>, Vec<String>),
    /// Rows for table `idx` (opened before).
    Batch(usize, RowBatch),
}

/// What the writer thread ends with: each table's index and file, or why
/// it stopped.
type Finished = Result<Vec<(usize, PathBuf)>, String>;

/// The sending half; the thread owns the files.
pub(crate) struct BackgroundWriter {
    tx: Option<SyncSender<Msg>>,
    /// Batches written, emptied, for the sink to copy its next full batch
    /// into: their pages stay mapped, where fresh ones cost page faults.
    pub(crate) returned: Receiver<(usize, RowBatch)>,
    thread: Option<JoinHandle<Finished>>,
    failed: Option<String>,
}

impl BackgroundWriter {
    /// A writer thread compressing with `codec`, `group_rows` rows per
    /// row group.
    pub(crate) fn start(codec: Codec, group_rows: usize) -> Self {
        let (tx, rx) = sync_channel(IN_FLIGHT);
        let (back, returned) = channel();
        match std::thread::Builder::new()
            .name("cratrace-parquet".into())
            .spawn(move || run(rx, back, codec, group_rows))
        {
            Ok(thread) => BackgroundWriter {
                tx: Some(tx),
                returned,
                thread: Some(thread),
                failed: None,
            },
            // Reported by the first write, as a one-line error, not a panic.
            Err(e) => BackgroundWriter {
                tx: None,
                returned,
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
        types: Vec<ColumnType>,
        instances: Vec<String>,
    ) -> Result<(), String> {
        self.send(Msg::Open(idx, path, schema, types, instances))
    }

    pub(crate) fn write(&mut self, idx: usize, batch: RowBatch) -> Result<(), String> {
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
    pub(crate) fn join(&mut self) -> Finished {
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

fn run(
    rx: Receiver<Msg>,
    back: Sender<(usize, RowBatch)>,
    codec: Codec,
    group_rows: usize,
) -> Finished {
    let mut files: Vec<Option<(EventFile, PathBuf)>> = Vec::new();
    for m in rx {
        match m {
            Msg::Open(idx, path, schema, types, instances) => {
                let f = EventFile::create(&path, schema, &types, instances, codec, group_rows)?;
                if files.len() <= idx {
                    files.resize_with(idx + 1, || None);
                }
                files[idx] = Some((f, path));
            }
            Msg::Batch(idx, mut batch) => {
                let (f, _) = files
                    .get_mut(idx)
                    .and_then(Option::as_mut)
                    .ok_or_else(|| format!("table {idx} written before it was opened"))?;
                f.write(&mut batch)?;
                batch.clear();
                // the sink may be gone already (an abandoned import)
                let _ = back.send((idx, batch));
            }
        }
    }
    let mut out = Vec::new();
    for (idx, f) in files.into_iter().enumerate() {
        if let Some((f, path)) = f {
            f.close()?;
            out.push((idx, path));
        }
    }
    Ok(out)
}
