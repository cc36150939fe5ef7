#!/usr/bin/env python3
"""cratrace host-side collector: capture ftrace, perf and xentrace streams
with a host snapshot and a VM inventory, safely.

Standard library only, Python 3.6 or later (3.6 to 3.13 are tested: RHEL
8's platform Python is 3.6). Installed with cratrace it is the
`cratrace-collect` command (and `python3 -m cratrace_collect`); for a host
without cratrace, build a one-file zipapp and copy that:

    cratrace-collect --build-zipapp collect.pyz
    python3 collect.pyz -o raw/ --preset kvm-sched --duration 10   # as root

(or copy this package's directory, presets/ included, and run
`python3 -m cratrace_collect` beside it).

The output directory (trace.dat, perf-stat.csv, perf.data, xentrace.bin,
host.json, manifest.json) is what `cratrace import raw/ -o capture/` reads.

Safety: bounded by --duration and --max-size, free disk checked first,
SIGINT/SIGTERM stop the capture cleanly (outputs stay importable), tracing
state is restored on every exit path, user text never goes through a
shell, event names and paths are validated.
"""

import argparse
import datetime as _dt
import hashlib
import json
import os
import platform
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

TRACEFS_CANDIDATES = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))
PRESET_DIR = Path(__file__).resolve().parent / "presets"
EVENT_RE = re.compile(r"^[A-Za-z0-9_]+(:[A-Za-z0-9_*]+)?$")
# xentrace event-class masks (xen/include/public/trace.h)
XEN_CLASSES = {"gen": 0x0001F000, "sched": 0x0002F000, "dom0op": 0x0004F000, "hvm": 0x0008F000, "mem": 0x0010F000, "pv": 0x0020F000, "hw": 0x0080F000, "pm": 0x00801000}
STATE_FILES = ("tracing_on", "buffer_size_kb", "current_tracer", "trace_clock")


class CollectError(Exception):
    """A one-line, user-facing reason the capture cannot run."""


# --------------------------------------------------------------- presets


def load_preset(name: str, preset_dir: Path = PRESET_DIR) -> dict:
    if not re.fullmatch(r"[a-z0-9-]+", name):
        raise CollectError(f"preset name {name!r}: only lowercase letters, digits and '-'")
    p = preset_dir / f"{name}.json"
    packed = _zipped_presets(preset_dir)
    if packed is not None:  # running as a zipapp: presets are archive members
        if name not in packed:
            raise CollectError(f"unknown preset {name!r} (known: {', '.join(sorted(packed))})")
        return json.loads(packed[name])
    if not p.is_file():
        known = sorted(x.stem for x in preset_dir.glob("*.json"))
        raise CollectError(f"unknown preset {name!r} (known: {', '.join(known)})")
    return json.loads(p.read_text())


def _zipped_presets(preset_dir: Path) -> Optional[Dict[str, bytes]]:
    """{name: json bytes} when preset_dir lies inside a zipapp, else None."""
    import zipfile

    archive = preset_dir.parent
    if preset_dir.is_dir() or not zipfile.is_zipfile(archive):
        return None
    with zipfile.ZipFile(archive) as z:
        return {Path(n).stem: z.read(n) for n in z.namelist() if n.startswith("presets/") and n.endswith(".json")}


def validate_events(events: List[str]) -> List[str]:
    bad = [e for e in events if not EVENT_RE.fullmatch(e)]
    if bad:
        raise CollectError(f"invalid event name(s): {', '.join(map(repr, bad))} (expected system:event)")
    return events


def tracefs() -> Optional[Path]:
    for p in TRACEFS_CANDIDATES:
        if (p / "events").is_dir():
            return p
    return None


def split_available(events: List[str], tfs: Path) -> Tuple[List[str], List[str]]:
    """(present, missing) on this host."""
    present, missing = [], []
    for e in events:
        sys_, _, ev = e.partition(":")
        path = tfs / "events" / sys_ / ev if ev and "*" not in ev else tfs / "events" / sys_
        (present if path.exists() else missing).append(e)
    return present, missing


# --------------------------------------------------------- tracing state


def snapshot_state(tfs: Path) -> dict:
    """What a capture may change in tracefs: the STATE_FILES, the enabled
    events, the instances, and every event filter and trigger that is set
    (a subsystem's filter under its name, an event's under system/event:
    trace-cmd clears them all when it starts)."""
    state = {}
    for f in STATE_FILES:
        try:
            state[f] = (tfs / f).read_text()
        except OSError:
            pass
    # A ring buffer nothing has traced into yet reads "7 (expanded: 1408)":
    # the first recording grows it to 1408 KB and the kernel never shrinks
    # it back, so the size to restore is the one it would have grown to.
    m = re.fullmatch(r"\d+ \(expanded: (\d+)\)\n?", state.get("buffer_size_kb", ""))
    if m:
        state["buffer_size_kb"] = m.group(1) + "\n"
    try:
        state["set_event"] = (tfs / "set_event").read_text()
    except OSError:
        pass
    # set_event also lists the events a trigger keeps in soft mode, whose
    # enable file reads "0*" (hooked, recording nothing) where a really
    # enabled event reads "1"
    state["enable"] = {}
    for line in state.get("set_event", "").splitlines():
        sys_, _, ev = line.partition(":")
        text = _read(tfs / "events" / sys_ / ev / "enable")
        if text is not None:
            state["enable"][line] = text
    inst = tfs / "instances"
    state["instances"] = sorted(p.name for p in inst.iterdir()) if inst.is_dir() else []
    state["filters"], state["triggers"] = {}, {}
    for key, d in _event_dirs(tfs):
        text = _read(d / "filter")
        if text and not _no_filter(text):
            state["filters"][key] = text
        lines = _triggers(_read(d / "trigger"))
        if lines:
            state["triggers"][key] = lines
    return state


