#!/usr/bin/env python3
"""cratrace host-side collector: capture ftrace/perf/xentrace plus host metadata.

Standard library only, so this one file (or a zipapp built by
``collectors/build_zipapp.py``) can be copied to a production host and run
with ``python3``. The full package's ``cratrace record`` calls the same
:func:`collect` function.

Output is a *raw capture directory* that ``cratrace import RAWDIR -o CAPTURE``
ingests: trace.dat / perf.data / perf-stat.csv / xentrace.bin, host.json and
manifest.json (``{"format": "cratrace-raw", "version": 1, ...}``).

Safety rules this module keeps, because it runs as root on real hosts:
user text never goes through a shell (argument lists only; event names and
paths are validated), the capture is bounded by duration and size, free disk
is checked first, SIGINT/SIGTERM stop the capture cleanly, and the ftrace
state (tracing_on, buffer_size_kb, current_tracer, enabled events, instances)
is snapshotted before and restored on every exit path.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import glob
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time

FORMAT = "cratrace-raw"
VERSION = 1
TRACEFS_CANDIDATES = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
EVENT_RE = re.compile(r"^[a-zA-Z0-9_]+(:[a-zA-Z0-9_*]+)?$")
PRESET_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
PERF_STAT_EVENTS = ("cycles", "instructions", "cache-misses")
# Xen trace main classes (xen/include/public/trace.h); "pm" lives in the
# hardware class (TRC_HW_PM is a subclass of TRC_HW).
XEN_CLASS_MASKS = {"gen": 0x0001F000, "sched": 0x0002F000, "dom0op": 0x0004F000, "hvm": 0x0008F000,
                   "mem": 0x0010F000, "pv": 0x0020F000, "shadow": 0x0040F000, "pm": 0x0080F000}
# Leave this much disk free beyond --max-size so the host keeps working.
DISK_RESERVE_BYTES = 256 * 1024 * 1024


class CollectError(Exception):
    """A capture could not run or finish; the message is one line for the user."""


# ---------------------------------------------------------------- validation

def validate_event(name: str) -> str:
    """Return ``name`` if it is a plausible ``system:event`` spec, else raise."""
    if not EVENT_RE.match(name):
        raise CollectError(f"invalid event name {name!r}: expected system:event (letters, digits, _ and * only)")
    return name


def validate_output_dir(path: str, force: bool) -> str:
    """Refuse odd paths and existing non-empty outputs (unless force)."""
    if not path or "\0" in path or "\n" in path:
        raise CollectError(f"invalid output path {path!r}")
    path = os.path.abspath(path)
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise CollectError(f"output {path} exists and is not a directory")
        if os.listdir(path) and not force:
            raise CollectError(f"output {path} exists and is not empty (use --force to overwrite)")
    return path


def presets_dir() -> str:
    """presets/ beside this file (works inside a zipapp too, see load_preset)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "presets")


def load_preset(name: str) -> dict:
    """Load a preset by name from presets/*.json (plain files or zipapp members)."""
    if not PRESET_NAME_RE.match(name):
        raise CollectError(f"invalid preset name {name!r}")
    path = os.path.join(presets_dir(), name + ".json")
    try:
        if os.path.exists(path):
            with open(path) as fh:
                return json.load(fh)
        # Inside a zipapp __file__ points into the archive: read via the loader.
        import pkgutil
        data = pkgutil.get_data(__package__ or "collectors", "presets/" + name + ".json")
        if data is not None:
            return json.loads(data)
    except (OSError, ValueError, ImportError) as e:
        raise CollectError(f"cannot read preset {name!r}: {e}") from None
    raise CollectError(f"unknown preset {name!r} (available: {', '.join(available_presets()) or 'none found'}; "
                       f"or pass --events)")


def available_presets() -> list[str]:
    return sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(presets_dir(), "*.json")))


# ------------------------------------------------------------------ tracefs

def find_tracefs() -> str | None:
    for d in TRACEFS_CANDIDATES:
        if os.path.isdir(os.path.join(d, "events")):
            return d
    return None


