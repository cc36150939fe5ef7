"""Run a scenario and write its trace plus the ground-truth sidecar.

``synthesize("kvm-heavy-spin", "spin.dat", seed=1, overrides={"vms": "3"})``
writes ``spin.dat`` (trace.dat v7, zstd by default) and
``spin.dat.truth.json``. The truth holds the scenario name and version, the
seed, every parameter in force, the writer settings, per-event counts (what
``trace-cmd report`` must show) and the scenario's own ground truth
(docs/synth.md describes each key). Both files are written to temporary
names and renamed into place; existing files are kept unless ``force``.

With ``raw=True`` ``out`` is a directory laid out like a ``cratrace
record`` raw capture (``manifest.json``, ``host.json`` with the VM
inventory, ``trace.dat``, ``trace.dat.truth.json``), so ``cratrace import
DIR`` names VMs and vCPUs exactly as the truth does.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from json.encoder import encode_basestring_ascii as _encode_str
from pathlib import Path
from typing import Any, Mapping

from cratrace import atomic
from cratrace.errors import CratraceError, UsageError
from cratrace.synth.episodes import SpilledEpisodes
from cratrace.synth.scenarios import SCENARIOS
from cratrace.synth.scenarios._common import streaming_to
from cratrace.synth.tracedat_writer import FILE_OPTIONS, TraceDatStream, write_tracedat

TRUTH_SCHEMA = 1


def resolve_params(name: str, overrides: Mapping[str, str]) -> dict[str, Any]:
    mod = scenario(name)
    params = {k: p.default for k, p in mod.PARAMS.items()}
    for key, text in overrides.items():
        if key not in mod.PARAMS:
            raise UsageError(f"--set {key}=...: {name} has no parameter {key!r} (has: {', '.join(mod.PARAMS)})")
        params[key] = mod.PARAMS[key].parse(key, text)
    for key, val in params.items():
        if not isinstance(val, (int, float)) or isinstance(val, bool):
            continue
        # NaN and infinity parse as floats; a negative count or growth
        # would generate nonsense rather than fail
        zero_ok = key in getattr(mod, "ALLOW_ZERO", ())
        if not math.isfinite(val) or val < 0 or (val == 0 and not zero_ok):
            raise UsageError(f"--set {key}={val}: must be a finite number {'>= 0' if zero_ok else '> 0'}")
    check = getattr(mod, "check", None)
    if check:
        check(params)
    return params


def is_xentrace(mod) -> bool:
    """Whether a scenario writes a xentrace file (else a trace.dat)."""
    return getattr(mod, "FORMAT", "tracedat") == "xentrace"


def scenario(name: str):
    if name not in SCENARIOS:
        raise UsageError(f"unknown scenario {name!r} (known: {', '.join(SCENARIOS)})")
    return SCENARIOS[name]


def synthesize(
    name: str,
    out: str | os.PathLike,
    *,
    seed: int = 0,
    overrides: Mapping[str, str] | None = None,
    force: bool = False,
    version: int = 7,
    compression: str = "zstd",
    raw: bool = False,
) -> dict[str, Any]:
    """Generate scenario ``name`` into ``out`` and ``out.truth.json``; return the truth."""
    if raw:
        return _synthesize_raw(name, Path(out), seed=seed, overrides=overrides, force=force,
                               version=version, compression=compression)
    out = Path(out)
    if out.is_dir():
        raise UsageError(f"-o {out}: is a directory; give a file name")
    truth_path = out.with_name(out.name + ".truth.json")
    mod = scenario(name)
    params = resolve_params(name, overrides or {})
    # both outputs locked for the whole command and checked before the
    # scenario runs (issue 42); --force replaces only a synth's own files
    with atomic.Destination(out, force=force, ours=_is_synth_trace, what="synthetic trace", directory=False) as dest, \
            atomic.Destination(truth_path, force=force, ours=_is_truth, what="truth file", directory=False) as truth_dest:
        tmp = dest.temp()
        if is_xentrace(mod):
            truth = _write_xentrace(mod, mod.generate(params, seed), tmp, out, name, seed, params)
        else:
            # the scenario's Builder writes each event to the stream as it
            # is emitted (issue #47): pages are spooled beside the
            # temporary file, and the file is assembled around them once
            # the scenario is done
            try:
                with TraceDatStream(tmp, version=version, compression=compression, overwrite=True) as stream:  # type: ignore[arg-type]
                    with streaming_to(stream):
                        res = mod.generate(params, seed)
                    writer = dict(version=version, compression=compression, **res.writer)
                    if res.events is stream:
                        extra = set(res.writer) - set(FILE_OPTIONS)
                        if extra:
                            raise CratraceError(f"scenario {name}: writer options {sorted(extra)} must be known before its events")
                        stream.finish(**res.writer)
                        counts, total = stream.counts(), len(stream)
                    else:  # a scenario that keeps its own list of events
                        write_tracedat(tmp, res.events, overwrite=True, **writer)
                        counts, total = _counts(res.events), len(res.events)
            except OSError as e:
                raise CratraceError(f"cannot write {out}: {e.strerror or e}") from None
            truth = dict(
                schema=TRUTH_SCHEMA,
                scenario=name,
                scenario_version=mod.VERSION,
                seed=seed,
                params=params,
                file=dict(version=version, compression=compression, cpus=writer.get("cpus"),
                          long_size=8, endian="little", page_size=4096, trace_clock="local"),
                event_counts=dict(sorted(counts.items())),
                total_events=total,
                **res.truth,
            )
        truth_tmp = truth_dest.temp()
        try:
            _dump_json(truth_tmp, truth)
        except OSError as e:
            raise CratraceError(f"cannot write {truth_path}: {e.strerror or e}") from None
        dest.commit(tmp)
        try:
            truth_dest.commit(truth_tmp)
        except BaseException:
            out.unlink(missing_ok=True)  # never leave a trace without its truth
            raise
    return truth


def _is_truth(p: Path) -> bool:
    """A truth file `synth` wrote: it opens with its schema and scenario
    (read from its head only: a long trace's truth is tens of MB)."""
    try:
        with open(p, "rb") as f:
            head = f.read(256)
    except OSError:
        return False
    return head.startswith(b'{\n "schema": %d,\n "scenario": ' % TRUTH_SCHEMA)


def _is_synth_trace(p: Path) -> bool:
    """A trace `synth` wrote: a file beside its truth file."""
    p = Path(p)
    return p.is_file() and _is_truth(p.with_name(p.name + ".truth.json"))


def _is_raw_synth(p: Path) -> bool:
    """A raw capture directory (`synth --raw` or `cratrace record`), or
    an empty directory."""
    p = Path(p)
    if not p.is_dir() or p.is_symlink():
        return False
    try:
        if not any(p.iterdir()):
            return True
        return json.loads((p / "manifest.json").read_text()).get("format") == "cratrace-raw"
    except (OSError, ValueError, AttributeError):
        return False


def _dump_json(path: Path, obj: Any) -> None:
    """``json.dumps(obj, indent=1)`` and a newline into ``path``, written
    as it is encoded: a long trace's truth lists every spin episode, and
    the text whole would be another copy of it in memory. A top-level
    list of flat dicts (the episodes, or episodes on disk:
    `cratrace.synth.episodes`) is formatted here, the same text at ~5x
    the speed of json's Python encoder (which ``indent`` forces)."""
    with open(path, "w", buffering=1 << 20) as f:
        if not isinstance(obj, dict) or not obj:
            f.write(json.dumps(obj, indent=1) + "\n")
            return
        f.write("{")
        for i, (key, value) in enumerate(obj.items()):
            f.write(("," if i else "") + "\n " + json.dumps(key) + ": ")
            if isinstance(value, SpilledEpisodes) and not value:
                value = []
            if isinstance(value, SpilledEpisodes) or isinstance(value, list) and value and all(type(d) is dict and d and _flat(d) for d in value):
                f.write("[")
                keys: dict[str, str] = {}
                for j, d in enumerate(value):
                    f.write((",\n  {\n" if j else "\n  {\n") + ",\n".join(
                        f"   {keys.get(k) or keys.setdefault(k, json.dumps(k))}: {_scalar(v)}" for k, v in d.items()) + "\n  }")
                f.write("\n ]")
            else:
                f.write(json.dumps(value, indent=1).replace("\n", "\n "))
        f.write("\n}\n")


def _flat(d: dict) -> bool:
    return all(type(k) is str and (v is None or type(v) in (int, str, bool)) for k, v in d.items())


def _scalar(v: Any) -> str:
    """A JSON scalar as json.dumps writes it (ints, strs, bools, None)."""
    if v is True:
        return "true"
    if v is False:
        return "false"
    if v is None:
        return "null"
    if type(v) is int:
        return int.__repr__(v)
    return _encode_str(v)


def _write_xentrace(mod, res, tmp: Path, out: Path, name: str, seed: int, params: dict[str, Any]) -> dict[str, Any]:
    """A xentrace scenario: the binary file (per-pCPU windows of 64
    records, as xentrace writes them) into `tmp`, and its truth."""
    try:
        res.writer.write(str(tmp), window_records=64)
    except OSError as e:
        raise CratraceError(f"cannot write {out}: {e.strerror or e}") from None
    counts = res.record_counts()
    return dict(schema=TRUTH_SCHEMA, scenario=name, scenario_version=mod.VERSION, seed=seed, params=params,
                file=dict(format="xentrace", cpus=res.pcpus, cpu_hz=res.truth["cpu_hz"], window_records=64),
                record_counts=counts, total_records=sum(counts.values()), **res.truth)


def _counts(events) -> dict[str, int]:
    c: dict[str, int] = {}
    for e in events:
        c[e.name] = c.get(e.name, 0) + 1
    return c


def _synthesize_raw(name: str, out: Path, *, seed: int, overrides, force: bool, version: int, compression: str) -> dict[str, Any]:
    if out.exists() and not out.is_dir():
        raise UsageError(f"-o {out}: exists and is not a directory (a raw capture is a directory)")
    with atomic.Destination(out, force=force, ours=_is_raw_synth, what="raw capture") as dest:
        tmp = dest.temp()
        xen = is_xentrace(scenario(name))
        data_name, data_kind = ("xentrace.bin", "xentrace") if xen else ("trace.dat", "tracedat")
        truth = synthesize(name, tmp / data_name, seed=seed, overrides=overrides, force=True,
                           version=version, compression=compression)
        host = dict(hostname=f"synth-{name}", kernel="6.18.44 (synthetic)", clocksource="tsc",
                    cpu=dict(model="synthetic", topology=None), tsc_hz=None, cpu_hz=truth.get("cpu_hz"), vms=truth["vms"])
        if xen:  # as the collector writes a dom0's host.json: domains from `xl list`, no QEMU processes
            doms = [dict(name="Domain-0", id=0, vcpus=1, state="r-----")]
            doms += [dict(name=v["name"], id=v["dom"], vcpus=v["vcpus"], state="-b----") for v in truth["vms"]]
            host.update(vms=[], xen=dict(xen_version="4.17 (synthetic)", cpu_mhz=truth["cpu_hz"] // 1_000_000,
                                         cpu_hz=float(truth["cpu_hz"]), scheduler="credit", domains=doms))
        # the generator's host scheduler and its threads' affinity, as a
        # collector records a host's (the replay's baseline follows them)
        host.update(truth.get("host") or {})
        (tmp / "host.json").write_text(json.dumps(host, indent=1) + "\n")
        files = []
        for fname, kind in ((data_name, data_kind), ("host.json", "host")):
            with open(tmp / fname, "rb") as f:  # not read whole: a trace can be gigabytes
                digest = hashlib.file_digest(f, "sha256").hexdigest()
            files.append(dict(path=fname, kind=kind, sha256=digest, bytes=(tmp / fname).stat().st_size))
        manifest = dict(format="cratrace-raw", version=1, preset=f"synth:{name}",
                        question=f"synthetic scenario {name} (seed {seed}); truth in {data_name}.truth.json",
                        files=files, tools=dict(synth=f"cratrace synth {name} v{truth['scenario_version']}"))
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
        dest.commit(tmp)
    return truth


