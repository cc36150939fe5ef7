//! Scheduler-class records (`TRC_SCHED_CLASS`): the credit, credit2, RTDS
//! and null schedulers' own events, one typed table each.
//!
//! An event id is `0x22000 | scheduler << 9 | event` (public/trace.h's
//! `TRC_SCHED_CLASS_EVT`). Layouts are the structs each scheduler traces
//! (xen/common/sched/{credit,credit2,rt,null}.c, Xen 4.14 to 4.19; the
//! `vcpu` → `unit` rename of 4.13 and the bitfield → integer rewrite of
//! 4.19 moved no field). Bitfields are packed from the low bits (GCC,
//! little-endian), so `unsigned unit:16, dom:16` is `unit | dom << 16`;
//! 64-bit fields are two words, low first. A unit is the vCPU under the
//! default scheduling granularity, hence the column name `vcpu`, as in
//! the other tables. Table names follow the source's macro names
//! (`TRC_CSCHED2_CREDIT_BURN` → `xen_credit2_credit_burn`). A record
//! shorter than its layout, or an event not listed here, stays in
//! `xen_sched_class` with its raw words.

use crate::sink::ColumnType;

/// Where a column's value sits in the payload words.
#[derive(Clone, Copy, Debug)]
pub(super) enum At {
    /// A whole word.
    Word(usize),
    /// Bits `shift .. shift + width` of a word.
    Bits(usize, u32, u32),
    /// A word as a signed 32-bit value (sign-extended).
    Signed(usize),
    /// Bits 0-15 or 16-31 of a word as a signed 16-bit value.
    Signed16(usize, u32),
    /// Two words, low first.
    Wide(usize),
}

/// A column's type (the [`ColumnType`]s these tables use; copyable, so
/// that layouts can be built in constants).
#[derive(Clone, Copy, Debug)]
pub(super) enum Ty {
    Bool,
    U8,
    U16,
    U32,
    I32,
    I64,
    U64,
}

impl Ty {
    pub(super) fn column_type(self) -> ColumnType {
        match self {
            Ty::Bool => ColumnType::Bool,
            Ty::U8 => ColumnType::U8,
            Ty::U16 => ColumnType::U16,
            Ty::U32 => ColumnType::U32,
            Ty::I32 => ColumnType::I32,
            Ty::I64 => ColumnType::I64,
            Ty::U64 => ColumnType::U64,
        }
    }
}

/// One column of a scheduler-class table.
#[derive(Clone, Copy, Debug)]
pub(super) struct Field {
    pub(super) name: &'static str,
    pub(super) ty: Ty,
    pub(super) at: At,
    /// A value the scheduler writes for "none" (no cap, no CPU tickled,
    /// no unit): stored as null.
    pub(super) none: Option<u64>,
}

impl Field {
    /// The value's bits (sign-extended for signed fields), or None for the
    /// "none" sentinel. `w` holds at least [`SchedEvent::words`] words.
    #[inline]
    pub(super) fn value(&self, w: &[u32]) -> Option<u64> {
        let (raw, v) = match self.at {
            At::Word(i) => (w[i] as u64, w[i] as u64),
            At::Bits(i, shift, width) => {
                let x = (w[i] >> shift) as u64 & ((1u64 << width) - 1);
                (x, x)
            }
            At::Signed(i) => (w[i] as u64, w[i] as i32 as i64 as u64),
            At::Signed16(i, shift) => {
                let x = (w[i] >> shift) as u16;
                (x as u64, x as i16 as i64 as u64)
            }
            At::Wide(i) => {
                let x = w[i] as u64 | (w[i + 1] as u64) << 32;
                (x, x)
            }
        };
        if self.none == Some(raw) {
            None
        } else {
            Some(v)
        }
    }

    /// The last payload word this field reads.
    const fn last_word(&self) -> usize {
        match self.at {
            At::Word(i) | At::Bits(i, ..) | At::Signed(i) | At::Signed16(i, _) => i,
            At::Wide(i) => i + 1,
        }
    }
}

/// One scheduler event and its table.
#[derive(Debug)]
pub(super) struct SchedEvent {
    /// Scheduler id (bits 9-11 of the event id).
    pub(super) scheduler: u32,
    /// Event number (bits 0-8).
    pub(super) event: u32,
    pub(super) table: &'static str,
    pub(super) fields: &'static [Field],
    /// Payload words the layout needs (trailing padding not counted).
    pub(super) words: usize,
}

use Ty::{Bool, I32, I64, U16, U32, U64, U8};

