//! The tables xentrace records decode into.

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
            "xen_record",
        ];
        NAMES[self as usize]
    }
}

/// The tables declared so far (in declaration order) and the rows each
/// was given: every decode arm asks for its table once and writes one row.
#[derive(Default)]
pub(super) struct Tables {
    ids: [Option<TableId>; TABLES],
    pub(super) rows: [u64; TABLES],
    pub(super) declared: Vec<Table>,
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
        let mut columns = vec![col("tsc", ColumnType::U64)];
        columns.extend(cols.iter().map(|(n, t)| col(n, t.clone())));
        let id = sink
            .declare_table(&TableSpec {
                name: table.name().into(),
                system: "xen".into(),
                columns,
            })
            .map_err(|what| ReadError::Sink { what })?;
        self.ids[table as usize] = Some(id);
        self.declared.push(table);
        Ok(id)
    }
}
