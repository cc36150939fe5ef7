//! Dictionaries for columns of few distinct values: task names, PIDs,
//! states, domain numbers.
//!
//! Each distinct value gets an index in order of first appearance; the
//! column is then written as its dictionary (one page) and indices
//! (bit-packed, a few bits a row). Open addressing over a power-of-two
//! table, with hashes kept beside the indices so that a probe compares
//! bytes only when the hashes agree, and short byte strings are compared
//! inline (a libc `memcmp` call per value cost tens of ns on machines
//! where glibc picks its AVX-512 variants).

/// A dictionary stops growing past this many entries (the column is then
/// written plain): a quarter of a row group's rows (`GROUP_ROWS`), so a
/// column whose values are mostly distinct gives its dictionary up within
/// the first group instead of paying for a full one in every group.
pub(crate) const MAX_ENTRIES: usize = 1 << 14;
/// ... or past this many bytes of distinct values.
pub(crate) const MAX_BYTES: usize = 1 << 20;

#[inline]
fn mix(h: u64) -> u64 {
    // fold the high bits down: the table index takes the low bits
    let h = h.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^ (h >> 29)
}

#[inline]
fn hash_bytes(b: &[u8]) -> u64 {
    let mut h = b.len() as u64;
    let mut chunks = b.chunks_exact(8);
    for c in &mut chunks {
        h = (h ^ u64::from_le_bytes(c.try_into().expect("8"))).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h = h.rotate_left(23);
    }
    let rest = chunks.remainder();
    let mut last = [0u8; 8];
    last[..rest.len()].copy_from_slice(rest);
    mix(h ^ u64::from_le_bytes(last))
}

#[inline]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut ca = a.chunks_exact(8);
    let mut cb = b.chunks_exact(8);
    let word = |c: &[u8]| u64::from_ne_bytes(c.try_into().expect("8"));
    for (x, y) in (&mut ca).zip(&mut cb) {
        if word(x) != word(y) {
            return false;
        }
    }
    ca.remainder()
        .iter()
        .zip(cb.remainder())
        .all(|(x, y)| x == y)
}

/// Slots: (hash, index + 1); index 0 marks an empty slot.
#[derive(Default)]
struct Table {
    slots: Vec<(u64, u32)>,
}

impl Table {
    /// The slot where `hash` is or would go, given an equality test.
    #[inline]
    fn find(&self, hash: u64, mut same: impl FnMut(u32) -> bool) -> (usize, Option<u32>) {
        let mask = self.slots.len() - 1;
        let mut i = hash as usize & mask;
        loop {
            let (h, idx) = self.slots[i];
            if idx == 0 {
                return (i, None);
            }
            if h == hash && same(idx - 1) {
                return (i, Some(idx - 1));
            }
            i = (i + 1) & mask;
        }
    }

    /// Make room for one more entry (at most half the slots in use), or
    /// the first slots.
    fn reserve_one(&mut self, entries: usize) {
        if self.slots.is_empty() {
            self.slots = vec![(0, 0); 1024];
        } else if 2 * (entries + 1) > self.slots.len() {
            let old = std::mem::take(&mut self.slots);
            self.slots = vec![(0, 0); old.len() * 2];
            let mask = self.slots.len() - 1;
            for (h, idx) in old.into_iter().filter(|s| s.1 != 0) {
                let mut i = h as usize & mask;
                while self.slots[i].1 != 0 {
                    i = (i + 1) & mask;
                }
                self.slots[i] = (h, idx);
            }
        }
    }
}

/// Slots of [`IntDict`]'s cache of recent values.
const RECENT: usize = 256;

/// A dictionary of integers (their bits).
pub(crate) struct IntDict {
    table: Table,
    /// Distinct values in order of first appearance.
    pub(crate) values: Vec<u64>,
    /// Recently looked-up values and their indices, direct-mapped by the
    /// value's low bits (index `u32::MAX`: empty). Trace columns hold a
    /// few values that repeat (domains, CPUs, states, one thread's PID):
    /// most look-ups end here, without hashing or probing the table. A
    /// cache of the last value only missed whenever the value changed:
    /// at 57% of the rows of the generated xentrace file's grant `dom`
    /// column, 97-100% of a recorded trace's `sched_switch` PIDs.
    recent: Box<[(u64, u32); RECENT]>,
}

impl Default for IntDict {
    fn default() -> Self {
        IntDict {
            table: Table::default(),
            values: Vec::new(),
            recent: Box::new([(0, u32::MAX); RECENT]),
        }
    }
}

impl IntDict {
    /// `v`'s index, adding it if new; None once the dictionary is full.
    #[inline]
    pub(crate) fn index(&mut self, v: u64) -> Option<u32> {
        let r = (v ^ (v >> 8)) as usize % RECENT;
        let (rv, ri) = self.recent[r];
        if rv == v && ri != u32::MAX {
            return Some(ri);
        }
        self.index_slow(v, r)
    }