const fn f(name: &'static str, ty: Ty, at: At) -> Field {
    Field {
        name,
        ty,
        at,
        none: None,
    }
}

const fn or_none(name: &'static str, ty: Ty, at: At, none: u64) -> Field {
    Field {
        name,
        ty,
        at,
        none: Some(none),
    }
}

/// `unsigned unit:16, dom:16` in word `i`.
macro_rules! unit_dom {
    ($i:expr) => {
        [
            f("dom", I64, At::Bits($i, 16, 16)),
            f("vcpu", I64, At::Bits($i, 0, 16)),
        ]
    };
}

const fn words_of(fields: &[Field]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < fields.len() {
        let last = fields[i].last_word() + 1;
        if last > n {
            n = last;
        }
        i += 1;
    }
    n
}

macro_rules! events {
    ($( $sched:expr, $ev:literal, $table:literal, [$($field:expr),* $(,)?] $(+ $more:expr)? ; )+) => {
        pub(super) const SCHED_EVENTS: &[SchedEvent] = &[$(
            {
                const FIELDS: &[Field] = &concat_fields!([$($field),*] $(, $more)?);
                SchedEvent {
                    scheduler: $sched,
                    event: $ev,
                    table: $table,
                    fields: FIELDS,
                    words: words_of(FIELDS),
                }
            },
        )+];
    };
}

/// The fields of a layout: a list of fields, then optionally more from a
/// helper (the `dom`, `vcpu` pair) in front.
macro_rules! concat_fields {
    ([$($field:expr),*]) => { [$($field),*] };
    ([$($field:expr),*], $more:expr) => {{
        let m = $more;
        [m[0], m[1], $($field),*]
    }};
}

const CREDIT: u32 = 0;
const CREDIT2: u32 = 1;
const RTDS: u32 = 4;
const NULL: u32 = 5;

const NO_CPU32: u64 = u32::MAX as u64;
const NO_CAP: u64 = i32::MIN as u32 as u64;

