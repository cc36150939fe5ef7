//! Parquet encoding and compression on a thread of their own.
//!
//! Decoding a trace and encoding Parquet each take about half of an
//! import's CPU time, and neither needs the other's state: the reader's
//! thread builds Arrow batches, this thread encodes, compresses and writes
//! them. The sink bounds the bytes of batches in flight between the two
//! (each comes back emptied, for reuse), so memory stays bounded however
//! far the reader runs ahead; the channel's own bound, [`IN_FLIGHT`]
//! batches, is a backstop. At the end the thread hands its files back
//! ([`BackgroundWriter::release`]) and both threads finish the tables
//! from one [`TailPool`].

use crate::event_file::EventFile;
use crate::Codec;
use arrow_schema::SchemaRef;
use cratrace_format::{ColumnType, RowBatch};
use std::path::PathBuf;
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Batches queued between the reader's thread and the writer's, at most
/// (the sink waits on bytes first; see its `BYTES_IN_FLIGHT`).
const IN_FLIGHT: usize = 1024;

enum Msg {
    /// Table `idx` starts: create its file.
    Open(usize, NewFile),
    /// Rows for table `idx` (opened before).
    Batch(usize, RowBatch),
    /// Hand these tables' files back, with every batch sent before
    /// written: the sink closes them on its own thread.
    Release(Vec<usize>),
    /// Finish tables from this pool, shared with the sink's thread, until
    /// it is empty.
    Help(Arc<TailPool>),
}

/// What is left of a table at the end: its last rows, to write to its
/// file (created here if the writer never opened it), then the footer.
pub(crate) struct TailWork {
    pub(crate) idx: usize,
    pub(crate) file: TailFile,
    pub(crate) rows: RowBatch,
    /// Bytes of work (an estimate), to take the largest first.
    pub(crate) size: usize,
}

/// A table's file to create: at its first batch (by the writer) or at the
/// end (a table never sent).
pub(crate) struct NewFile {
    pub(crate) path: PathBuf,
    /// The table's schema, its event columns typed as `types`.
    pub(crate) schema: SchemaRef,
    pub(crate) types: Vec<ColumnType>,
    pub(crate) instances: Vec<String>,
}

impl NewFile {
    fn create(self, codec: Codec, group_rows: usize) -> Result<(EventFile, PathBuf), String> {
        let f = EventFile::create(
            &self.path,
            self.schema,
            &self.types,
            self.instances,
            codec,
            group_rows,
        )?;
        Ok((f, self.path))
    }
}

/// A table's file at the end: open, or to create.
pub(crate) enum TailFile {
    Open(Box<EventFile>, PathBuf),
    New(NewFile),
}

/// The tables left at the end, shared by the threads that finish them.
pub(crate) struct TailPool {
    work: Mutex<Vec<TailWork>>,
    codec: Codec,
    group_rows: usize,
}

impl TailPool {
    pub(crate) fn new(mut work: Vec<TailWork>, codec: Codec, group_rows: usize) -> Self {
        // popped from the end: the largest first, small ones fill in last
        work.sort_by_key(|w| (w.size, std::cmp::Reverse(w.idx)));
        TailPool {
            work: Mutex::new(work),
            codec,
            group_rows,
        }
    }

    /// Finish tables until none is left; (table index, path) of each.
    pub(crate) fn drain(&self) -> Result<Vec<(usize, PathBuf)>, String> {
        let mut done = Vec::new();
        loop {
            // a poisoned lock: the other thread panicked; its join says so
            let next = match self.work.lock() {
                Ok(mut w) => w.pop(),
                Err(_) => return Err("the other thread finishing tables failed".into()),
            };
            let Some(mut w) = next else {
                return Ok(done);
            };
            let (mut f, path) = match w.file {
                TailFile::Open(f, path) => (*f, path),
                TailFile::New(new) => new.create(self.codec, self.group_rows)?,
            };
            if !w.rows.is_empty() {
                f.write(&mut w.rows)?;
            }
            f.close()?;
            done.push((w.idx, path));
        }
    }
}