def _read(path: str, default: str | None = None) -> str | None:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return default


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def event_exists(tracefs: str, spec: str) -> bool:
    """True if tracefs has this event (``sys:*`` and ``sys`` mean the system dir)."""
    system, _, event = spec.partition(":")
    if not event or event == "*":
        return os.path.isdir(os.path.join(tracefs, "events", system))
    if "*" in event:
        return bool(glob.glob(os.path.join(tracefs, "events", system, event)))
    return os.path.isdir(os.path.join(tracefs, "events", system, event))


def split_events(tracefs: str, events: list[str]) -> tuple[list[str], list[str]]:
    present = [e for e in events if event_exists(tracefs, e)]
    missing = [e for e in events if e not in present]
    return present, missing


def snapshot_tracing(tracefs: str) -> dict:
    """What we must put back: tracing_on, buffer size, tracer, events, instances."""
    return {
        "tracing_on": (_read(os.path.join(tracefs, "tracing_on"), "") or "").strip(),
        "buffer_size_kb": (_read(os.path.join(tracefs, "buffer_size_kb"), "") or "").strip(),
        "current_tracer": (_read(os.path.join(tracefs, "current_tracer"), "") or "").strip(),
        "set_event": sorted(l for l in (_read(os.path.join(tracefs, "set_event"), "") or "").splitlines() if l),
        "instances": sorted(os.listdir(os.path.join(tracefs, "instances")))
        if os.path.isdir(os.path.join(tracefs, "instances")) else [],
    }


def restore_tracing(tracefs: str, snap: dict) -> list[str]:
    """Put the snapshot back; return what could not be restored (never raises)."""
    problems = []

    def attempt(what, fn):
        try:
            fn()
        except OSError as e:
            problems.append(f"{what}: {e.strerror or e}")

    now = snapshot_tracing(tracefs)
    for inst in set(now["instances"]) - set(snap["instances"]):
        attempt(f"instance {inst}", lambda inst=inst: os.rmdir(os.path.join(tracefs, "instances", inst)))
    if now["current_tracer"] != snap["current_tracer"] and snap["current_tracer"]:
        attempt("current_tracer", lambda: _write(os.path.join(tracefs, "current_tracer"), snap["current_tracer"]))
    if now["set_event"] != snap["set_event"]:
        def put_events():
            # Truncating set_event disables all; then re-enable the old ones.
            with open(os.path.join(tracefs, "set_event"), "w"):
                pass
            for ev in snap["set_event"]:
                with open(os.path.join(tracefs, "set_event"), "a") as fh:
                    fh.write(ev + "\n")
        attempt("set_event", put_events)
    if now["buffer_size_kb"] != snap["buffer_size_kb"] and snap["buffer_size_kb"].isdigit():
        attempt("buffer_size_kb", lambda: _write(os.path.join(tracefs, "buffer_size_kb"), snap["buffer_size_kb"]))
    if now["tracing_on"] != snap["tracing_on"] and snap["tracing_on"] in ("0", "1"):
        attempt("tracing_on", lambda: _write(os.path.join(tracefs, "tracing_on"), snap["tracing_on"]))
    return problems


# ------------------------------------------------------------ host snapshot

def _cpu_topology() -> list[dict]:
    out = []
    for path in sorted(glob.glob("/sys/devices/system/cpu/cpu[0-9]*"), key=lambda p: int(p.rsplit("cpu", 1)[1])):
        cpu = int(path.rsplit("cpu", 1)[1])
        core = _read(os.path.join(path, "topology/core_id"))
        pkg = _read(os.path.join(path, "topology/physical_package_id"))
        out.append({"cpu": cpu, "core": int(core) if core else None, "package": int(pkg) if pkg else None})
    return out