def _event_dirs(tfs: Path) -> List[Tuple[str, Path]]:
    """(key, directory) of every subsystem (key "sched") and event (key
    "sched/sched_switch") that has a filter file, subsystems first."""
    events = tfs / "events"
    if not events.is_dir():
        return []
    systems, each = [], []
    for sys_dir in sorted(events.iterdir()):
        if not sys_dir.is_dir():
            continue
        if (sys_dir / "filter").is_file():
            systems.append((sys_dir.name, sys_dir))
        for ev in sorted(sys_dir.iterdir()):
            if (ev / "filter").is_file():
                each.append((sys_dir.name + "/" + ev.name, ev))
    return systems + each


def _no_filter(text: str) -> bool:
    # an event without a filter reads "none"; a subsystem's, a comment
    return text.strip() == "none" or text.lstrip().startswith("#")


def _triggers(text: Optional[str]) -> List[str]:
    """A trigger file's triggers as it lists them ("traceoff:unlimited",
    "stacktrace:count=7 if prev_pid == 0"); without any it lists only
    comments."""
    return sorted(line.strip() for line in (text or "").splitlines() if line.strip() and not line.startswith("#"))


def _trigger_command(listed: str) -> str:
    """What to write to a trigger file to set a trigger as it is listed:
    "traceoff:unlimited" -> "traceoff", "stacktrace:count=7 if x == 0" ->
    "stacktrace:7 if x == 0", "hist:keys=pid:size=2048 [paused]" ->
    "hist:keys=pid:size=2048:pause"."""
    head, sep, cond = listed.partition(" if ")
    state = re.search(r" \[(active|paused)\]$", cond or head)
    if state:
        if cond:
            cond = cond[:state.start()]
        else:
            head = head[:state.start()]
        if state.group(1) == "paused":
            head += ":pause"
    head = re.sub(r":unlimited$", "", head)
    head = re.sub(r":count=(\d+)$", r":\1", head)
    return head + sep + cond


def _trigger_removal(listed: str) -> str:
    """What to write to a trigger file to remove a trigger: "!" and the
    trigger without its count or filter (the kernel ignores both)."""
    head = _trigger_command(listed).partition(" if ")[0]
    return "!" + re.sub(r":\d+$", "", head)


def _write_tracefs(path: Path, text: str, append: bool = False) -> None:
    # one write(2) of the whole command: tracefs parses each write alone.
    # Appending is O_APPEND without a seek: Python's "a" mode seeks to the
    # end, which tracefs rejects (EINVAL); a trigger file adds a trigger
    # per write
    fd = os.open(str(path), os.O_WRONLY | (os.O_APPEND if append else os.O_TRUNC))
    try:
        os.write(fd, (text + "\n").encode())
    finally:
        os.close(fd)


def _append_tracefs(path: Path, text: str) -> None:
    _write_tracefs(path, text, append=True)


def restore_state(tfs: Path, state: dict) -> List[str]:
    """Put tracing back as it was, then read back everything `state`
    holds; returns what could not be restored and what still differs
    (empty: the state is as saved)."""
    problems = []
    for f in STATE_FILES:
        if f not in state:
            continue
        val = state[f]
        if f == "trace_clock":  # "[local] global ..." -> "local"
            m = re.search(r"\[(\S+)\]", val)
            val = m.group(1) if m else val.split()[0]
        try:
            cur = (tfs / f).read_text()
            if cur != state[f]:
                (tfs / f).write_text(val.strip() + "\n")
        except OSError as e:
            problems.append(f"{f}: {e}")
    if "set_event" in state:
        try:
            if (tfs / "set_event").read_text() != state["set_event"]:
                (tfs / "set_event").write_text("")  # O_TRUNC disables every event
                for line in state["set_event"].splitlines():
                    # writing a soft-mode event here would make it record;
                    # its trigger, restored below, puts it back in soft mode
                    if state.get("enable", {}).get(line) != "0*":
                        _append_tracefs(tfs / "set_event", line)
        except OSError as e:
            problems.append(f"set_event: {e}")
    if "filters" in state:
        problems += _restore_filters_and_triggers(tfs, state)
    inst = tfs / "instances"
    if inst.is_dir():
        for p in inst.iterdir():
            if p.name not in state.get("instances", []):
                try:
                    p.rmdir()
                except OSError as e:
                    problems.append(f"instance {p.name}: {e}")
    # the check: every saved file read back (one that could not be
    # written is said once, by its error)
    failed = {p.split(": ")[0] for p in problems}
    return problems + [d for d in state_differences(state, snapshot_state(tfs)) if d.split(": ")[0] not in failed]


def _restore_filters_and_triggers(tfs: Path, state: dict) -> List[str]:
    """Each subsystem's and event's filter and triggers as saved (a
    subsystem's filter first: writing it sets its events' filters)."""
    problems = []
    saved_filters, saved_triggers = state.get("filters", {}), state.get("triggers", {})
    for key, d in _event_dirs(tfs):
        where = "events/" + key
        want = saved_filters.get(key)
        try:
            text = _read(d / "filter")
            now = None if text is None or _no_filter(text) else text
            if now != want:
                _write_tracefs(d / "filter", want if want is not None else "0")
        except OSError as e:
            problems.append(f"{where}/filter: {e}")
        if "/" not in key:
            continue
        want_t = saved_triggers.get(key, [])
        try:
            now_t = _triggers(_read(d / "trigger"))
            for t in now_t:
                if t not in want_t:
                    _append_tracefs(d / "trigger", _trigger_removal(t))
            now_t = _triggers(_read(d / "trigger"))
            for t in want_t:
                if t not in now_t:
                    _append_tracefs(d / "trigger", _trigger_command(t))
        except OSError as e:
            problems.append(f"{where}/trigger: {e}")
    return problems


