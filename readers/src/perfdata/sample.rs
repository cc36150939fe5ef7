//! One sample's fields: which attribute it belongs to and its time (read
//! at a fixed offset while sorting) and, when it is emitted, the fields its
//! attribute's `sample_type` selects, in the kernel's fixed order.

use super::header::Attr;
use std::collections::HashMap;

/// Offsets of the sample fields we use, walking `sample_type` in order.
pub(super) struct Parsed<'a> {
    pub ip: Option<u64>,
    pub tid: Option<(u32, u32)>,
    pub time: Option<u64>,
    pub cpu: Option<u32>,
    pub period: Option<u64>,
    pub raw: Option<&'a [u8]>,
}

/// The index of the attr a sample belongs to.
fn attr_of(rec: &[u8], attrs: &[Attr], ids: &IdIndex) -> Option<usize> {
    if attrs.len() == 1 {
        return Some(0);
    }
    // with several attrs, sample_type includes IDENTIFIER: the id comes first
    let id = u64::from_le_bytes(rec.get(8..16)?.try_into().ok()?);
    ids.get(id)
}

/// Sample id → attribute index: a sorted vector (a handful of ids per
/// event per CPU; a hash lookup per sample showed in the profile).
pub(super) struct IdIndex(Vec<(u64, usize)>);

impl IdIndex {
    pub(super) fn new(map: &HashMap<u64, usize>) -> Self {
        let mut v: Vec<(u64, usize)> = map.iter().map(|(&k, &i)| (k, i)).collect();
        v.sort_unstable();
        IdIndex(v)
    }

    pub(super) fn get(&self, id: u64) -> Option<usize> {
        self.0
            .binary_search_by_key(&id, |&(k, _)| k)
            .ok()
            .map(|i| self.0[i].1)
    }
}

pub(super) fn parse<'a>(rec: &'a [u8], a: &Attr) -> Option<Parsed<'a>> {
    let st = a.sample_type;
    let mut p = 8usize;
    let u64_at = |p: &mut usize| -> Option<u64> {
        let v = u64::from_le_bytes(rec.get(*p..*p + 8)?.try_into().ok()?);
        *p += 8;
        Some(v)
    };
    let mut out = Parsed {
        ip: None,
        tid: None,
        time: None,
        cpu: None,
        period: None,
        raw: None,
    };
    if st & (1 << 16) != 0 {
        u64_at(&mut p)?;
    }
    if st & 1 != 0 {
        out.ip = Some(u64_at(&mut p)?);
    }
    if st & 2 != 0 {
        let v = u64_at(&mut p)?;
        out.tid = Some((v as u32, (v >> 32) as u32));
    }
    if st & 4 != 0 {
        out.time = Some(u64_at(&mut p)?);
    }
    if st & 8 != 0 {
        u64_at(&mut p)?;
    }
    if st & (1 << 6) != 0 {
        u64_at(&mut p)?;
    }
    if st & (1 << 9) != 0 {
        u64_at(&mut p)?;
    }
    if st & (1 << 7) != 0 {
        out.cpu = Some(u64_at(&mut p)? as u32);
    }
    if st & (1 << 8) != 0 {
        out.period = Some(u64_at(&mut p)?);
    }
    if st & (1 << 4) != 0 {
        // READ: a value (and optional fields) or a group; skip by read_format
        let rf = a.read_format;
        let extra = (rf & 1 != 0) as usize + (rf & 2 != 0) as usize;
        let id = (rf & 4 != 0) as usize;
        let lost = (rf & 16 != 0) as usize;
        if rf & 8 != 0 {
            let nr = u64_at(&mut p)? as usize;
            p += 8 * extra + nr * 8 * (1 + id + lost);
        } else {
            p += 8 * (1 + extra + id + lost);
        }
    }
    if st & (1 << 5) != 0 {
        let nr = u64_at(&mut p)? as usize;
        p = p.checked_add(nr.checked_mul(8)?)?;
    }
    if st & (1 << 10) != 0 {
        let n = u32::from_le_bytes(rec.get(p..p + 4)?.try_into().ok()?) as usize;
        out.raw = rec.get(p + 4..p + 4 + n);
    }
    Some(out)
}

/// A sample's attr index (u32::MAX if unknown) and time (0 if none): the
/// time sits at a fixed offset for its attr, so the sample is parsed
/// whole only once, when it is emitted.
pub(super) fn sample_time(rec: &[u8], attrs: &[Attr], ids: &IdIndex) -> (u32, u64) {
    let Some(a) = attr_of(rec, attrs, ids) else {
        return (u32::MAX, 0);
    };
    let t = time_offset(attrs[a].sample_type)
        .and_then(|p| rec.get(p..p + 8))
        .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8")));
    (a as u32, t)
}

/// Where TIME sits in a sample of this sample_type (after the header and
/// IDENTIFIER, IP and TID when present), if the samples have it.
pub(super) fn time_offset(st: u64) -> Option<usize> {
    (st & 4 != 0).then(|| {
        8 + 8 * ((st >> 16) & 1) as usize + 8 * (st & 1) as usize + 8 * ((st >> 1) & 1) as usize
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_time_read_at_its_offset_is_the_one_parse_finds() {
        // every combination of the fields that can come before TIME, and some after
        for bits in 0u64..64 {
            let st = 4
                | (bits & 1)
                | (bits & 2)
                | ((bits >> 2 & 1) << 16)
                | ((bits >> 3 & 1) << 7)
                | ((bits >> 4 & 1) << 8)
                | ((bits >> 5 & 1) << 3);
            let a = Attr {
                kind: 0,
                config: 0,
                sample_type: st,
                read_format: 0,
                name: String::new(),
            };
            let rec: Vec<u8> = (0u64..12).flat_map(|i| (1000 + i).to_le_bytes()).collect();
            let p = time_offset(st).unwrap();
            assert_eq!(
                Some(u64::from_le_bytes(rec[p..p + 8].try_into().unwrap())),
                parse(&rec, &a).unwrap().time,
                "sample_type {st:#x}"
            );
        }
        assert_eq!(time_offset(1 | 2), None);
    }
}