def _cpufreq() -> dict:
    out = {}
    for path in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cpufreq"):
        cpu = path.split("/")[-2][3:]

        def num(name):
            v = _read(os.path.join(path, name))
            return int(v) if v and v.strip().isdigit() else None
        avail = _read(os.path.join(path, "scaling_available_frequencies")) or ""
        out[cpu] = {"governor": (_read(os.path.join(path, "scaling_governor")) or "").strip() or None,
                    "available_frequencies_khz": [int(x) for x in avail.split() if x.isdigit()],
                    "cur_khz": num("scaling_cur_freq"), "min_khz": num("scaling_min_freq"),
                    "max_khz": num("scaling_max_freq")}
    return out


def _idle_states() -> dict:
    out = {}
    for path in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cpuidle"):
        cpu = path.split("/")[-2][3:]
        states = []
        for st in sorted(glob.glob(os.path.join(path, "state[0-9]*")), key=lambda p: int(p.rsplit("state", 1)[1])):
            lat = (_read(os.path.join(st, "latency")) or "").strip()
            states.append({"name": (_read(os.path.join(st, "name")) or "").strip(),
                           "latency_us": int(lat) if lat.isdigit() else None})
        out[cpu] = states
    return out


def _tsc_hz(cpuinfo: str) -> int | None:
    """TSC frequency from the kernel's own calibration, when it says so."""
    m = re.search(r"tsc: Refined TSC clocksource calibration: ([0-9.]+) MHz", _dmesg())
    if not m:
        m = re.search(r"tsc: Detected ([0-9.]+) MHz", _dmesg())
    if m:
        return int(round(float(m.group(1)) * 1e6))
    # Only trust cpuinfo's MHz when the TSC is invariant (constant_tsc).
    if " constant_tsc" in cpuinfo:
        m = re.search(r"^model name\s*:.*@\s*([0-9.]+)GHz", cpuinfo, re.M)
        if m:
            return int(round(float(m.group(1)) * 1e9))
    return None


def _dmesg() -> str:
    try:
        r = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=5)
        return r.stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def _cmdline(pid: int) -> list[str]:
    data = _read_bytes(f"/proc/{pid}/cmdline")
    return [a.decode(errors="replace") for a in data.split(b"\0")[:-1]] if data else []


def _read_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def _opt(argv: list[str], flag: str) -> str | None:
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a[len(flag) + 1:]
    return None


def _vm_name(argv: list[str]) -> str | None:
    """QEMU's -name accepts ``NAME`` or ``guest=NAME,debug-threads=on``."""
    raw = _opt(argv, "-name")
    if raw is None:
        return None
    for part in raw.split(","):
        if part.startswith("guest="):
            return part[6:]
    return raw.split(",")[0] or None


def qemu_inventory() -> list[dict]:
    """Every QEMU process: name, uuid, vCPU/vhost/iothread tids, cgroup."""
    vms = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        argv = _cmdline(pid)
        if not argv or not os.path.basename(argv[0]).startswith("qemu-system"):
            continue
        vcpus, iothreads = [], []
        for tdir in glob.glob(f"/proc/{pid}/task/*"):
            comm = (_read(os.path.join(tdir, "comm")) or "").strip()
            tid = int(os.path.basename(tdir))
            m = re.match(r"^CPU (\d+)/KVM$", comm)
            if m:
                vcpus.append({"index": int(m.group(1)), "tid": tid})
            elif comm.startswith("IO ") or comm.startswith("iothread"):
                iothreads.append(tid)
        # vhost workers are kernel threads named vhost-<qemu pid>.
        vhost = []
        for comm_path in glob.glob("/proc/[0-9]*/comm"):
            if (_read(comm_path) or "").strip() == f"vhost-{pid}":
                vhost.append(int(comm_path.split("/")[2]))
        cg = (_read(f"/proc/{pid}/cgroup") or "").strip().splitlines()
        vms.append({"name": _vm_name(argv), "uuid": _opt(argv, "-uuid"), "pid": pid, "source": "qemu-cmdline",
                    "vcpus": sorted(vcpus, key=lambda v: v["index"]), "vhost_tids": sorted(vhost),
                    "iothread_tids": sorted(iothreads), "cgroup": cg[-1].split(":", 2)[-1] if cg else None})
    return sorted(vms, key=lambda v: (v["name"] or "", v["pid"]))


