//! The tables xentrace records decode into.

use super::sched_class::SCHED_EVENTS;
use crate::error::{ReadError, ReadResult};
use crate::sink::{ColumnSpec, ColumnType, EventSink, TableId, TableSpec};

fn col(name: &str, ty: ColumnType) -> ColumnSpec {
    ColumnSpec {
        name: name.into(),
        ty,
    }
}

/// Every table this reader writes. An arm names its table by variant, so
/// finding the table's id is an array index: hashing the record id per
/// record was a fifteenth of the reader's time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Table {
    RunstateChange,
    ContinueRunning,
    Switch,
    SwitchInfprev,
    SwitchInfnext,
    SwitchInfcont,
    Shutdown,
    Sleep,
    Wake,
    Yield,
    Block,
    DomAdd,
    DomRemove,
    HvmVmentry,
    HvmVmexit,
    HvmHlt,
    HvmVmcall,
    HvmIntr,
    HvmNpf,
    HvmIo,
    HvmHandler,
    PmFreqChange,
    PmIdleEntry,
    PmIdleExit,
    Grant,
    PvHypercall,
    SchedClass,
    LostRecords,
    Record,
}

const TABLES: usize = Table::Record as usize + 1;

impl Table {
    pub(super) fn name(self) -> &'static str {
        const NAMES: [&str; TABLES] = [
            "xen_runstate_change",
            "xen_continue_running",
            "xen_switch",
            "xen_switch_infprev",
            "xen_switch_infnext",
            "xen_switch_infcont",
            "xen_shutdown",
            "xen_sleep",
            "xen_wake",
            "xen_yield",
            "xen_block",
            "xen_dom_add",
            "xen_dom_remove",
            "xen_hvm_vmentry",
            "xen_hvm_vmexit",
            "xen_hvm_hlt",
            "xen_hvm_vmcall",
            "xen_hvm_intr",
            "xen_hvm_npf",
            "xen_hvm_io",
            "xen_hvm_handler",
            "xen_pm_freq_change",
            "xen_pm_idle_entry",
            "xen_pm_idle_exit",
            "xen_grant",
            "xen_pv_hypercall",
            "xen_sched_class",
            "xen_lost_records",
            "xen_record",
        ];
        NAMES[self as usize]
    }
}

/// The tables declared so far (in declaration order) and the rows each
/// was given: every decode arm asks for its table once and writes one row.
/// Scheduler-class tables are indexed by their layout in
/// [`SCHED_EVENTS`].
pub(super) struct Tables {
    ids: [Option<TableId>; TABLES],
    pub(super) rows: [u64; TABLES],
    pub(super) declared: Vec<Table>,
    sched_ids: Vec<Option<TableId>>,
    sched_rows: Vec<u64>,
}

impl Default for Tables {
    fn default() -> Self {
        Tables {
            ids: [None; TABLES],
            rows: [0; TABLES],
            declared: Vec::new(),
            sched_ids: vec![None; SCHED_EVENTS.len()],
            sched_rows: vec![0; SCHED_EVENTS.len()],
        }
    }
}

impl Tables {
    /// The id of `table`, declared with `cols()` (after `tsc`) the first
    /// time: the columns are only built then. Passed as a slice, they
    /// were built for every record (their names are statics, which the
    /// compiler does not promote to constants): 11 instructions a grant
    /// record, 2.4% of the reader's.
    #[inline(always)]
    pub(super) fn get<S: EventSink + ?Sized>(
        &mut self,
        sink: &mut S,
        table: Table,
        cols: impl FnOnce() -> Vec<(&'static str, ColumnType)>,
    ) -> ReadResult<TableId> {
        self.rows[table as usize] += 1;
        match self.ids[table as usize] {
            Some(id) => Ok(id),
            None => self.declare(sink, table, &cols()),
        }
    }

    #[cold]
    #[inline(never)]
    fn declare<S: EventSink + ?Sized>(
        &mut self,
        sink: &mut S,
        table: Table,
        cols: &[(&str, ColumnType)],
    ) -> ReadResult<TableId> {
        let id = declare(sink, table.name(), cols)?;
        self.ids[table as usize] = Some(id);
        self.declared.push(table);
        Ok(id)
    }

    /// The id of the table of scheduler-class layout `k`, declared the
    /// first time.
    #[inline]
    pub(super) fn sched<S: EventSink + ?Sized>(
        &mut self,
        sink: &mut S,
        k: usize,
    ) -> ReadResult<TableId> {
        self.sched_rows[k] += 1;
        match self.sched_ids[k] {
            Some(id) => Ok(id),
            None => {
                let e = &SCHED_EVENTS[k];
                let cols: Vec<(&str, ColumnType)> = e
                    .fields
                    .iter()
                    .map(|f| (f.name, f.ty.column_type()))
                    .collect();
                let id = declare(sink, e.table, &cols)?;
                self.sched_ids[k] = Some(id);
                Ok(id)
            }
        }
    }

    /// Rows per declared table, by table name.
    pub(super) fn rows_by_name(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        let fixed = self
            .declared
            .iter()
            .map(|&t| (t.name(), self.rows[t as usize]));
        let sched = SCHED_EVENTS
            .iter()
            .zip(&self.sched_rows)
            .filter(|(_, &n)| n > 0)
            .map(|(e, &n)| (e.table, n));
        fixed.chain(sched)
    }
}

/// Declare table `name`: `tsc`, then `cols`.
fn declare<S: EventSink + ?Sized>(
    sink: &mut S,
    name: &str,
    cols: &[(&str, ColumnType)],
) -> ReadResult<TableId> {
    let mut columns = vec![col("tsc", ColumnType::U64)];
    columns.extend(cols.iter().map(|(n, t)| col(n, t.clone())));
    sink.declare_table(&TableSpec {
        name: name.into(),
        system: "xen".into(),
        columns,
    })
    .map_err(|what| ReadError::Sink { what })
}