def state_differences(saved: dict, now: dict) -> List[str]:
    """One line per file whose content differs between two snapshots:
    "events/sched/sched_switch/filter: 'none' after restoring, was 'prev_pid != 0'"."""
    def show(v) -> str:
        if v is None:
            return "none"
        return repr(v.strip() if isinstance(v, str) else "; ".join(v) or "none")

    out = []
    for f in STATE_FILES + ("set_event",):
        if f in saved and saved[f] != now.get(f):
            out.append(f"{f}: {show(now.get(f))} after restoring, was {show(saved[f])}")
    for line, text in saved.get("enable", {}).items():
        if now.get("enable", {}).get(line) != text:
            sys_, _, ev = line.partition(":")
            out.append(f"events/{sys_}/{ev}/enable: {show(now.get('enable', {}).get(line))} after restoring, was {show(text)}")
    if "instances" in saved and saved["instances"] != now.get("instances"):
        out.append(f"instances: {show(now.get('instances'))} after restoring, was {show(saved['instances'])}")
    for kind in ("filters", "triggers"):
        if kind not in saved:
            continue
        was, got = saved[kind], now.get(kind, {})
        for key in sorted(set(was) | set(got)):
            if was.get(key) != got.get(key):
                out.append(f"events/{key}/{kind[:-1]}: {show(got.get(key))} after restoring, was {show(was.get(key))}")
    return out


# ---------------------------------------------------------- host snapshot


def _read(path: Path, default=None):
    try:
        return path.read_text().strip()
    except OSError:
        return default


def _run(cmd: List[str], timeout: float = 10) -> Optional[str]:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        # stdout/stderr pipes and universal_newlines: capture_output and text need 3.7
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout if r.returncode == 0 else None


def _cpus() -> dict:
    model = None
    for line in (_read(Path("/proc/cpuinfo"), "") or "").splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    base = Path("/sys/devices/system/cpu")
    topo, freq, idle = [], {}, {}
    for d in sorted(base.glob("cpu[0-9]*"), key=lambda p: int(p.name[3:])):
        n = int(d.name[3:])
        topo.append({"cpu": n, "core": _int(_read(d / "topology/core_id")), "package": _int(_read(d / "topology/physical_package_id"))})
        cf = d / "cpufreq"
        if cf.is_dir():
            freq[str(n)] = {
                "governor": _read(cf / "scaling_governor"),
                "available_frequencies_khz": [int(x) for x in (_read(cf / "scaling_available_frequencies", "") or "").split()],
                "cur_khz": _int(_read(cf / "scaling_cur_freq")),
                "min_khz": _int(_read(cf / "cpuinfo_min_freq")),
                "max_khz": _int(_read(cf / "cpuinfo_max_freq")),
            }
        ci = d / "cpuidle"
        if ci.is_dir():
            idle[str(n)] = [{"name": _read(s / "name"), "latency_us": _int(_read(s / "latency"))} for s in sorted(ci.glob("state*"))]
    return {"model": model, "count": len(topo), "topology": topo, "cpufreq": freq, "idle_states": idle}


def _int(s):
    try:
        return int(s)
    except (TypeError, ValueError):
        return None


def _tsc_hz() -> Optional[int]:
    """The TSC rate the kernel uses: sysfs when exported, else its boot-time
    calibration from the kernel log (refined value preferred); None when
    neither is readable (e.g. dmesg restricted)."""
    khz = _int(_read(Path("/sys/devices/system/cpu/cpu0/tsc_freq_khz")))
    if khz:
        return khz * 1000
    return tsc_hz_from_kernel_log(_run(["dmesg"]) or "")


def tsc_hz_from_kernel_log(log: str) -> Optional[int]:
    for pattern in (r"tsc: Refined TSC clocksource calibration: ([0-9.]+) MHz", r"tsc: Detected ([0-9.]+) MHz"):
        found = re.findall(pattern, log)
        if found:
            return int(round(float(found[-1]) * 1e6))
    return None


#: The VMMs recognised by name, here (a host's /proc) and in the model (a
#: trace's thread names, cratrace.model.vms): (VMM, its process name as
#: argv[0]'s base name or the 15-character comm, its vCPU threads' names
#: with the vCPU index as group 1, the options naming the VM). Thread names
#: as each VMM sets them: QEMU `CPU n/KVM` (`/TCG` without KVM),
#: Firecracker `fc_vcpu n`, Cloud Hypervisor `vcpun`, crosvm
#: `crosvm_vcpun`, kvmtool `kvm-vcpu-n`.
VMMS = (
    ("qemu", r"qemu-system-[\w.-]*|qemu-kvm|qemu", r"CPU (\d+)/(?:KVM|TCG|HVF|WHPX|NVMM)", ("-name",)),
    ("firecracker", r"firecracker|fc_vmm", r"fc_vcpu ?(\d+)", ("--id",)),
    ("cloud-hypervisor", r"cloud-hyperviso(?:r)?", r"vcpu(\d+)", ()),
    ("crosvm", r"crosvm", r"crosvm_vcpu ?(\d+)", ()),
    ("kvmtool", r"lkvm|lkvm-static", r"kvm-vcpu-(\d+)", ("--name", "-n")),
)


def vmm_of_process(argv0: str, comm: str):
    """The VMMS row whose process this is (by argv[0]'s base name or comm), or None."""
    base = os.path.basename(argv0)
    for row in VMMS:
        if re.fullmatch(row[1], base) or re.fullmatch(row[1], comm):
            return row
    return None


def _vm_name(vmm: str, flags, args: list) -> Optional[str]:
    """The VM's name from its VMM's command line (QEMU's `-name
    guest=X,...` or `-name X`; the others' `--id X` / `--name X`)."""
    for i, a in enumerate(args[:-1]):
        for flag in flags:
            if a == flag:
                v = args[i + 1]
                if vmm == "qemu":
                    m = re.search(r"(?:^|,)guest=([^,]+)", v)
                    return m.group(1) if m else v.split(",")[0]
                return v
            if a.startswith(flag + "="):
                return a.split("=", 1)[1]
    return None


def _tasks(pdir: Path) -> list:
    """A process's thread directories (/proc/PID/task/TID) in thread id
    order; none when it exited while we looked (a host's processes come
    and go between listing /proc and reading it)."""
    try:
        return sorted((t for t in (pdir / "task").iterdir() if t.name.isdigit()), key=lambda t: int(t.name))
    except OSError:
        return []


