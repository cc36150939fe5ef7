//! Record ids and the names decoded records take (Xen's public/trace.h,
//! public/xen.h, public/vcpu.h and the x86 HVM code), and the classes
//! xenalyze counts bytes by.

/// TRC_TRACE_CPU_CHANGE: a window of one pCPU's records follows.
pub const CPU_CHANGE: u32 = 0x0001_f003;
/// TRC_LOST_RECORDS.
pub const LOST_RECORDS: u32 = 0x0001_f001;
/// TRC_TRACE_WRAP_BUFFER: padding.
pub const WRAP_BUFFER: u32 = 0x0001_f004;
/// Run states by number (public/vcpu.h), then "unknown".
pub(super) static RUNSTATES: [&str; 5] = ["running", "runnable", "blocked", "offline", "unknown"];
pub(super) static GRANT_OPS: [&str; 3] = ["map", "unmap", "transfer"];
/// Shutdown reasons by number (public/sched.h, `SHUTDOWN_*`).
pub(super) static SHUTDOWN_REASONS: [&str; 6] = [
    "poweroff",
    "reboot",
    "suspend",
    "crash",
    "watchdog",
    "soft_reset",
];
pub(super) static IO_SPACES: [&str; 2] = ["port", "mem"];
pub(super) static IO_OPS: [&str; 2] = ["read", "write"];
pub(super) static SCHEDULERS: [&str; 8] = [
    "credit", "credit2", "sedf", "arinc653", "rtds", "null", "sched6", "sched7",
];

/// The class names xenalyze uses, indexed by [`class_index`].
pub(super) const CLASSES: [&str; 9] = [
    "gen", "sched", "dom0op", "hvm", "mem", "pv", "shadow", "hw", "other",
];

/// The class of an event id, as an index into [`CLASSES`]: a table look-up
/// by the class field (a look-up per record, where the test it replaced
/// was a few percent of the reader's instructions).
#[inline]
pub(super) fn class_index(ev: u32) -> usize {
    CLASS_OF[((ev >> 16) & 0xfff) as usize] as usize
}

/// [`class_index`] of every class field: the classes are the bits 0x001
/// .. 0x080 of the field, alone; anything else is "other".
static CLASS_OF: [u8; 4096] = {
    let mut t = [8u8; 4096];
    let mut bit = 0;
    while bit < 8 {
        t[1 << bit] = bit as u8;
        bit += 1;
    }
    t
};

/// Whether `ev`'s class field (bits 16-27) is exactly one of the class
/// bits Xen's public/trace.h defines: TRC_GEN 0x001 .. TRC_HW 0x080 and
/// TRC_GUEST 0x800. Xen writes no other (xentrace's own window headers
/// are TRC_GEN); a record with none or several of them is damaged.
#[inline]
pub(super) fn known_class(ev: u32) -> bool {
    let field = (ev >> 16) & 0xfff;
    field.is_power_of_two() && (field <= 0x080 || field == 0x800)
}

/// HVM handler record names (x86 hvm code's TRC_HVM_HANDLER + n, the
/// 64-bit flag 0x100 folded in, the write variants apart), each once.
pub static HVM_HANDLERS: [&str; 35] = [
    "unknown",
    "pf_xen",
    "pf_inject",
    "inj_exc",
    "inj_virq",
    "reinj_virq",
    "io_read",
    "io_write",
    "cr_read",
    "cr_write",
    "dr_read",
    "dr_write",
    "msr_read",
    "msr_write",
    "cpuid",
    "intr",
    "nmi",
    "smi",
    "vmcall",
    "hlt",
    "invlpg",
    "mce",
    "ioport_read",
    "iomem_read",
    "clts",
    "lmsw",
    "rdtsc",
    "intr_window",
    "npf",
    "realmode_emulate",
    "trap",
    "trap_debug",
    "vlapic",
    "ioport_write",
    "iomem_write",
];

/// Name of an HVM handler record (public/trace.h, TRC_HVM_HANDLER + n,
/// with the 64-bit flag 0x100 and the write variants +0x200 folded in).
pub fn hvm_handler_name(ev: u32) -> &'static str {
    // handler number -> index into HVM_HANDLERS (0: unknown)
    const BY_NUMBER: [u8; 0x26] = [
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24,
        25, 26, 0, 0, 0, 0, 0, 27, 28, 29, 30, 31, 32,
    ];
    let k = match ev & 0xfff {
        0x216 => 33,
        0x217 => 34,
        n => BY_NUMBER.get((n & 0xff) as usize).copied().unwrap_or(0),
    };
    HVM_HANDLERS[k as usize]
}

/// Name of a Xen hypercall number (public/xen.h).
pub fn hypercall_name(op: u32) -> &'static str {
    HYPERCALLS
        .get(op as usize)
        .copied()
        .unwrap_or(HYPERCALLS[HYPERCALLS.len() - 1])
}

/// Xen hypercall names by number (public/xen.h), then "unknown".
pub static HYPERCALLS: [&str; 43] = [
    "set_trap_table",
    "mmu_update",
    "set_gdt",
    "stack_switch",
    "set_callbacks",
    "fpu_taskswitch",
    "sched_op_compat",
    "platform_op",
    "set_debugreg",
    "get_debugreg",
    "update_descriptor",
    "ni",
    "memory_op",
    "multicall",
    "update_va_mapping",
    "set_timer_op",
    "event_channel_op_compat",
    "xen_version",
    "console_io",
    "physdev_op_compat",
    "grant_table_op",
    "vm_assist",
    "update_va_mapping_otherdomain",
    "iret",
    "vcpu_op",
    "set_segment_base",
    "mmuext_op",
    "xsm_op",
    "nmi_op",
    "sched_op",
    "callback_op",
    "xenoprof_op",
    "event_channel_op",
    "physdev_op",
    "hvm_op",
    "sysctl",
    "domctl",
    "kexec_op",
    "tmem_op",
    "argo_op",
    "xenpmu_op",
    "dm_op",
    "unknown",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_classes_are_the_single_class_bits_trace_h_defines() {
        for ev in [
            CPU_CHANGE,
            LOST_RECORDS,
            0x0002_800a, // TRC_SCHED_SWITCH
            0x0004_1001, // TRC_DOM0OP
            0x0008_2013, // TRC_HVM_HANDLER + HLT
            0x0010_0001, // TRC_MEM_PAGE_GRANT_MAP
            0x0020_100d, // TRC_PV
            0x0040_f123, // TRC_SHADOW
            0x0080_1001, // TRC_HW (pm)
            0x0800_0042, // TRC_GUEST
        ] {
            assert!(known_class(ev), "0x{ev:07x}");
        }
        for ev in [
            0x0000_0000, // no class bit (a zeroed header)
            0x0000_f003,
            0x0003_1234, // two class bits
            0x0102_800a, // a sched id with a stray high bit
            0x0100_0001, // bits TRC_ALL allows, no class defined
            0x0400_0001,
            0x0fff_f000, // TRC_ALL itself
        ] {
            assert!(!known_class(ev), "0x{ev:07x}");
        }
    }
}
