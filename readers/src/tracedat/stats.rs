//! The named counters a trace.dat read keeps in its summary's `stats`.
//!
//! Each key is declared here once, as a constant the reader counts with
//! and as an entry of [`ALL`], which the binding exports as
//! `cratrace._native.tracedat_stats` for the Python importer to read the
//! same names from: a key renamed here is renamed there too, and one the
//! importer still asks for by an old name fails its test instead of
//! reading as zero (issue 46).

/// One named counter: its key in `stats`, the Rust constant that holds
/// it, and what it counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatKey {
    /// The Rust constant's name (the Python attribute's too).
    pub ident: &'static str,
    /// The key in the summary's `stats` map.
    pub name: &'static str,
    /// What it counts.
    pub about: &'static str,
}

/// Declares each key as a constant and lists them all in [`ALL`], so the
/// list cannot miss one.
macro_rules! stat_keys {
    ($($(#[doc = $doc:literal])+ $ident:ident = $name:literal;)+) => {
        $($(#[doc = $doc])+ pub const $ident: &str = $name;)+
        /// Every counter a trace.dat read may write, in declaration order.
        pub const ALL: &[StatKey] = &[$(StatKey {
            ident: stringify!($ident),
            name: $name,
            about: concat!($($doc),+),
        }),+];
    };
}

stat_keys! {
    /// Ring-buffer pages read.
    PAGES = "pages";
    /// Pages whose header did not decode (and are not all zero, as empty
    /// space is); each was skipped.
    CORRUPT_PAGES = "corrupt_pages";
    /// Records that did not decode; the rest of each one's page was skipped.
    CORRUPT_RECORDS = "corrupt_records";
    /// Event formats that did not parse; their events are skipped.
    UNPARSEABLE_FORMATS = "unparseable_formats";
    /// Records earlier than one already written (a stream stepped back in
    /// time); the importer re-sorts the tables of such a read.
    TS_OUT_OF_ORDER = "ts_out_of_order";
    /// bprint records whose format address the file's printk formats lack;
    /// their `text` is left empty.
    BPRINT_UNKNOWN_FORMAT = "bprint_unknown_format";
    /// Records of an event id no format describes; skipped, and counted as
    /// lost events.
    UNKNOWN_EVENT_ID = "unknown_event_id";
    /// Bytes of ring-buffer data a truncated file lacks.
    TRUNCATED_BYTES = "truncated_bytes";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_idents_are_unique_and_match() {
        let mut names: Vec<_> = ALL.iter().map(|k| k.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len());
        for k in ALL {
            // the constant's name is the key's, upper-cased: one name to grep
            assert_eq!(k.ident, k.name.to_ascii_uppercase());
            assert!(!k.about.trim().is_empty(), "{} has no description", k.name);
        }
    }
}