def vmm_vms(proc: Path = Path("/proc")) -> list:
    """Each VMM process (QEMU, Firecracker, Cloud Hypervisor, crosvm,
    kvmtool: VMMS): its VM's name from the command line (QEMU's -name and
    -uuid, Firecracker's --id, kvmtool's --name; else `<vmm>-<pid>`), its
    vCPU threads by their names, vhost workers `vhost-<pid>`, QEMU's
    iothreads, and its cgroup."""
    vms = []
    for pdir in proc.iterdir():
        if not pdir.name.isdigit():
            continue
        try:
            argv = (pdir / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        args = [a.decode(errors="replace") for a in argv if a]
        row = vmm_of_process(args[0] if args else "", (_read(pdir / "comm", "") or "").strip())
        if row is None:
            continue
        vmm, _process, thread_re, flags = row
        pid = int(pdir.name)
        name = _vm_name(vmm, flags, args)
        uuid = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "-uuid"), None) if vmm == "qemu" else None
        vcpus, iothreads = [], []
        for t in _tasks(pdir):
            comm = _read(t / "comm", "") or ""
            m = re.fullmatch(thread_re, comm)
            if m:
                vcpus.append({"index": int(m.group(1)), "tid": int(t.name)})
            elif comm.startswith("IO ") or comm.startswith("iothread"):
                iothreads.append(int(t.name))
        vms.append({"name": name or (f"uuid-{uuid}" if uuid else f"{vmm}-{pid}"), "uuid": uuid, "pid": pid, "vmm": vmm, "source": f"{vmm}-cmdline", "vcpus": vcpus, "vhost_tids": [], "iothread_tids": iothreads, "cgroup": _read(pdir / "cgroup")})
    if vms:
        by_pid = {v["pid"]: v for v in vms}
        for pdir in proc.iterdir():
            if not pdir.name.isdigit():
                continue
            for t in _tasks(pdir):
                m = re.fullmatch(r"vhost-(\d+)", _read(t / "comm", "") or "")
                if m and int(m.group(1)) in by_pid:
                    by_pid[int(m.group(1))]["vhost_tids"].append(int(t.name))
    return sorted(vms, key=lambda v: v["pid"])


def allowed_cpus(status_text):
    """A /proc/PID/task/TID/status text's Cpus_allowed_list, or None."""
    for line in (status_text or "").splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip() or None
    return None


def vm_affinity(vms, proc=Path("/proc")):
    """Each VM thread's allowed CPUs (Cpus_allowed_list: sched_setaffinity,
    cpusets, libvirt's vcpupin and emulatorpin), {tid: CPU list}, for the
    threads not allowed every online CPU."""
    online = _read(Path("/sys/devices/system/cpu/online"))
    out = {}
    for vm in vms:
        pid = vm.get("pid")
        if pid is None:
            continue
        for t in _tasks(proc / str(pid)):
            cpus = allowed_cpus(_read(t / "status"))
            if cpus and cpus != online:
                out[t.name] = cpus
    return out


#: the kernel's CFS weight of each nice level, -20..19 (sched_prio_to_weight)
NICE_TO_WEIGHT = (88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916, 9548, 7620, 6100, 4904, 3906, 3121, 2501, 1991, 1586, 1277,
                  1024, 820, 655, 526, 423, 335, 272, 215, 172, 137, 110, 87, 70, 56, 45, 36, 29, 23, 18, 15)