/// A table's file handed back by [`BackgroundWriter::release`].
pub(crate) type Released = Vec<(usize, EventFile, PathBuf)>;

/// What the writer thread ends with: each table's index and file, or why
/// it stopped.
type Finished = Result<Vec<(usize, PathBuf)>, String>;

/// The sending half; the thread owns the files. With one CPU to run on
/// there is no thread: the files are written on the caller's (see
/// [`BackgroundWriter::start`]).
pub(crate) struct BackgroundWriter {
    tx: Option<SyncSender<Msg>>,
    /// The writer's state when it runs on the caller's thread.
    inline: Option<Worker>,
    /// Batches written, emptied, for the sink to copy its next full batch
    /// into: their pages stay mapped, where fresh ones cost page faults.
    pub(crate) returned: Receiver<(usize, RowBatch)>,
    released: Receiver<Released>,
    thread: Option<JoinHandle<Finished>>,
    failed: Option<String>,
}

impl BackgroundWriter {
    /// A writer thread compressing with `codec`, `group_rows` rows per
    /// row group.
    ///
    /// When this process may run on one CPU only (`taskset -c 0`, a
    /// container's one-CPU quota) the writer runs on the caller's thread
    /// instead: a second thread there only takes turns with the reader on
    /// that CPU, and costs a copy of each batch (which keeps the reader's
    /// batch in its own core's cache), a hand-off and a wake-up per batch,
    /// and the two threads' working sets evicting each other.
    pub(crate) fn start(codec: Codec, group_rows: usize) -> Self {
        let one_cpu = std::thread::available_parallelism().is_ok_and(|n| n.get() == 1);
        Self::start_with(codec, group_rows, !one_cpu)
    }

    /// [`start`](Self::start), on a thread of its own or not.
    pub(crate) fn start_with(codec: Codec, group_rows: usize, threaded: bool) -> Self {
        let (tx, rx) = sync_channel(IN_FLIGHT);
        let (back, returned) = channel();
        let (give, released) = channel();
        if !threaded {
            return BackgroundWriter {
                tx: None,
                inline: Some(Worker::new(back, give, codec, group_rows)),
                returned,
                released,
                thread: None,
                failed: None,
            };
        }
        match std::thread::Builder::new()
            .name("cratrace-parquet".into())
            .spawn(move || run(rx, back, give, codec, group_rows))
        {
            Ok(thread) => BackgroundWriter {
                tx: Some(tx),
                inline: None,
                returned,
                released,
                thread: Some(thread),
                failed: None,
            },
            // Reported by the first write, as a one-line error, not a panic.
            Err(e) => BackgroundWriter {
                tx: None,
                inline: None,
                returned,
                released,
                thread: None,
                failed: Some(format!("cannot start the Parquet writer thread: {e}")),
            },
        }
    }

    pub(crate) fn open(&mut self, idx: usize, file: NewFile) -> Result<(), String> {
        self.send(Msg::Open(idx, file))
    }

    pub(crate) fn write(&mut self, idx: usize, batch: RowBatch) -> Result<(), String> {
        self.send(Msg::Batch(idx, batch))
    }

    /// Have the thread finish tables from `pool` too.
    pub(crate) fn help(&mut self, pool: Arc<TailPool>) -> Result<(), String> {
        self.send(Msg::Help(pool))
    }

    /// The files of tables `idxs` (those opened), once every batch sent
    /// before is written to them.
    pub(crate) fn release(&mut self, idxs: Vec<usize>) -> Result<Released, String> {
        self.send(Msg::Release(idxs))?;
        match self.released.recv() {
            Ok(files) => Ok(files),
            // The thread stopped on an error meanwhile: that error.
            Err(_) => Err(self
                .join()
                .err()
                .unwrap_or_else(|| "the Parquet writer stopped".into())),
        }
    }

    /// Write `batch` to table `idx`'s file now, when the writer runs on
    /// this thread (the batch is left to the caller, emptied); else hand
    /// it back untouched, to be sent.
    pub(crate) fn write_here(
        &mut self,
        idx: usize,
        batch: &mut RowBatch,
    ) -> Option<Result<(), String>> {
        let w = self.inline.as_mut()?;
        Some(w.write(idx, batch).map(|()| batch.clear()))
    }