def _run_tool(argv: list[str], timeout: float = 10) -> str:
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise CollectError(f"{argv[0]} {' '.join(argv[1:])} failed (exit {r.returncode}): "
                           f"{(r.stderr or r.stdout).strip().splitlines()[-1:] or ''}")
    return r.stdout


def libvirt_inventory() -> dict:
    """Domains from ``virsh list --all`` + ``virsh dominfo``, or {"absent": why}."""
    if shutil.which("virsh") is None:
        return {"absent": "virsh not found on PATH"}
    try:
        listing = _run_tool(["virsh", "list", "--all"])
    except (CollectError, OSError, subprocess.SubprocessError) as e:
        return {"absent": f"virsh list failed: {e}"}
    domains = []
    for line in listing.splitlines()[2:]:
        parts = line.split(None, 2)
        if len(parts) < 3:
            continue
        dom_id, name, state = parts
        info = {}
        try:
            for l in _run_tool(["virsh", "dominfo", name]).splitlines():
                k, sep, v = l.partition(":")
                if sep:
                    info[k.strip()] = v.strip()
        except (CollectError, OSError, subprocess.SubprocessError):
            pass
        domains.append({"id": None if dom_id == "-" else int(dom_id), "name": name, "state": state.strip(),
                        "uuid": info.get("UUID"), "vcpus": int(info["CPU(s)"]) if info.get("CPU(s)", "").isdigit()
                        else None, "max_memory_kib": int(info["Max memory"].split()[0])
                        if info.get("Max memory", "").split()[:1] and info["Max memory"].split()[0].isdigit() else None})
    return {"domains": domains}


def xen_inventory() -> dict:
    """``xl info`` (cpu_mhz etc.) and ``xl list`` domains, or {"absent": why}."""
    if shutil.which("xl") is None:
        return {"absent": "xl not found on PATH (not a Xen dom0)"}
    try:
        info_text = _run_tool(["xl", "info"])
        list_text = _run_tool(["xl", "list"])
    except (CollectError, OSError, subprocess.SubprocessError) as e:
        return {"absent": f"xl failed: {e}"}
    info = {}
    for line in info_text.splitlines():
        k, sep, v = line.partition(":")
        if sep:
            info[k.strip()] = v.strip()
    domains = []
    for line in list_text.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 4 and parts[1].isdigit():
            domains.append({"name": parts[0], "domid": int(parts[1]), "mem_mib": int(parts[2]), "vcpus": int(parts[3]),
                            "state": parts[4] if len(parts) > 4 else None})
    mhz = info.get("cpu_mhz", "")
    return {"cpu_mhz": float(mhz) if re.match(r"^[0-9.]+$", mhz) else None, "xen_version":
            ".".join(info[k] for k in ("xen_major", "xen_minor") if k in info) or None,
            "nr_cpus": int(info["nr_cpus"]) if info.get("nr_cpus", "").isdigit() else None, "domains": domains}


def host_snapshot() -> dict:
    cpuinfo = _read("/proc/cpuinfo", "") or ""
    m = re.search(r"^model name\s*:\s*(.*)$", cpuinfo, re.M)
    vms = qemu_inventory()
    libvirt = libvirt_inventory()
    xen = xen_inventory()
    for d in xen.get("domains", []):
        vms.append({"name": d["name"], "uuid": None, "pid": None, "source": "xl",
                    "vcpus": [{"index": i, "tid": None} for i in range(d["vcpus"])], "vhost_tids": [],
                    "iothread_tids": [], "cgroup": None, "domid": d["domid"]})
    known = {v["name"] for v in vms}
    for d in libvirt.get("domains", []):
        if d["name"] not in known:  # running domains already appear via their QEMU process
            vms.append({"name": d["name"], "uuid": d["uuid"], "pid": None, "source": "libvirt",
                        "vcpus": [{"index": i, "tid": None} for i in range(d["vcpus"] or 0)], "vhost_tids": [],
                        "iothread_tids": [], "cgroup": None})
    return {
        "kernel": os.uname().release,
        "hostname": socket.gethostname(),
        "cpu": {"model": m.group(1).strip() if m else None, "count": os.cpu_count(), "topology": _cpu_topology()},
        "cpufreq": _cpufreq(),
        "idle_states": _idle_states(),
        "clocksource": (_read("/sys/devices/system/clocksource/clocksource0/current_clocksource") or "").strip()
        or None,
        "tsc_hz": _tsc_hz(cpuinfo),
        "vms": vms,
        "libvirt": libvirt,
        "xen": xen,
    }