events! {
    // credit (sched_credit.c)
    CREDIT, 1, "xen_credit_sched_tasklet", [];
    CREDIT, 2, "xen_credit_account_start", [f("dom", I64, At::Word(0)), f("vcpu", I64, At::Word(1)), f("active_vcpus", U32, At::Word(2))];
    CREDIT, 3, "xen_credit_account_stop", [f("dom", I64, At::Word(0)), f("vcpu", I64, At::Word(1)), f("active_vcpus", U32, At::Word(2))];
    CREDIT, 4, "xen_credit_stolen_vcpu", [f("dom", I64, At::Word(1)), f("vcpu", I64, At::Word(2)), f("from_cpu", U32, At::Word(0))];
    CREDIT, 5, "xen_credit_picked_cpu", [f("dom", I64, At::Word(0)), f("vcpu", I64, At::Word(1)), f("new_cpu", U32, At::Word(2))];
    CREDIT, 6, "xen_credit_tickle", [f("tickled_cpu", U32, At::Word(0))];
    CREDIT, 7, "xen_credit_boost_start", [f("dom", I64, At::Word(0)), f("vcpu", I64, At::Word(1))];
    CREDIT, 8, "xen_credit_boost_end", [f("dom", I64, At::Word(0)), f("vcpu", I64, At::Word(1))];
    CREDIT, 9, "xen_credit_schedule", [f("sched_cpu", U16, At::Bits(0, 0, 16)), f("tasklet", Bool, At::Bits(0, 16, 8)), f("idle", Bool, At::Bits(0, 24, 8))];
    CREDIT, 10, "xen_credit_ratelimit", [f("runtime_ns", U32, At::Word(1))] + unit_dom!(0);
    CREDIT, 11, "xen_credit_steal_check", [f("peer_cpu", U32, At::Word(0)), f("checked", Bool, At::Word(1))];
    // credit2 (sched_credit2.c); events 1 (tick) and 4 (credit add) are
    // defined but never traced
    CREDIT2, 2, "xen_credit2_runq_pos", [f("pos", U32, At::Word(1))] + unit_dom!(0);
    CREDIT2, 3, "xen_credit2_credit_burn", [f("credit", I32, At::Signed(1)), or_none("budget", I32, At::Signed(2), NO_CAP), f("delta", I32, At::Signed(3))] + unit_dom!(0);
    CREDIT2, 5, "xen_credit2_tickle_check", [f("credit", I32, At::Signed(1)), f("score", I32, At::Signed(2))] + unit_dom!(0);
    CREDIT2, 6, "xen_credit2_tickle", [f("tickled_cpu", U16, At::Bits(0, 0, 16))];
    CREDIT2, 7, "xen_credit2_credit_reset", [f("credit_start", I32, At::Signed(1)), f("credit_end", I32, At::Signed(2))] + unit_dom!(0);
    CREDIT2, 8, "xen_credit2_sched_tasklet", [];
    CREDIT2, 9, "xen_credit2_update_load", [];
    CREDIT2, 10, "xen_credit2_runq_assign", [f("rq", U16, At::Bits(1, 0, 16))] + unit_dom!(0);
    CREDIT2, 11, "xen_credit2_update_vcpu_load", [f("avgload", U64, At::Wide(0)), f("shift", U32, At::Word(3))] + unit_dom!(2);
    CREDIT2, 12, "xen_credit2_update_runq_load", [f("rq", U8, At::Bits(4, 16, 8)), f("load", U16, At::Bits(4, 0, 16)), f("avgload", U64, At::Wide(0)), f("b_avgload", U64, At::Wide(2)), f("shift", U8, At::Bits(4, 24, 8))];
    CREDIT2, 13, "xen_credit2_tickle_new", [f("processor", U32, At::Word(1)), f("credit", I32, At::Signed(2))] + unit_dom!(0);
    CREDIT2, 14, "xen_credit2_runq_max_weight", [f("rq", U16, At::Bits(0, 0, 16)), f("max_weight", U16, At::Bits(0, 16, 16))];
    CREDIT2, 15, "xen_credit2_migrate", [f("rq", U16, At::Bits(1, 0, 16)), f("to_rq", U16, At::Bits(1, 16, 16))] + unit_dom!(0);
    CREDIT2, 16, "xen_credit2_load_check", [f("local_rq", U16, At::Bits(0, 0, 16)), f("other_rq", U16, At::Bits(0, 16, 16)), f("load_delta", U32, At::Word(1))];
    CREDIT2, 17, "xen_credit2_load_balance", [f("local_rq", U16, At::Bits(4, 0, 16)), f("local_avgload", U64, At::Wide(0)), f("other_rq", U16, At::Bits(4, 16, 16)), f("other_avgload", U64, At::Wide(2))];
    CREDIT2, 19, "xen_credit2_picked_cpu", [or_none("rq", U16, At::Bits(3, 0, 16), 0xffff), f("new_cpu", U16, At::Bits(3, 16, 16)), f("b_avgload", U64, At::Wide(0))] + unit_dom!(2);
    CREDIT2, 20, "xen_credit2_runq_candidate", [f("credit", I32, At::Signed(2)), or_none("tickled_cpu", U32, At::Word(1), NO_CPU32)] + unit_dom!(0);
    CREDIT2, 21, "xen_credit2_schedule", [f("sched_cpu", U16, At::Bits(0, 0, 16)), f("rq", U16, At::Bits(0, 16, 16)), f("tasklet", Bool, At::Bits(1, 0, 8)), f("idle", Bool, At::Bits(1, 8, 8)), f("smt_idle", Bool, At::Bits(1, 16, 8)), f("tickled", Bool, At::Bits(1, 24, 8))];
    CREDIT2, 22, "xen_credit2_ratelimit", [f("runtime_ns", U32, At::Word(1))] + unit_dom!(0);
    CREDIT2, 23, "xen_credit2_runq_cand_check", [] + unit_dom!(0);
    // RTDS (sched_rt.c): deadlines and budgets are ns (s_time_t)
    RTDS, 1, "xen_rtds_tickle", [f("tickled_cpu", U16, At::Bits(0, 0, 16))];
    RTDS, 2, "xen_rtds_runq_pick", [f("deadline_ns", U64, At::Wide(1)), f("budget_ns", U64, At::Wide(3))] + unit_dom!(0);
    RTDS, 3, "xen_rtds_budget_burn", [f("budget_ns", U64, At::Wide(1)), f("delta_ns", I32, At::Signed(3)), f("priority_level", U32, At::Word(4)), f("has_extratime", Bool, At::Bits(5, 0, 8))] + unit_dom!(0);
    RTDS, 4, "xen_rtds_budget_replenish", [f("priority_level", U32, At::Word(1)), f("deadline_ns", U64, At::Wide(2)), f("budget_ns", U64, At::Wide(4))] + unit_dom!(0);
    RTDS, 5, "xen_rtds_sched_tasklet", [];
    RTDS, 6, "xen_rtds_schedule", [f("sched_cpu", U16, At::Bits(0, 0, 16)), f("tasklet", Bool, At::Bits(0, 16, 8)), f("tickled", Bool, At::Bits(0, 24, 4)), f("idle", Bool, At::Bits(0, 28, 4))];
    // null (sched_null.c)
    NULL, 1, "xen_null_picked_cpu", [f("new_cpu", U32, At::Word(1))] + unit_dom!(0);
    NULL, 2, "xen_null_vcpu_assign", [f("assigned_cpu", U32, At::Word(1))] + unit_dom!(0);
    NULL, 3, "xen_null_vcpu_deassign", [f("assigned_cpu", U32, At::Word(1))] + unit_dom!(0);
    NULL, 4, "xen_null_migrate", [f("from_cpu", U16, At::Bits(1, 0, 16)), f("new_cpu", U16, At::Bits(1, 16, 16))] + unit_dom!(0);
    NULL, 5, "xen_null_schedule", [f("sched_cpu", U16, At::Bits(0, 16, 16)), f("tasklet", Bool, At::Bits(0, 0, 16)), or_none("dom", I64, At::Signed16(1, 16), 0xffff), or_none("vcpu", I64, At::Signed16(1, 0), 0xffff)];
    NULL, 6, "xen_null_sched_tasklet", [];
}