    fn send(&mut self, m: Msg) -> Result<(), String> {
        if let Some(w) = self.inline.as_mut() {
            return w.handle(m);
        }
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
        if let Some(w) = self.inline.take() {
            return w.close();
        }
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

/// Bytes the writer thread's heap is grown by before its first batch.
const HEAP_WARMUP: usize = 16 << 20;

/// Grow this thread's heap once, in large steps, and give it back. glibc
/// gives a new thread a heap of its own that grows by exactly what each
/// allocation needs, one `mprotect` call at a time: the encoders' many
/// growing buffers made about 880 of them on the 4 MB Xen fixture. The
/// heap keeps what it has been grown to (freed memory goes back with
/// `madvise`, not unmapped), so the buffers then grow inside it. Only
/// malloc's header of each block is written (a page each, given back
/// when freed). Other allocators do a few allocations for nothing.
fn warm_heap() {
    // below glibc's mmap threshold (128 KiB), so they come from the heap
    const BLOCK: usize = 120 << 10;
    let blocks: Vec<Vec<u8>> = (0..HEAP_WARMUP / BLOCK)
        .map(|_| Vec::with_capacity(BLOCK))
        .collect();
    drop(std::hint::black_box(blocks));
}

fn run(
    rx: Receiver<Msg>,
    back: Sender<(usize, RowBatch)>,
    give: Sender<Released>,
    codec: Codec,
    group_rows: usize,
) -> Finished {
    warm_heap();
    let mut w = Worker::new(back, give, codec, group_rows);
    for m in rx {
        w.handle(m)?;
    }
    w.close()
}

/// The writer thread's state: the files it owns and where it sends what
/// it is done with.
struct Worker {
    files: Vec<Option<(EventFile, PathBuf)>>,
    /// Tables finished from a [`TailPool`]: (index, path).
    finished: Vec<(usize, PathBuf)>,
    back: Sender<(usize, RowBatch)>,
    give: Sender<Released>,
    codec: Codec,
    group_rows: usize,
}

impl Worker {
    fn new(
        back: Sender<(usize, RowBatch)>,
        give: Sender<Released>,
        codec: Codec,
        group_rows: usize,
    ) -> Self {
        Worker {
            files: Vec::new(),
            finished: Vec::new(),
            back,
            give,
            codec,
            group_rows,
        }
    }

    /// Rows for table `idx` (opened before) into its file.
    fn write(&mut self, idx: usize, batch: &mut RowBatch) -> Result<(), String> {
        let (f, _) = self
            .files
            .get_mut(idx)
            .and_then(Option::as_mut)
            .ok_or_else(|| format!("table {idx} written before it was opened"))?;
        f.write(batch)
    }

    /// Close every file still open; (table index, path) of each written.
    fn close(self) -> Finished {
        let mut out = self.finished;
        for (idx, f) in self.files.into_iter().enumerate() {
            if let Some((f, path)) = f {
                f.close()?;
                out.push((idx, path));
            }
        }
        Ok(out)
    }

    fn handle(&mut self, m: Msg) -> Result<(), String> {
        match m {
            Msg::Open(idx, file) => {
                let opened = file.create(self.codec, self.group_rows)?;
                if self.files.len() <= idx {
                    self.files.resize_with(idx + 1, || None);
                }
                self.files[idx] = Some(opened);
            }
            Msg::Batch(idx, mut batch) => {
                self.write(idx, &mut batch)?;
                batch.clear();
                // the sink may be gone already (an abandoned import)
                let _ = self.back.send((idx, batch));
            }
            Msg::Release(idxs) => {
                let handed = idxs
                    .into_iter()
                    .filter_map(|i| {
                        let (f, path) = self.files.get_mut(i)?.take()?;
                        Some((i, f, path))
                    })
                    .collect();
                let _ = self.give.send(handed);
            }
            Msg::Help(pool) => self.finished.extend(pool.drain()?),
        }
        Ok(())
    }
}
