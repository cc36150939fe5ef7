//! ftrace event formats: parsing the `format` files that trace.dat (and
//! perf.data's tracing-data section) embed, typing their fields, decoding
//! payloads into [`Value`](crate::Value)s, and rendering `trace_printk`
//! (bprint) records with their stored format strings.

pub mod field;
pub mod format;
pub mod marker;
pub mod printk;

pub use field::{FieldDecoder, FieldKind};
pub use format::{parse_format, EventFormat, FieldFormat, HeaderPage};