# ----------------------------------------------------------------- backends

def tool_version(tool: str) -> str | None:
    args = {"trace-cmd": ["trace-cmd", "--version"], "perf": ["perf", "--version"],
            "xentrace": ["xentrace", "--version"]}[tool]
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"(\d+\.\d+(\.\d+)?)", r.stdout + r.stderr)
    return m.group(1) if m else None


def rapl_events() -> list[str]:
    """RAPL energy events the power PMU offers (energy-pkg, energy-cores, ...)."""
    evdir = "/sys/bus/event_source/devices/power/events"
    if not os.path.isdir(evdir):
        return []
    return sorted(f"power/{n}/" for n in os.listdir(evdir) if n.startswith("energy-") and "." not in n)


def tracecmd_argv(out: str, events: list[str], buffer_kb: int) -> list[str]:
    argv = ["trace-cmd", "record", "-o", out, "-b", str(buffer_kb)]
    for e in events:
        argv += ["-e", e]
    return argv


def perf_record_argv(out: str, events: list[str]) -> list[str]:
    argv = ["perf", "record", "-a", "-q", "-o", out]
    for e in events:
        argv += ["-e", e]
    return argv


def perf_stat_argv(out: str, interval_ms: int, events: list[str]) -> list[str]:
    return ["perf", "stat", "-I", str(interval_ms), "-x,", "-A", "-a", "-e", ",".join(events), "-o", out]