    #[inline(never)]
    fn index_slow(&mut self, v: u64, r: usize) -> Option<u32> {
        if self.table.slots.is_empty() {
            self.table.reserve_one(0);
        }
        let h = mix(v);
        let values = &self.values;
        let (slot, found) = self.table.find(h, |i| values[i as usize] == v);
        let i = match found {
            Some(i) => i,
            None => self.insert(h, v, slot)?,
        };
        self.recent[r] = (v, i);
        Some(i)
    }

    #[cold]
    fn insert(&mut self, h: u64, v: u64, mut slot: usize) -> Option<u32> {
        if self.values.len() >= MAX_ENTRIES {
            return None;
        }
        let before = self.table.slots.len();
        self.table.reserve_one(self.values.len());
        if self.table.slots.len() != before {
            slot = self.table.find(h, |_| false).0;
        }
        self.values.push(v);
        let i = self.values.len() as u32;
        self.table.slots[slot] = (h, i);
        Some(i - 1)
    }
}

/// A dictionary of byte strings.
pub(crate) struct BytesDict {
    table: Table,
    /// Distinct values, back to back, in order of first appearance.
    pub(crate) offsets: Vec<u32>,
    pub(crate) bytes: Vec<u8>,
    /// The index last looked up (see [`IntDict`]'s).
    last: Option<u32>,
}

impl Default for BytesDict {
    fn default() -> Self {
        BytesDict {
            table: Table::default(),
            offsets: vec![0],
            bytes: Vec::new(),
            last: None,
        }
    }
}

impl BytesDict {
    /// Entries held.
    pub(crate) fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Entry `i`.
    pub(crate) fn get(&self, i: usize) -> &[u8] {
        &self.bytes[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// `b`'s index, adding it if new; None once the dictionary is full.
    #[inline]
    pub(crate) fn index(&mut self, b: &[u8]) -> Option<u32> {
        if let Some(li) = self.last {
            if same_bytes(self.get(li as usize), b) {
                return Some(li);
            }
        }
        if self.table.slots.is_empty() {
            self.table.reserve_one(0);
        }
        let h = hash_bytes(b);
        let (offsets, bytes) = (&self.offsets, &self.bytes);
        let (slot, found) = self.table.find(h, |i| {
            let i = i as usize;
            same_bytes(&bytes[offsets[i] as usize..offsets[i + 1] as usize], b)
        });
        let i = match found {
            Some(i) => i,
            None => self.insert(h, b, slot)?,
        };
        self.last = Some(i);
        Some(i)
    }

    #[cold]
    fn insert(&mut self, h: u64, b: &[u8], mut slot: usize) -> Option<u32> {
        if self.len() >= MAX_ENTRIES || self.bytes.len() + b.len() > MAX_BYTES {
            return None;
        }
        let before = self.table.slots.len();
        self.table.reserve_one(self.len());
        if self.table.slots.len() != before {
            slot = self.table.find(h, |_| false).0;
        }
        self.bytes.extend_from_slice(b);
        self.offsets.push(self.bytes.len() as u32);
        let i = self.len() as u32;
        self.table.slots[slot] = (h, i);
        Some(i - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn indices_follow_first_appearance(words in proptest::collection::vec("[a-c]{0,12}", 0..400)) {
            let mut d = BytesDict::default();
            let mut seen: Vec<&str> = Vec::new();
            for w in &words {
                let want = match seen.iter().position(|s| s == w) {
                    Some(i) => i,
                    None => { seen.push(w); seen.len() - 1 }
                };
                prop_assert_eq!(d.index(w.as_bytes()), Some(want as u32));
            }
            for (i, s) in seen.iter().enumerate() {
                prop_assert_eq!(d.get(i), s.as_bytes());
            }
        }

        #[test]
        fn int_indices_follow_first_appearance(xs in proptest::collection::vec(0u64..3000, 0..3000)) {
            let mut d = IntDict::default();
            let mut seen: Vec<u64> = Vec::new();
            for &x in &xs {
                let want = match seen.iter().position(|&s| s == x) {
                    Some(i) => i,
                    None => { seen.push(x); seen.len() - 1 }
                };
                prop_assert_eq!(d.index(x), Some(want as u32));
            }
            prop_assert_eq!(&d.values, &seen);
        }
    }

    #[test]
    fn a_full_dictionary_refuses_new_values_but_finds_old_ones() {
        let mut d = IntDict::default();
        for v in 0..MAX_ENTRIES as u64 {
            assert_eq!(d.index(v * 7), Some(v as u32));
        }
        assert_eq!(d.index(u64::MAX), None);
        assert_eq!(d.index(7), Some(1));
    }
}
