"""Type stub for `cratrace._native`, the one PyO3 module (crate `bindings/`).

One call per file or per replay, never per event; long calls release the GIL.
Readers write `out_dir/<table>.parquet` and return a summary dict; errors
are the exceptions below with one-line messages naming file and offset.
"""

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

class CratraceError(Exception): ...
class CorruptTraceError(CratraceError): ...
class UnsupportedFormatError(CratraceError): ...

Progress = Callable[[int, int], object]  # (bytes done, bytes total); raising stops the read
VCPU_STATES: list[str]  # a vCPU timeline's states, indexed by their codes (cratrace-timelines)

def tracedat_kallsyms(path: str | Path) -> str: ...
def tracedat_symbols(path: str | Path, addresses: Sequence[int]) -> list[tuple[int, str]]: ...  # %ps names from the trace's kallsyms
def read_tracedat(path: str | Path, out_dir: str | Path, *, batch_rows: int = 4096, compression: str = "lz4", progress: Progress | None = None) -> dict[str, Any]: ...
def tracedat_floor(path: str | Path, stage: str) -> dict[str, Any]: ...  # issue 47: stage "decompress", "decode" or "rows"; records, pages, bytes, check, seconds
class _TraceDatStats:
    """The submodule `tracedat_stats`: the trace.dat reader's stats keys,
    declared once in readers/src/tracedat/stats.rs (issue 46); each
    attribute is named as its Rust constant."""

    PAGES: str
    CORRUPT_PAGES: str
    CORRUPT_RECORDS: str
    UNPARSEABLE_FORMATS: str
    TS_OUT_OF_ORDER: str
    BPRINT_UNKNOWN_FORMAT: str
    UNKNOWN_EVENT_ID: str
    TRUNCATED_BYTES: str
    ALL: dict[str, str]  # every key, with what it counts

tracedat_stats: _TraceDatStats

def read_xentrace(path: str | Path, out_dir: str | Path, *, cpu_hz: float, batch_rows: int = 4096, compression: str = "lz4", progress: Progress | None = None) -> dict[str, Any]: ...
def read_perfdata(path: str | Path, out_dir: str | Path, *, batch_rows: int = 4096, compression: str = "lz4", progress: Progress | None = None) -> dict[str, Any]: ...
def read_perfstat(path: str | Path, out_dir: str | Path, *, start_ns: int | None = None, batch_rows: int = 4096, compression: str = "lz4") -> dict[str, Any]: ...
def parquet_rows(path: str | Path) -> int: ...
def parquet_distinct_u64(path: str | Path, names: Sequence[str]) -> list[int] | None: ...  # the first of names the file has
def parquet_codec(path: str | Path) -> str | None: ...
def file_blake3(path: str | Path) -> str: ...
def build_info() -> dict[str, str]: ...
class ArrowTable:
    """A table exported through the Arrow PyCapsule interface: `pl.DataFrame(t)`."""
    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any: ...
    def __len__(self) -> int: ...

class MarkerLines:
    """Parsed trace_marker lines (print events of the top-level buffer), in time order."""
    @staticmethod
    def read(path: str | Path, compression: str | None = None, keep: Sequence[str] | None = None) -> MarkerLines: ...  # a print event table (Parquet); with compression, text columns encoded as parsed and only `keep` lines kept (without text and fields)
    @staticmethod
    def from_frame(prints: Any) -> MarkerLines: ...  # a polars frame: ts, cpu, pid, [instance], buf
    def table(self, threads: Any, names: Sequence[str] | None = None) -> ArrowTable: ...  # threads: frame of tid, vm, vcpu
    def pairs(self, threads: Any, begin: str, end: str) -> ArrowTable: ...  # vm, vcpu, tid, start, end: per (vm, vcpu), a begin line followed by an end line
    def write(self, threads: Any, path: str | Path, compression: str) -> int: ...  # rows written
    def __len__(self) -> int: ...

