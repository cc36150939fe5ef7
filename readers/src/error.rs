//! The one error type every reader returns.
//!
//! Each variant carries what a user needs to act on it: the file, the byte
//! offset where reading failed, and a short stable tag (`ERR:...`) that tests
//! and scripts can match on. Messages are one line.

use std::fmt;
use std::path::PathBuf;

/// Result alias used throughout the readers.
pub type ReadResult<T> = Result<T, ReadError>;

/// Why a read stopped.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReadError {
    /// The operating system refused (open, read, seek).
    Io {
        /// File being read.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
    /// The file is not in a format this reader understands at all.
    NotThisFormat {
        /// File being read.
        path: PathBuf,
        /// What was expected (e.g. "trace.dat magic").
        expected: &'static str,
    },
    /// A format feature or version this reader does not support.
    Unsupported {
        /// File being read.
        path: PathBuf,
        /// Byte offset of the construct.
        offset: u64,
        /// What is unsupported.
        what: String,
    },
    /// The file is damaged at `offset`.
    Corrupt {
        /// File being read.
        path: PathBuf,
        /// Byte offset of the damage.
        offset: u64,
        /// Stable tag, e.g. `corrupt-header`, `corrupt-page`, `past-eof`.
        tag: &'static str,
        /// Human description.
        what: String,
    },
    /// Reading would hold more memory at once than the read's budget
    /// (a file declaring huge decompressed sizes: issue 42).
    OverBudget {
        /// File being read.
        path: PathBuf,
        /// Byte offset of the construct that asked for it.
        offset: u64,
        /// What asked for the memory.
        what: String,
        /// Bytes it would take to hold, with what is already held.
        need: u64,
        /// The budget in bytes.
        budget: u64,
    },
    /// The sink failed to store a row (disk full, schema mismatch).
    Sink {
        /// Description from the sink.
        what: String,
    },
    /// The caller asked to stop (Ctrl-C).
    Interrupted,
}

impl ReadError {
    /// An I/O error on `path` (opening, reading, or its metadata).
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ReadError::Io {
            path: path.into(),
            source,
        }
    }

    /// A corruption error at `offset` with stable tag `tag`.
    pub fn corrupt(
        path: impl Into<PathBuf>,
        offset: u64,
        tag: &'static str,
        what: impl Into<String>,
    ) -> Self {
        ReadError::Corrupt {
            path: path.into(),
            offset,
            tag,
            what: what.into(),
        }
    }

    /// The stable tag for scripts and tests (`ERR:<tag>`).
    pub fn tag(&self) -> &'static str {
        match self {
            ReadError::Io { .. } => "io",
            ReadError::NotThisFormat { .. } => "not-this-format",
            ReadError::Unsupported { .. } => "unsupported",
            ReadError::Corrupt { tag, .. } => tag,
            ReadError::OverBudget { .. } => "over-budget",
            ReadError::Sink { .. } => "sink",
            ReadError::Interrupted => "interrupted",
        }
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io { path, source } => write!(f, "{}: {} (ERR:io)", path.display(), source),
            ReadError::NotThisFormat { path, expected } => {
                write!(
                    f,
                    "{}: not a {} file (ERR:not-this-format)",
                    path.display(),
                    expected
                )
            }
            ReadError::Unsupported { path, offset, what } => {
                write!(
                    f,
                    "{}: at byte {}: unsupported: {} (ERR:unsupported)",
                    path.display(),
                    offset,
                    what
                )
            }
            ReadError::Corrupt {
                path,
                offset,
                tag,
                what,
            } => {
                write!(
                    f,
                    "{}: at byte {}: {} (ERR:{})",
                    path.display(),
                    offset,
                    what,
                    tag
                )
            }
            ReadError::OverBudget {
                path,
                offset,
                what,
                need,
                budget,
            } => write!(
                f,
                "{}: at byte {}: {} would hold {} in memory at once, over the budget of {} (raise it with --max-memory if the file is genuine) (ERR:over-budget)",
                path.display(),
                offset,
                what,
                Size(*need, Round::Up),
                Size(*budget, Round::Down)
            ),
            ReadError::Sink { what } => write!(f, "writing output: {} (ERR:sink)", what),
            ReadError::Interrupted => write!(f, "interrupted (ERR:interrupted)"),
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReadError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Which way a [`Size`] rounds to its unit.
#[derive(Clone, Copy)]
enum Round {
    Up,
    Down,
}

/// A byte count in the largest unit (bytes, KiB, MiB, GiB) it fills, as
/// a whole number rounded the given way: a need rounds up and a budget
/// down, so a 4 KiB budget never reads as "0 MiB".
struct Size(u64, Round);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Size(n, round) = *self;
        let (unit, name) = match n {
            n if n >= 1 << 30 => (1u64 << 30, "GiB"),
            n if n >= 1 << 20 => (1 << 20, "MiB"),
            n if n >= 1 << 10 => (1 << 10, "KiB"),
            _ => return write!(f, "{n} bytes"),
        };
        let whole = match round {
            Round::Up => n.div_ceil(unit),
            Round::Down => n / unit,
        };
        write!(f, "{whole} {name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_in_the_unit_they_fill_need_up_budget_down() {
        let e = ReadError::OverBudget {
            path: "t.dat".into(),
            offset: 7,
            what: "a zstd chunk".into(),
            need: (1 << 20) + 1,
            budget: 4096,
        };
        let text = e.to_string();
        assert!(
            text.contains("would hold 2 MiB in memory at once, over the budget of 4 KiB"),
            "{text}"
        );
        assert_eq!(Size(1023, Round::Down).to_string(), "1023 bytes");
        assert_eq!(Size((3 << 30) - 1, Round::Down).to_string(), "2 GiB");
        assert_eq!(Size((3 << 30) - 1, Round::Up).to_string(), "3 GiB");
    }
}