def _cpu_cgroup(text: Optional[str]) -> Optional[Tuple[str, int]]:
    """(path, cgroup version) of the CPU controller's group in a
    /proc/PID/cgroup text: v1's `cpu` hierarchy, else v2's unified one."""
    v2 = None
    for line in (text or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if "cpu" in parts[1].split(","):
            return parts[2], 1
        if parts[0] == "0" and parts[1] == "":
            v2 = (parts[2], 2)
    return v2


def _cgroup_shares(path: str, version: int, root: Path) -> int:
    """A CPU cgroup's weight in the kernel's units (1024 = nice 0):
    v1 cpu.shares, v2 cpu.weight × 1024 / 100; 1024 when unreadable."""
    if version == 1:
        v = _int(_read(root / "cpu" / path.lstrip("/") / "cpu.shares"))
        return v if v else 1024
    w = _int(_read(root / path.lstrip("/") / "cpu.weight"))
    return w * 1024 // 100 if w else 1024


def _v2_cpu_group(path: str, root: Path) -> str:
    """The cgroup v2 group that schedules a task in `path`: the deepest
    ancestor reached through parents that enable the cpu controller for
    their children (below that, the kernel schedules in the ancestor)."""
    at = ""
    for part in [p for p in path.split("/") if p]:
        control = _read(root / at.lstrip("/") / "cgroup.subtree_control") or ""
        if "cpu" not in control.split():
            break
        at = f"{at}/{part}"
    return at or "/"


def sched_groups(proc: Path = Path("/proc"), cgroup_root: Path = Path("/sys/fs/cgroup")) -> dict:
    """The CFS scheduling group of every thread: its CPU cgroup when that is
    not the root, else its session's autogroup when autogroups are on (as
    the kernel decides), else none; with each group's weight. The replay
    schedules a group's threads as the kernel does: the group first gets
    its share of a CPU, then its threads share that."""
    enabled = (_read(proc / "sys" / "kernel" / "sched_autogroup_enabled") or "").strip() == "1"
    groups: Dict[str, dict] = {}
    for pdir in proc.iterdir():
        if not pdir.name.isdigit():
            continue
        cg = _cpu_cgroup(_read(pdir / "cgroup"))
        if cg and cg[1] == 2:
            cg = (_v2_cpu_group(cg[0], cgroup_root), 2)
        if cg and cg[0] not in ("/", ""):
            key, kind, shares = f"cgroup:{cg[0]}", "cgroup", _cgroup_shares(cg[0], cg[1], cgroup_root)
        elif enabled:
            m = re.match(r"/(autogroup-\d+) nice (-?\d+)", _read(pdir / "autogroup") or "")
            if not m:
                continue  # the root group: kernel threads, init
            nice = min(max(int(m.group(2)), -20), 19)
            key, kind, shares = m.group(1), "autogroup", NICE_TO_WEIGHT[nice + 20]
        else:
            continue
        tids = [int(t.name) for t in _tasks(pdir)]
        if not tids:
            continue  # exited while we looked
        g = groups.setdefault(key, {"kind": kind, "shares": shares, "tids": []})
        g["tids"].extend(tids)
    return {"autogroup_enabled": enabled, "groups": groups}


def merge_sched_groups(old: Optional[dict], new: dict) -> dict:
    """Snapshots of `sched_groups` taken during a capture, merged: a thread
    seen in any of them keeps the group it was last seen in."""
    if not old:
        return new
    seen: Dict[int, str] = {}
    shares: Dict[str, Tuple[str, int]] = {}
    for snap in (old, new):
        for key, g in (snap.get("groups") or {}).items():
            shares[key] = (g["kind"], g["shares"])
            for t in g["tids"]:
                seen[t] = key
    groups: Dict[str, dict] = {}
    for t, key in sorted(seen.items()):
        kind, sh = shares[key]
        groups.setdefault(key, {"kind": kind, "shares": sh, "tids": []})["tids"].append(t)
    return {"autogroup_enabled": new.get("autogroup_enabled", old.get("autogroup_enabled")), "groups": groups}


def libvirt_domains() -> dict:
    out = _run(["virsh", "list", "--all", "--name"])
    if out is None:
        return {"absent": "virsh not installed or not answering"}
    doms = []
    for name in (n.strip() for n in out.splitlines() if n.strip()):
        info = _run(["virsh", "dominfo", name]) or ""
        kv = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
        doms.append({"name": name, **{k.strip().lower().replace(" ", "_"): v.strip() for k, v in kv.items()}})
    return {"domains": doms}


def xen_host() -> dict:
    info = _run(["xl", "info"])
    if info is None:
        return {"absent": "xl not installed or not a Xen dom0"}
    kv = {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in info.splitlines() if ":" in line)}
    doms = []
    for line in (_run(["xl", "list"]) or "").splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 6:
            doms.append({"name": parts[0], "id": _int(parts[1]), "mem_mib": _int(parts[2]), "vcpus": _int(parts[3]), "state": parts[4]})
    mhz = kv.get("cpu_mhz")
    return {"xen_version": f"{kv.get('xen_major', '?')}.{kv.get('xen_minor', '?')}", "cpu_mhz": _int(str(mhz).split(".")[0]) if mhz else None, "cpu_hz": float(mhz) * 1e6 if mhz else None, "scheduler": kv.get("xen_scheduler"), "domains": doms}


def kernel_hz(release: str) -> Optional[int]:
    """CONFIG_HZ of the running kernel (its scheduler tick), from
    /proc/config.gz or /boot/config-RELEASE; None when neither says."""
    import gzip

    texts = []
    try:
        texts.append(gzip.open("/proc/config.gz", "rt").read())
    except OSError:
        pass
    texts.append(_read(Path(f"/boot/config-{release}")) or "")
    return next((v for v in (config_value(t, "CONFIG_HZ") for t in texts) if v is not None), None)


def config_value(config: str, key: str) -> Optional[int]:
    """An integer option's value in kernel .config text."""
    for line in config.splitlines():
        if line.startswith(key + "="):
            return _int(line.split("=", 1)[1].strip())
    return None


