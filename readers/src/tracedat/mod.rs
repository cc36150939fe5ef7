//! trace.dat (trace-cmd) reader: file versions 6 and 7.
//!
//! * [`header`] reads the file header, metadata sections (header_page,
//!   event formats, printk formats, saved cmdlines) and options, for both
//!   the sequential v6 layout and v7's sections (optionally compressed);
//! * [`pages`] yields each CPU's ring-buffer pages, from the file or from
//!   compressed chunks, salvaging what a truncated file still holds;
//! * [`records`] decodes one ring-buffer page into timestamped records
//!   (the tokenizer: framing only);
//! * [`writer`] is the other direction: payloads and pages as the kernel
//!   lays them out, for the scenario generator;
//! * [`reader`] merges all CPUs of all buffer instances by timestamp (the
//!   sorter) and decodes payloads into rows for an [`EventSink`](crate::EventSink)
//!   (the parser);
//! * [`stats`] names the counters a read keeps, once for Rust and Python;
//! * [`tracedat_floor`] times the import's floor (issue 47): the same
//!   file read, decompressed and decoded with the reader's own code, but
//!   without the merge, the rows or Parquet.

pub mod header;
pub mod pages;
pub mod reader;
pub mod records;
pub mod stats;
pub mod writer;

pub use header::{read_kallsyms, read_metadata, BufferInfo, CpuData, TraceDatMeta};
pub use reader::floor::{tracedat_floor, DiscardSink, Floor, Stage as FloorStage};
pub use reader::{read_tracedat, ReadOptions, TraceDatSummary};