def xentrace_argv(out: str, classes: list[str], buffer_kb: int, duration_s: float) -> list[str]:
    mask = 0
    for c in classes:
        if c not in XEN_CLASS_MASKS:
            raise CollectError(f"unknown xentrace class {c!r} (known: {', '.join(sorted(XEN_CLASS_MASKS))})")
        mask |= XEN_CLASS_MASKS[c]
    pages = max(1, buffer_kb // 4)  # xentrace -S counts 4 KiB pages per CPU
    return ["xentrace", "-e", hex(mask), "-S", str(pages), "-T", str(max(1, int(round(duration_s)))), out]


def parse_tracecmd_stats(text: str) -> dict:
    """Sum trace-cmd record's per-CPU 'overrun:' and 'dropped events:' lines."""
    per_cpu, cpu = {}, None
    for line in text.splitlines():
        line = line.strip()
        m = re.match(r"^CPU:\s*(\d+)$", line)
        if m:
            cpu = m.group(1)
            per_cpu.setdefault(cpu, {})
            continue
        m = re.match(r"^(overrun|dropped events|entries|commit overrun):\s*(\d+)$", line)
        if m and cpu is not None:
            per_cpu[cpu][m.group(1).replace(" ", "_")] = int(m.group(2))
    lost = sum(v.get("overrun", 0) + v.get("dropped_events", 0) for v in per_cpu.values())
    return {"lost": lost, "per_cpu": per_cpu}


# ---------------------------------------------------------------- the capture

def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _dir_bytes(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def preflight(backend: str, perf_stat: bool, out_parent: str, max_size: int) -> str | None:
    """Raise CollectError naming what is missing; return the tracefs path (ftrace backends)."""
    if os.geteuid() != 0:
        raise CollectError("capturing needs root (run with sudo)")
    tracefs = None
    if backend == "trace-cmd":
        if shutil.which("trace-cmd") is None:
            raise CollectError("trace-cmd not found on PATH (install trace-cmd)")
        tracefs = find_tracefs()
        if tracefs is None:
            raise CollectError("tracefs not mounted (mount -t tracefs nodev /sys/kernel/tracing)")
    if backend == "perf" or perf_stat:
        if shutil.which("perf") is None:
            raise CollectError("perf not found on PATH (install linux-perf / linux-tools)")
    if backend == "perf":
        tracefs = find_tracefs()
        if tracefs is None:
            raise CollectError("tracefs not mounted (perf record of tracepoints needs it)")
    if backend == "xentrace":
        if shutil.which("xentrace") is None:
            raise CollectError("xentrace not found on PATH (not a Xen dom0, or xen-utils missing)")
    free = shutil.disk_usage(out_parent).free
    if free < max_size + DISK_RESERVE_BYTES:
        raise CollectError(f"not enough free disk at {out_parent}: {free >> 20} MiB free, need --max-size "
                           f"{max_size >> 20} MiB + {DISK_RESERVE_BYTES >> 20} MiB reserve")
    return tracefs


class _StopFlag:
    """Set by SIGINT/SIGTERM; the capture loop polls it and stops cleanly."""

    def __init__(self):
        self.signal = None

    def __call__(self, signum, frame):
        self.signal = signum


def collect(out: str, *, preset: str | None = None, events: list[str] | None = None, backend: str | None = None,
            duration_s: float = 10.0, max_size: int = 512 << 20, buffer_kb: int | None = None,
            perf_stat: bool | None = None, perf_interval_ms: int = 100, force: bool = False,
            log=lambda msg: None, command: list[str] | None = None) -> dict:
    """Capture into ``out`` and return the manifest. Raises CollectError."""
    cfg = load_preset(preset) if preset else {}
    backend = backend or cfg.get("backend") or "trace-cmd"
    if backend not in ("trace-cmd", "perf", "xentrace"):
        raise CollectError(f"invalid backend {backend!r} (trace-cmd, perf, xentrace)")
    requested = list(events) if events else list(cfg.get("events", []))
    for e in requested:
        validate_event(e)
    if backend in ("trace-cmd", "perf") and not requested:
        raise CollectError("no events: pass --preset or --events")
    if duration_s <= 0:
        raise CollectError(f"--duration must be positive, got {duration_s}")
    buffer_kb = buffer_kb or cfg.get("buffer_kb", 4096)
    if perf_stat is None:  # the perf backend brings its counters along unless told otherwise
        perf_stat = bool(cfg.get("perf_stat", False)) or backend == "perf"
    out = validate_output_dir(out, force)
    parent = os.path.dirname(out)
    if not os.path.isdir(parent):
        raise CollectError(f"parent directory of output does not exist: {parent}")
    tracefs = preflight(backend, bool(perf_stat), parent, max_size)

    present, missing = (split_events(tracefs, requested) if tracefs else (requested, []))
    for e in missing:
        log(f"event {e} not available on this host: skipped")
    if backend in ("trace-cmd", "perf") and not present:
        raise CollectError(f"none of the requested events exist on this host: {', '.join(missing)}")

    tmp = out + ".partial"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    snap = snapshot_tracing(tracefs) if tracefs else None
    stop = _StopFlag()
    old_handlers = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    procs: dict[str, subprocess.Popen] = {}
    logs: dict[str, object] = {}
    files: list[tuple[str, str]] = []
    tools = {}
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    started = _dt.datetime.now(_dt.timezone.utc)
    t0 = time.monotonic()
    stop_reason = "duration"
    try:
        host = host_snapshot()
        with open(os.path.join(tmp, "host.json"), "w") as fh:
            json.dump(host, fh, indent=1)
        files.append(("host.json", "host"))

        def start(name, argv):
            logs[name] = open(os.path.join(tmp, f".{name}.log"), "w+")
            # Own session: a terminal ^C reaches us only; we stop children in order.
            procs[name] = subprocess.Popen(argv, stdout=logs[name], stderr=subprocess.STDOUT, cwd=tmp,
                                           start_new_session=True)

        if backend == "trace-cmd":
            tools["trace-cmd"] = tool_version("trace-cmd")
            start("trace-cmd", tracecmd_argv(os.path.join(tmp, "trace.dat"), present, buffer_kb))
            files.append(("trace.dat", "tracedat"))
        elif backend == "perf":
            tools["perf"] = tool_version("perf")
            start("perf-record", perf_record_argv(os.path.join(tmp, "perf.data"), present))
            files.append(("perf.data", "perfdata"))
        elif backend == "xentrace":
            tools["xentrace"] = tool_version("xentrace")
            classes = cfg.get("xentrace_classes") or ["sched", "hvm", "pm", "mem"]
            start("xentrace", xentrace_argv(os.path.join(tmp, "xentrace.bin"), classes, buffer_kb, duration_s))
            files.append(("xentrace.bin", "xentrace"))
        if perf_stat:
            tools.setdefault("perf", tool_version("perf"))
            start("perf-stat", perf_stat_argv(os.path.join(tmp, "perf-stat.csv"), perf_interval_ms,
                                              list(PERF_STAT_EVENTS) + rapl_events()))
            files.append(("perf-stat.csv", "perfstat"))

        while True:
            time.sleep(0.1)
            elapsed = time.monotonic() - t0
            if stop.signal is not None:
                stop_reason = signal.Signals(stop.signal).name
                break
            if elapsed >= duration_s:
                break
            if _dir_bytes(tmp) >= max_size:
                stop_reason = "max-size"
                log(f"--max-size reached ({max_size} bytes): stopping")
                break
            dead = [n for n, p in procs.items() if p.poll() is not None]
            if dead:
                n = dead[0]
                if procs[n].returncode != 0 or n != "xentrace":
                    logs[n].seek(0)
                    tail = logs[n].read().strip().splitlines()[-3:]
                    raise CollectError(f"{n} exited early (exit {procs[n].returncode}): {' | '.join(tail)}")
                break  # xentrace stops itself at -T
        duration = time.monotonic() - t0
        _stop_children(procs)
        for n, p in procs.items():
            if p.returncode not in (0, -signal.SIGINT, 130) and not (n == "perf-stat" and p.returncode in (1, 255)):
                logs[n].seek(0)
                tail = logs[n].read().strip().splitlines()[-3:]
                raise CollectError(f"{n} failed (exit {p.returncode}): {' | '.join(tail)}")
        lost = None
        stats = {}
        if "trace-cmd" in logs:
            logs["trace-cmd"].seek(0)
            stats = parse_tracecmd_stats(logs["trace-cmd"].read())
            lost = stats["lost"]
        if xen := host.get("xen"):
            if "cpu_mhz" in xen:
                tools["xen_cpu_mhz"] = xen["cpu_mhz"]
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
        ruc = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu_s = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime) + ruc.ru_utime + ruc.ru_stime
        manifest_files = []
        for path, kind in files:
            full = os.path.join(tmp, path)
            if not os.path.exists(full):
                raise CollectError(f"{path} was not written by its tool (see {tmp}/.*.log)")
            manifest_files.append({"path": path, "kind": kind, "sha256": _sha256(full),
                                   "bytes": os.path.getsize(full)})
        manifest = {
            "format": FORMAT, "version": VERSION, "files": manifest_files,
            "tools": {k: v for k, v in tools.items() if v is not None},
            "preset": preset, "backend": backend,
            "events": {"requested": requested, "missing": missing},
            "started": started.isoformat(), "duration_s": round(duration, 3), "stop_reason": stop_reason,
            "lost_events": lost, "lost_per_cpu": stats.get("per_cpu"),
            "collector_overhead": {"cpu_s": round(cpu_s, 3),
                                   "pct": round(100.0 * cpu_s / (duration * (os.cpu_count() or 1)), 3)},
            "xen_cpu_mhz": host["xen"].get("cpu_mhz") if isinstance(host.get("xen"), dict) else None,
            "command": command,
        }
        with open(os.path.join(tmp, "manifest.json"), "w") as fh:
            json.dump(manifest, fh, indent=1)
        for n, fh in logs.items():
            fh.close()
        for f in glob.glob(os.path.join(tmp, ".*.log")):
            os.unlink(f)
        # Atomic: the output appears only when complete.
        if os.path.exists(out):
            shutil.rmtree(out)
        os.rename(tmp, out)
        return manifest
    finally:
        _stop_children(procs, kill=True)
        for fh in logs.values():
            try:
                fh.close()
            except OSError:
                pass
        for s, h in old_handlers.items():
            signal.signal(s, h)
        if snap is not None:
            for p in restore_tracing(tracefs, snap):
                log(f"warning: could not restore tracing state: {p}")
        if os.path.exists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)


