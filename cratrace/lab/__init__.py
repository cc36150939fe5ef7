"""The workload lab: processes that behave like VMs on a host, built from
``vmlab.c`` with the system C compiler on first use (cached by source
hash), so captures with real lock-holder preemption can be made on any
Linux machine without hardware virtualisation."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cratrace.errors import CratraceError

SOURCE = Path(__file__).with_name("vmlab.c")
#: the VMMs the lab can look like, and its guests' marker styles (vmlab.c)
VMMS = ("qemu", "firecracker", "cloud-hypervisor", "crosvm", "kvmtool")
MARKER_STYLES = ("lab", "bare", "rtapp", "free", "none")


class LabError(CratraceError):
    """The lab's parameters are invalid, or it could not be built or run."""


@dataclass(frozen=True)
class LabParams:
    """One lab run: `vms` processes of `vcpus` threads each."""

    vms: int = 2
    #: vCPUs per VM: one count for every VM, or one per VM (the last
    #: repeating), e.g. (1, 3): VMs of different sizes
    vcpus: int | tuple[int, ...] = 2
    burst_us: int = 300
    hold_us: int = 100
    sleep_us: int = 200
    duration_s: float = 2.0
    #: how bursts and critical sections are measured: "count" (a loop
    #: calibrated to the thread's CPU time, no system calls while it runs,
    #: as a vCPU computes in guest mode), "cpu" (thread CPU time read in the
    #: loop: fixed work, but the scheduler's accounting runs on every read)
    #: or "wall" (a preempted burst shrinks)
    work_clock: str = "count"
    #: the VMs' lock: "spin" (native spinlock: spin until free) or "pv"
    #: (a KVM guest's paravirtual spinlock: spin 2^15 PAUSEs, then halt
    #: until the holder's unlock kicks one waiter)
    lock: str = "spin"
    #: the VM processes share the lab's session ("shared") or each has its
    #: own ("own"): with autogroups on, the kernel then schedules each VM
    #: as a group of its own, as libvirt's per-VM cgroups do
    vm_sessions: str = "shared"
    #: which VMM the processes and threads are named after (VMMS in the
    #: collector): qemu, firecracker, cloud-hypervisor (its `vmm` thread
    #: creates the vCPUs), crosvm or kvmtool
    vmm: str = "qemu"
    #: how the guests annotate: lab (`txn_end vm=X vcpu=N`, spin_begin /
    #: spin_end with the same fields), bare (`txn_end n=K`, spin_begin,
    #: spin_end: no fields), rtapp (rt-app's `rtapp_loop: event=end ...`),
    #: free (free text) or none
    markers: str = "lab"

    def __post_init__(self) -> None:
        # vmlab.c clamps or zeroes nonsense silently (atoi, fixed arrays), so
        # refuse it here where the option names are known.
        if not 1 <= self.vms <= 64:
            raise LabError(f"--vms must be 1..64, got {self.vms}")
        counts = self.vcpus if isinstance(self.vcpus, tuple) else (self.vcpus,)
        if not counts or not all(isinstance(n, int) and 1 <= n <= 256 for n in counts):
            raise LabError(f"--vcpus must be 1..256 (or one such count per VM, comma-separated), got {self.vcpus}")
        if len(counts) > self.vms:
            raise LabError(f"--vcpus gives {len(counts)} counts for {self.vms} VMs")
        if not 0 < self.duration_s <= 86400:
            raise LabError(f"--duration must be in (0, 86400] seconds, got {self.duration_s}")
        # a phase longer than the run would not end with it (a vCPU checks
        # for the end between phases), and vmlab.c reads a C int
        longest = min(2**31 - 1, int(self.duration_s * 1e6))
        for name in ("burst_us", "hold_us", "sleep_us"):
            if not 0 <= getattr(self, name) <= longest:
                raise LabError(f"--{name.replace('_', '-')} must be 0..{longest} µs (at most the run's --duration), got {getattr(self, name)}")
        if self.work_clock not in ("cpu", "wall", "count"):
            raise LabError(f"--work-clock must be cpu, wall or count, got {self.work_clock!r}")
        if self.lock not in ("spin", "pv"):
            raise LabError(f"--lock must be spin or pv, got {self.lock!r}")
        if self.vm_sessions not in ("shared", "own"):
            raise LabError(f"--vm-sessions must be shared or own, got {self.vm_sessions!r}")
        if self.vmm not in VMMS:
            raise LabError(f"--vmm must be one of {', '.join(VMMS)}, got {self.vmm!r}")
        if self.markers not in MARKER_STYLES:
            raise LabError(f"--markers must be one of {', '.join(MARKER_STYLES)}, got {self.markers!r}")

    def vcpus_of(self, vm: int) -> int:
        """vCPUs of VM number `vm`."""
        if isinstance(self.vcpus, int):
            return self.vcpus
        return self.vcpus[min(vm, len(self.vcpus) - 1)]

    def argv(self, exe: Path) -> list[str]:
        vcpus = ",".join(map(str, self.vcpus)) if isinstance(self.vcpus, tuple) else str(self.vcpus)
        return [str(exe), str(self.vms), vcpus, str(self.burst_us), str(self.hold_us), str(self.sleep_us), str(self.duration_s), self.work_clock, self.lock, self.vm_sessions, self.vmm, self.markers]


def executable() -> Path:
    """Path of the compiled lab, building it if needed."""
    src = SOURCE.read_bytes()
    digest = hashlib.sha256(src).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "cratrace" / "lab"
    exe = cache / f"vmlab-{digest}"
    if exe.exists():
        return exe
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise CratraceError("the workload lab needs a C compiler (cc/gcc) to build cratrace/lab/vmlab.c")
    cache.mkdir(parents=True, exist_ok=True)
    # a temporary of this process's own: two builds at once (two test
    # runs, a benchmark) each finish theirs and replace the other's whole
    tmp = exe.with_name(f"{exe.name}.{os.getpid()}.tmp")
    r = subprocess.run([cc, "-O2", "-pthread", "-o", str(tmp), str(SOURCE)], capture_output=True, text=True)
    if r.returncode != 0:
        raise CratraceError(f"building the workload lab failed: {r.stderr.strip().splitlines()[-1] if r.stderr else r.returncode}")
    os.replace(tmp, exe)
    return exe


def run(params: LabParams) -> subprocess.CompletedProcess:
    """Run the lab to completion (blocking)."""
    return subprocess.run(params.argv(executable()), capture_output=True, text=True, timeout=params.duration_s + 60)


def start(params: LabParams, cpus: set[int] | None = None) -> subprocess.Popen:
    """Start the lab in the background; on `cpus` only, if given (its VMs
    inherit the affinity)."""
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    return subprocess.Popen(params.argv(executable()), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=pin)