def host_snapshot() -> dict:
    cpus = _cpus()
    vms = vmm_vms()
    u = platform.uname()
    return {
        "hostname": u.node,
        "kernel": f"{u.system} {u.release} {u.version} {u.machine}",
        "kernel_hz": kernel_hz(u.release),
        "cpu": {"model": cpus["model"], "count": cpus["count"], "topology": cpus["topology"]},
        "cpufreq": cpus["cpufreq"] or {"absent": "no cpufreq driver"},
        "idle_states": cpus["idle_states"] or {"absent": "no cpuidle driver"},
        "clocksource": _read(Path("/sys/devices/system/clocksource/clocksource0/current_clocksource")),
        "tsc_hz": _tsc_hz(),
        "vms": vms,
        "affinity": vm_affinity(vms),
        "sched_groups": sched_groups(),
        "libvirt": libvirt_domains(),
        "xen": xen_host(),
        "taken": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


# ------------------------------------------------------------- capture


def _version(cmd: List[str]) -> Optional[str]:
    out = _run(cmd)
    return out.strip().splitlines()[0] if out else None


def parse_size(s: str) -> int:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?", s.strip(), re.I)
    if not m:
        raise CollectError(f"--max-size {s!r}: expected a size like 500M or 2G")
    return int(float(m.group(1)) * 1024 ** "_KMGT".index(m.group(2).upper() or "_"))


def _dir_size(p: Path) -> int:
    return sum(f.stat().st_size for f in p.iterdir() if f.is_file())


def _sha256(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as fh:
        for b in iter(lambda: fh.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def _monotonic_ns() -> int:
    """CLOCK_MONOTONIC in ns (time.clock_gettime_ns is 3.7+)."""
    if hasattr(time, "clock_gettime_ns"):
        return time.clock_gettime_ns(time.CLOCK_MONOTONIC)  # novermin (3.7+, checked above)
    return int(round(time.clock_gettime(time.CLOCK_MONOTONIC) * 1e9))


def _exit_code(status: int) -> int:
    """A wait status as Popen.returncode says it: the exit status, or minus
    the signal that ended the process (os.waitstatus_to_exitcode is 3.9+)."""
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


class Capture:
    """One capture run; use :func:`collect`."""

    def __init__(self, out: Path, preset: dict, events: List[str], duration: float, max_size: int, perf_stat: bool, perf_record: bool, use_xentrace: bool, buffer_kb: int, interval_ms: int):
        self.out, self.preset, self.events, self.duration, self.max_size = out, preset, events, duration, max_size
        self.perf_stat, self.perf_record, self.use_xentrace, self.buffer_kb, self.interval_ms = perf_stat, perf_record, use_xentrace, buffer_kb, interval_ms
        self.children: List[Tuple[str, subprocess.Popen]] = []
        self.rusage: Dict[str, float] = {}
        self.stop_reason = "duration"
        self.stopping = False
        self.perf_stat_start_ns: Optional[int] = None

    def _spawn(self, name: str, cmd: List[str], **kw) -> None:
        p = subprocess.Popen(cmd, cwd=self.out, stdin=subprocess.DEVNULL, stdout=kw.pop("stdout", subprocess.DEVNULL), stderr=subprocess.PIPE, start_new_session=True, **kw)
        self.children.append((name, p))

    def start(self, ftrace_events: List[str]) -> None:
        if ftrace_events and not self.perf_record:
            cmd = ["trace-cmd", "record", "-b", str(self.buffer_kb), "-o", "trace.dat"]
            for e in ftrace_events:
                cmd += ["-e", e]
            self._spawn("trace-cmd", cmd)
        if ftrace_events and self.perf_record:
            cmd = ["perf", "record", "-a", "-o", "perf.data"]
            for e in ftrace_events:
                cmd += ["-e", e]
            self._spawn("perf-record", cmd)
        if self.perf_stat and self.preset.get("perf_counters"):
            counters = [c for c in self.preset["perf_counters"] if not c.startswith("power/") or Path("/sys/bus/event_source/devices/power").is_dir()]
            cmd = ["perf", "stat", "-I", str(self.interval_ms), "-x", ",", "-A", "-a", "-o", "perf-stat.csv", "-e", ",".join(counters)]
            # perf stat's interval times are relative to its start; keep the
            # start on CLOCK_MONOTONIC (what trace-cmd's `local` clock tracks)
            self.perf_stat_start_ns = _monotonic_ns()
            self._spawn("perf-stat", cmd)
        if self.use_xentrace:
            mask = 0
            for c in self.preset.get("xentrace_classes", []):
                mask |= XEN_CLASSES[c]
            cmd = ["xentrace", "-D", "-e", hex(mask or 0x0FFFF000), "-S", "32", "-T", str(int(self.duration) + 1), "xentrace.bin"]
            self._spawn("xentrace", cmd)
        # trace-cmd needs a moment to set up buffers before the workload starts
        t0 = time.time()
        while time.time() - t0 < 1.0 and any(n == "trace-cmd" for n, _ in self.children):
            if (self.out / "trace.dat.cpu0").exists() or any(self.out.glob("trace.dat.cpu*")):
                break
            time.sleep(0.05)

    def wait(self, workload: Optional[subprocess.Popen], on_tick=None) -> None:
        deadline = time.time() + self.duration
        last_tick = 0.0
        while time.time() < deadline and not self.stopping:
            if on_tick and time.time() - last_tick > 0.5:
                on_tick()
                last_tick = time.time()
            if workload is not None and workload.poll() is not None:
                self.stop_reason = "command exited"
                break
            dead = [n for n, p in self.children if p.poll() is not None]
            if dead:
                self.stop_reason = f"{dead[0]} exited early"
                break
            if self.max_size and _dir_size(self.out) > self.max_size:
                self.stop_reason = "max-size reached"
                break
            time.sleep(0.1)
        if self.stopping:
            self.stop_reason = "signal"

    def stop(self) -> Dict[str, str]:
        errors = {}
        for name, p in self.children:
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGINT)
                except ProcessLookupError:
                    pass
        for name, p in self.children:
            try:
                _, status, ru = os.wait4(p.pid, 0) if p.returncode is None else (p.pid, 0, None)
                if ru is not None:
                    p.returncode = _exit_code(status)
                    self.rusage[name] = ru.ru_utime + ru.ru_stime
            except ChildProcessError:
                pass
            err = p.stderr.read().decode(errors="replace") if p.stderr else ""
            errors[name] = err
        return errors


def overruns(trace_cmd_stderr: str) -> int:
    return sum(int(m) for m in re.findall(r"^overrun:\s*(\d+)", trace_cmd_stderr, re.M))


def buffer_stats(report_stat: str) -> Dict[str, Dict[str, int]]:
    """Per-CPU ring-buffer statistics from `trace-cmd report --stat`:
    {cpu: {"overrun", "commit_overrun", "dropped_events"}}. trace-cmd 3.x
    stores them in trace.dat instead of printing them when recording; when
    several snapshots are stored the last (end of capture) wins."""
    per_cpu: Dict[str, Dict[str, int]] = {}
    cpu = None
    for line in report_stat.splitlines():
        line = line.strip()
        m = re.fullmatch(r"CPU:\s*(\d+)", line)
        if m:
            cpu = m.group(1)
            per_cpu[cpu] = {}
            continue
        m = re.fullmatch(r"(overrun|commit overrun|dropped events):\s*(\d+)", line) if cpu is not None else None
        if m:
            per_cpu[cpu][m.group(1).replace(" ", "_")] = int(m.group(2))
    return per_cpu


def tracedat_lost_events(path: Path) -> dict:
    """Lost events recorded in trace.dat's buffer statistics (None if unreadable)."""
    out = _run(["trace-cmd", "report", "--stat", "-i", str(path)], timeout=60)
    if out is None:
        return {"trace_cmd_overruns": None, "dropped": None, "per_cpu": None}
    per_cpu = buffer_stats(out)
    return {"trace_cmd_overruns": sum(c.get("overrun", 0) + c.get("commit_overrun", 0) for c in per_cpu.values()),
            "dropped": sum(c.get("dropped_events", 0) for c in per_cpu.values()), "per_cpu": per_cpu}


def collect(out: Path, preset_name: str = "kvm-sched", events: Optional[List[str]] = None, duration: float = 10.0, max_size: str = "1G", perf_stat: bool = True, perf_record: bool = False, use_xentrace: bool = False, buffer_kb: int = 8192, interval_ms: int = 100, force: bool = False, command: Optional[List[str]] = None, preset_dir: Path = PRESET_DIR, workload_popen=None) -> dict:
    """Run a capture into `out`; returns the manifest. Raises CollectError."""
    if os.geteuid() != 0:
        raise CollectError("recording needs root (tracefs, perf system-wide counters, xentrace)")
    if not (0 < duration <= 24 * 3600):  # NaN is refused too
        raise CollectError(f"--duration {duration}: must be between 0 and 86400 seconds")
    preset = load_preset(preset_name, preset_dir)
    wanted = validate_events(list(events) if events else list(preset.get("ftrace_events", [])))
    limit = parse_size(max_size)
    if buffer_kb < 1 or interval_ms < 10:
        raise CollectError(f"--buffer-kb must be >= 1 (got {buffer_kb}) and the perf interval >= 10 ms (got {interval_ms})")
    # what the host lacks is said before OUT is touched
    tfs = tracefs()
    present, missing = [], []
    if wanted:
        if tfs is None:
            raise CollectError("tracefs is not mounted (mount -t tracefs nodev /sys/kernel/tracing)")
        tool = "perf" if perf_record else "trace-cmd"
        if shutil.which(tool) is None:
            raise CollectError(f"{tool} is not installed")
        present, missing = split_available(wanted, tfs)
        if not present:
            raise CollectError(f"none of the requested events exist on this host (missing: {', '.join(missing)})")
    if (perf_stat and preset.get("perf_counters")) and shutil.which("perf") is None:
        perf_stat = False
        missing.append("perf (counters skipped)")
    if use_xentrace and shutil.which("xentrace") is None:
        raise CollectError("xentrace is not installed (needs a Xen dom0)")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise CollectError(f"{out}: exists and is not a directory")
    occupied = out.exists() and any(out.iterdir())
    if occupied and not force:
        raise CollectError(f"{out}: exists and is not empty; pass --force to overwrite")
    on = next(p for p in (out, *out.parents) if p.exists())
    free = shutil.disk_usage(on).free
    if free < limit + (64 << 20):
        raise CollectError(f"{out}: only {free >> 20} MiB free, need --max-size ({limit >> 20} MiB) plus 64 MiB")
    if occupied:
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    host = host_snapshot()
    (out / "host.json").write_text(json.dumps(host, indent=2))
    state = snapshot_state(tfs) if tfs else {}
    cap = Capture(out, preset, present, duration, limit, perf_stat, perf_record, use_xentrace, buffer_kb, interval_ms)
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    def on_signal(signum, frame):
        cap.stopping = True

    started = _dt.datetime.now(_dt.timezone.utc)
    t0 = time.time()
    self_ru0 = resource.getrusage(resource.RUSAGE_SELF)
    workload = None
    restore_problems: List[str] = []
    try:
        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
        cap.start(present)
        if command:
            # Own process group, so stopping it reaches everything it forked.
            workload = subprocess.Popen(command, stdin=subprocess.DEVNULL, start_new_session=True)
        elif workload_popen is not None:
            workload = workload_popen()
        def refresh_inventory():
            # VMs started during the capture (the lab, a migration target)
            # appear only later; merge them in while they run.
            seen = {v["pid"]: v for v in host["vms"]}
            for v in vmm_vms():
                if v["pid"] not in seen or len(v["vcpus"]) > len(seen[v["pid"]]["vcpus"]):
                    seen[v["pid"]] = v
            host["vms"] = sorted(seen.values(), key=lambda v: v["pid"])
            host["affinity"] = dict(host.get("affinity") or {}, **vm_affinity(host["vms"]))
            # threads started during the capture (the lab's, the tools')
            host["sched_groups"] = merge_sched_groups(host.get("sched_groups"), sched_groups())

        time.sleep(0.2 if workload is not None else 0)
        cap.wait(workload, on_tick=refresh_inventory)
        (out / "host.json").write_text(json.dumps(host, indent=2))
    finally:
        if workload is not None:
            _stop_group(workload, own_group=bool(command))
        errors = cap.stop()
        if tfs:
            restore_problems = restore_state(tfs, state)
        for s, h in old.items():
            signal.signal(s, h)
    elapsed = time.time() - t0
    self_ru1 = resource.getrusage(resource.RUSAGE_SELF)
    self_cpu_s = (self_ru1.ru_utime - self_ru0.ru_utime) + (self_ru1.ru_stime - self_ru0.ru_stime)
    # The data file the chosen backend must have written; without it the
    # capture failed, whatever the tools' exit codes said.
    primary = {"trace-cmd": "trace.dat", "perf-record": "perf.data", "xentrace": "xentrace.bin"}
    for name, p in cap.children:
        if name in primary and not ((out / primary[name]).is_file() and (out / primary[name]).stat().st_size > 0):
            tail = " | ".join(errors.get(name, "").strip().splitlines()[-2:]) or f"exit status {p.returncode}"
            raise CollectError(f"{name} wrote no {primary[name]} ({tail}); partial output left in {out}")
    files = []
    kinds = {"trace.dat": "tracedat", "perf.data": "perfdata", "perf-stat.csv": "perfstat", "xentrace.bin": "xentrace", "host.json": "host"}
    for name, kind in kinds.items():
        p = out / name
        if p.is_file() and p.stat().st_size > 0:
            files.append({"path": name, "kind": kind, "sha256": _sha256(p), "bytes": p.stat().st_size})
    cpu_s = sum(cap.rusage.values()) + self_cpu_s
    lost = tracedat_lost_events(out / "trace.dat") if (out / "trace.dat").is_file() else {"trace_cmd_overruns": 0}
    manifest = {
        "format": "cratrace-raw",
        "version": 1,
        "preset": preset["name"],
        "question": preset.get("question"),
        "events": {"requested": wanted, "recorded": present, "missing": missing},
        "not_captured": not_captured(perf_record),
        "started": started.isoformat(timespec="seconds"),
        "duration_s": round(elapsed, 3),
        "stop_reason": cap.stop_reason,
        "files": files,
        "tools": {"trace-cmd": _version(["trace-cmd", "--version"]) if not perf_record else None, "perf": _version(["perf", "--version"]), "xentrace": "present" if use_xentrace else None, "python": platform.python_version()},
        "cpu_hz": (host.get("xen") or {}).get("cpu_hz"),
        "perf_stat_start_monotonic_ns": cap.perf_stat_start_ns,
        "lost_events": lost,
        # Tools plus this process; pct is of the whole machine (all CPUs).
        "collector_overhead": {"cpu_s": round(cpu_s, 3), "tools_cpu_s": {k: round(v, 3) for k, v in cap.rusage.items()},
                               "pct_of_one_cpu": round(100 * cpu_s / max(elapsed, 1e-9), 2),
                               "pct": round(100 * cpu_s / max(elapsed, 1e-9) / (os.cpu_count() or 1), 2)},
        "tracing_state_restored": not restore_problems,
        "restore_problems": restore_problems,
        "tool_errors": {k: v.strip().splitlines()[-3:] for k, v in errors.items() if v.strip() and not files},
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return manifest


#: what `perf record` cannot take from a host, which trace-cmd does
PERF_RECORD_GAPS = [
    "trace_marker lines: perf cannot record ftrace:print (it records none), so the capture has no markers:"
    " no transaction throughput and no marker-delimited spin episodes; record without --perf-record for them"
]


def not_captured(perf_record: bool) -> List[str]:
    """What this capture's tools leave out that the model can use."""
    return list(PERF_RECORD_GAPS) if perf_record else []


def _stop_group(proc: subprocess.Popen, own_group: bool) -> None:
    """SIGTERM the workload's whole process group, SIGKILL it after 10 s."""
    if proc.poll() is not None and not own_group:
        return
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            # A workload we started in its own session leads its group; one
            # handed to us (workload_popen) may not, so signal just it.
            os.killpg(proc.pid, sig) if own_group else proc.send_signal(sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def lost_total(manifest: dict) -> int:
    """Events the kernel lost during the capture (overruns + dropped)."""
    lost = manifest.get("lost_events") or {}
    return (lost.get("trace_cmd_overruns") or 0) + (lost.get("dropped") or 0)


def build_zipapp(target: Path) -> None:
    import tempfile
    import zipapp

    with tempfile.TemporaryDirectory() as d:
        shutil.copy(__file__, Path(d) / "__main__.py")
        shutil.copytree(PRESET_DIR, Path(d) / "presets")
        zipapp.create_archive(d, target, interpreter="/usr/bin/env python3")


def split_events(values: Optional[List[str]]) -> Optional[List[str]]:
    """-e given several times and comma lists, as one list (None: none given)."""
    if not values:
        return None
    return [e.strip() for v in values for e in v.split(",") if e.strip()]


def check_args(preset: str, events: Optional[List[str]], duration: float, max_size: str, buffer_kb: int, preset_dir: Path = PRESET_DIR) -> None:
    """Refuse bad options before anything needs root or touches the host."""
    if not (0 < duration <= 24 * 3600):
        raise CollectError(f"--duration {duration}: must be between 0 and 86400 seconds")
    load_preset(preset, preset_dir)
    if events is not None:
        validate_events(events)
    parse_size(max_size)
    if buffer_kb < 1:
        raise CollectError(f"--buffer-kb must be >= 1 (got {buffer_kb})")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="cratrace-collect", description="Capture ftrace/perf/xentrace with a host snapshot (cratrace). Needs root; Python 3.6 or later.")
    ap.add_argument("-o", "--output", type=Path, help="raw capture directory to create")
    ap.add_argument("--preset", default="kvm-sched", help="question to capture for (see presets/)")
    ap.add_argument("-e", "--event", "--events", dest="events", action="append", metavar="EVENT",
                    help="ftrace event (system:event) to record instead of the preset's; repeatable, or a comma list")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds to capture (upper bound)")
    ap.add_argument("--max-size", default="1G", help="stop when the output exceeds this size (e.g. 500M, 2G)")
    ap.add_argument("--perf-record", action="store_true", help="record tracepoints with perf record instead of trace-cmd")
    ap.add_argument("--no-perf-stat", action="store_true")
    ap.add_argument("--xentrace", action="store_true", help="also run xentrace (Xen dom0)")
    ap.add_argument("--buffer-kb", type=int, default=8192)
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--build-zipapp", type=Path, help="write a one-file zipapp of this collector and exit")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="optional workload to run during the capture (after --)")
    a = ap.parse_args(argv)
    try:
        if a.build_zipapp:
            build_zipapp(a.build_zipapp)
            return 0
        if not a.output:
            raise CollectError("-o/--output is required")
        events = split_events(a.events)
        check_args(a.preset, events, a.duration, a.max_size, a.buffer_kb)
        cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
        m = collect(a.output, a.preset, events, a.duration, a.max_size, not a.no_perf_stat, a.perf_record, a.xentrace, a.buffer_kb, force=a.force, command=cmd or None)
    except CollectError as e:
        print(f"cratrace-collect: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # ^C before the capture's own handler was installed
        print("cratrace-collect: interrupted before capturing; nothing recorded", file=sys.stderr)
        return 130
    print(f"captured {len(m['files'])} files in {m['duration_s']} s ({m['stop_reason']}); missing events: {', '.join(m['events']['missing']) or 'none'}; "
          f"overruns: {m['lost_events']['trace_cmd_overruns']}; collector CPU {m['collector_overhead']['pct_of_one_cpu']}% of one CPU")
    for gap in m["not_captured"]:
        print(f"cratrace-collect: note: not captured: {gap}", file=sys.stderr)
    for problem in m["restore_problems"]:
        print(f"cratrace-collect: warning: tracing state not restored: {problem}", file=sys.stderr)
    if lost_total(m):
        print(f"cratrace-collect: warning: {lost_total(m)} events lost; raise --buffer-kb", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