def _stop_children(procs: dict, kill: bool = False) -> None:
    """SIGINT each tool (they flush on it), wait, escalate if they hang."""
    for p in procs.values():
        if p.poll() is None:
            try:
                p.send_signal(signal.SIGKILL if kill else signal.SIGINT)
            except ProcessLookupError:
                pass
    for p in procs.values():
        try:
            p.wait(timeout=5 if kill else 60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


# --------------------------------------------------------------------- main

def parse_size(text: str) -> int:
    m = re.match(r"^(\d+)([KMG]?)i?B?$", text.strip(), re.I)
    if not m:
        raise CollectError(f"invalid size {text!r} (e.g. 500M, 2G)")
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2).upper()]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cratrace_collect", description=__doc__.split("\n\n")[0])
    p.add_argument("-o", "--output", required=False, help="raw capture directory to create")
    p.add_argument("-p", "--preset", help="preset name (" + ", ".join(available_presets()) + ")")
    p.add_argument("-e", "--events", help="comma-separated system:event list (overrides the preset's events)")
    p.add_argument("--backend", choices=("trace-cmd", "perf", "xentrace"))
    p.add_argument("-d", "--duration", type=float, default=10.0, help="seconds (default 10)")
    p.add_argument("--max-size", default="512M", help="stop when output reaches this size (default 512M)")
    p.add_argument("-b", "--buffer-kb", type=int, help="per-CPU buffer size in KiB")
    p.add_argument("--perf-stat", action="store_true", default=None, help="also record perf stat counters")
    p.add_argument("--perf-interval-ms", type=int, default=100)
    p.add_argument("--force", action="store_true", help="overwrite a non-empty output directory")
    p.add_argument("--host-only", action="store_true", help="print host.json to stdout and exit")
    p.add_argument("--list-presets", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def log(msg):
        print(f"cratrace-collect: {msg}", file=sys.stderr)
    try:
        if args.list_presets:
            for name in available_presets():
                print(f"{name}: {load_preset(name).get('question', '')}")
            return 0
        if args.host_only:
            json.dump(host_snapshot(), sys.stdout, indent=1)
            print()
            return 0
        if not args.output:
            raise CollectError("-o/--output is required")
        events = [e.strip() for e in args.events.split(",") if e.strip()] if args.events else None
        m = collect(args.output, preset=args.preset, events=events, backend=args.backend, duration_s=args.duration,
                    max_size=parse_size(args.max_size), buffer_kb=args.buffer_kb, perf_stat=args.perf_stat,
                    perf_interval_ms=args.perf_interval_ms, force=args.force, log=log,
                    command=sys.argv if argv is None else ["cratrace_collect"] + list(argv))
    except CollectError as e:
        log(f"error: {e}")
        return 2
    log(f"wrote {args.output}: {len(m['files'])} files, {m['duration_s']} s, lost events {m['lost_events']}, "
        f"collector CPU {m['collector_overhead']['pct']}%")
    return 1 if m["lost_events"] else 0


if __name__ == "__main__":
    sys.exit(main())