/// Event numbers below this have a slot in [`lookup`]'s table.
const EVENTS_PER_SCHEDULER: usize = 32;

/// `SCHED_EVENTS` index + 1 by (scheduler, event); 0 when not listed.
static INDEX: [[u8; EVENTS_PER_SCHEDULER]; 8] = {
    let mut t = [[0u8; EVENTS_PER_SCHEDULER]; 8];
    let mut i = 0;
    while i < SCHED_EVENTS.len() {
        let e = &SCHED_EVENTS[i];
        t[e.scheduler as usize][e.event as usize] = i as u8 + 1;
        i += 1;
    }
    t
};

/// The listed layout of scheduler-class event id `ev`, as its index in
/// [`SCHED_EVENTS`].
#[inline]
pub(super) fn lookup(ev: u32) -> Option<usize> {
    let scheduler = ((ev >> 9) & 7) as usize;
    let event = (ev & 0x1ff) as usize;
    let k = *INDEX[scheduler].get(event)?;
    (k > 0).then(|| k as usize - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_layout_is_found_by_its_own_id_and_names_are_unique() {
        let mut names = std::collections::BTreeSet::new();
        for (i, e) in SCHED_EVENTS.iter().enumerate() {
            let ev = 0x22000 | e.scheduler << 9 | e.event;
            assert_eq!(lookup(ev), Some(i), "{}", e.table);
            assert!(names.insert(e.table), "{} twice", e.table);
            assert!(e.words <= 7, "{}", e.table);
        }
        assert_eq!(
            lookup(0x22000 | 1 << 9 | 4),
            None,
            "credit2 credit add is not traced"
        );
        assert_eq!(lookup(0x22000 | 1 << 9 | 0x1ff), None);
    }

    #[test]
    fn fields_read_bits_signs_wide_words_and_sentinels() {
        let burn = &SCHED_EVENTS[lookup(0x22203).unwrap()];
        let w = [(14 << 16) | 2, (-5i32) as u32, i32::MIN as u32, 300];
        let got: Vec<Option<u64>> = burn.fields.iter().map(|f| f.value(&w)).collect();
        assert_eq!(
            got,
            [Some(14), Some(2), Some(-5i64 as u64), None, Some(300)]
        );
        assert_eq!(burn.words, 4);
        let rq = &SCHED_EVENTS[lookup(0x2220C).unwrap()];
        let w = [1, 2, 3, 4, 7 | (2 << 16) | (18 << 24), 0xdead];
        let got: Vec<Option<u64>> = rq.fields.iter().map(|f| f.value(&w)).collect();
        assert_eq!(
            got,
            [
                Some(2),
                Some(7),
                Some(1 | 2 << 32),
                Some(3 | 4 << 32),
                Some(18)
            ]
        );
        assert_eq!(rq.words, 5, "the padding word is not required");
        let null = &SCHED_EVENTS[lookup(0x22A05).unwrap()];
        let got: Vec<Option<u64>> = null
            .fields
            .iter()
            .map(|f| f.value(&[3 << 16 | 1, u32::MAX]))
            .collect();
        assert_eq!(got, [Some(3), Some(1), None, None]);
    }
}