def replay_default_costs() -> dict[str, int]: ...
def replay_param_defaults() -> dict[str, float]: ...
def replay_state_names() -> dict[int, str]: ...
def replay_segment_state_codes() -> dict[str, int]: ...
def vcpu_phases(
    *,
    segments: Any,
    marks: Any,
    critical_ns: list[int],
    switch_ns: int,
    migration_ns: int,
    first_thread: int = 0,
    barriers: Any | None = None,
) -> tuple[list[int | None], tuple[bytes, bytes, bytes, bytes]]: ...
def host_phases(*, slices: Any, threads: int, switch_ns: int, migration_ns: int, first_thread: int = 0) -> tuple[bytes, bytes, bytes, bytes]: ...
def enclosing_interval(*, instants: Any, over: Any) -> ArrowTable: ...  # start of the merged run of `over` holding each instant, or null
def overlay_timeline(*, segments: Any, over: Any) -> ArrowTable: ...
def pause_clusters(*, exits: Any, gap_ns: int) -> ArrowTable: ...  # tid, start, end, exits: a thread's PAUSE exits split at gaps over gap_ns
def lock_holders(*, episodes: Any, preemptions: Any) -> ArrowTable: ...  # holder_vcpu: the lowest sibling preempted at each episode's start, or null
def thermal_profile(
    *,
    cpu: Sequence[int],
    start: Sequence[int],
    end: Sequence[int],
    watts: Sequence[float],
    idle_w: float,
    cores: int,
    t0: int,
    t1: int,
    throttle_c: float,
    params: dict[str, float],
    bin_ns: int = 1_000_000,
) -> tuple[list[float], list[int]]: ...  # each core's peak °C, ns above throttle_c
def vcpu_timelines(
    *, threads: Any, runs: Any, outs: Any, entries: Any, exits: Any, wakeups: Any, span: tuple[int, int], halts: Sequence[int], lead: bool = True, marked: bool = False
) -> ArrowTable: ...  # _key, tid, state (a VCPU_STATES code), start, end, pcpu
def replay(
    *,
    thread_tid: Sequence[int],
    thread_vm: Sequence[int],
    thread_vcpu: Sequence[int],
    thread_start: Sequence[int],
    thread_cpu: Sequence[int] | None = None,
    thread_fine: Sequence[bool] | None = None,
    thread_group: Sequence[int] | None = None,
    thread_allowed: Sequence[Sequence[int] | None] | None = None,
    group_names: Sequence[str] | None = None,
    group_shares: Sequence[int] | None = None,
    phase_thread: Sequence[int] | bytes | None = None,
    phase_kind: Sequence[int] | bytes | None = None,
    phase_a: Sequence[int] | bytes | None = None,
    phase_b: Sequence[int] | bytes | None = None,
    # or the four column files of a spill (cratrace.replay.spill)
    phase_files: Sequence[str] | None = None,
    vm_names: Sequence[str],
    vm_weights: Sequence[int],
    vm_cpu_intensive: Sequence[bool | None],
    vm_elasticity: Sequence[float | None],
    vm_share: Sequence[float] | None = None,
    vm_cap: Sequence[float | None] | None = None,
    freq_khz: Sequence[int],
    recorded_khz: int,
    elasticity: float,
    policy: str,
    params: dict[str, float],
    costs: dict[str, int],
    limit_ns: int,
) -> dict[str, Any]:
    """Columns of the replayed run (states, slices, marks, spin episodes),
    per-thread totals, per-core energy, pools, balance periods; see
    `replay/src/output.rs`."""

def postcopy(
    *,
    params: dict[str, float],
    vm_pages: int,
    vcpus: int,
    tasks: Sequence[tuple[int, int, int, int]],
    touch_lists: Sequence[tuple[int, int, Sequence[int]]] = ...,
    present: Sequence[int] = ...,
) -> dict[str, Any]: ...
def postcopy_defaults() -> dict[str, float]:
    """The postcopy engine's defaults by `--set` name, with `compute_ns`,
    `baseline_guest_share`, `idle_fetch_ns` and `idle_stall_ns`; see
    `replay/src/postcopy/params.rs`."""

class TraceDatSpool:
    """The ring-buffer pages of a trace.dat being generated, encoded a batch
    of events at a time and spooled per buffer and CPU to files in
    `directory` (`cratrace.synth.tracedat_writer.TraceDatStream` drives it
    and writes the file around the pages); see `bindings/src/tracedat_writer.rs`."""
    def __init__(
        self,
        directory: str | Path,
        *,
        little: bool,
        long_size: int,
        page_size: int,
        instance_page_sizes: dict[str, int],
        tail_padding: bool,
        abs_every: int,
        lost: dict[tuple[str, int], dict[int, int]],
        formats: Sequence[tuple[Sequence[str], int, int, bool, Sequence[tuple[str, int, int, int, int, int, int]]]],
        encode: Callable[[str, int, Any, int, int], bytes] | None = None,
    ) -> None: ...
    def add(self, events: list[tuple[Any, ...]]) -> None: ...  # (ts, cpu, name, pid, fields[, instance, flags, preempt]); ValueError names a bad event
    def counts(self) -> list[tuple[str, int]]: ...  # events added per name, in order of first use
    def finish(self) -> list[tuple[str, int, Path, int, int, int, int | None, int | None]]: ...  # (instance, cpu, spool file, page bytes, records, payload bytes, first ts, last ts)
    def __len__(self) -> int: ...

def synth_kvm_heavy_spin_loop(
    spool: TraceDatSpool,
    dur_us: int,
    params: dict[str, int],
    rng_state: Sequence[int],
    t0: int,
    last_ts: Sequence[int],
    current: Sequence[int],
    since: Sequence[int],
    oncpu: dict[int, int],
    comms: dict[int, str],
    vcpus: Sequence[tuple[int, str, int, int, int]],
    runq: Sequence[Sequence[int]],
    slice_left: Sequence[int],
    episodes_out: Callable[[bytes], object],
) -> tuple[Any, ...]:
    """kvm-heavy-spin's tick loop (the Python one in
    `cratrace/synth/scenarios/kvm_heavy_spin.py`, statement for statement,
    continuing `random.getstate()`), its events written into `spool`, its
    closed episodes passed to `episodes_out` as packed records in the
    truth's order (`cratrace.synth.episodes`); returns (rng state,
    last_ts, current, since, oncpu, per-vCPU state, the closed episodes'
    totals). Holds the GIL: one call per trace."""
