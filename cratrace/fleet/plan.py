"""A sweep's plan: captures × policies × parameter grid × what-ifs,
expanded into runs, each with an id that names what it ran.

A run id is a hash of (the capture's fingerprint, the policy, every
setting, the what-if, the seed, cratrace's version): the same run asked
again, by this sweep or a later one, has the same id, so a finished run
(its ``runs/<id>/`` directory) is never run twice, and a change of any
input is a new run. Captures are named in the dataset by a label taken
from their paths (`capture_labels`), which is not part of the id.

A what-if is one alternative host, written as parts joined by ``;``:
``drop-vm=NAME``, ``add-vm=NAME[:COUNT]`` and any ``--set`` key
(``pcpus=8``, ``cap.web1=50``, ``weight.db=200``). ``@typical`` as a VM
name is each capture's typical VM (the one whose recorded CPU time is
the median), which is how ``--headroom N`` asks its question. Every
sweep also replays each host as recorded (the empty what-if).
"""

from __future__ import annotations

import glob
import hashlib
import itertools
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cratrace.errors import UsageError
from cratrace.fleet.source import is_url, local_path

#: the token for each capture's own policy (the one that produced it)
OWN_POLICY = "own"
#: each capture's typical VM, in a what-if
TYPICAL = "@typical"
#: settings that name a VM (after the prefix)
VM_PREFIXES = ("class.", "elasticity.", "affinity.", "cap.", "weight.", "power.")


@dataclass(frozen=True)
class WhatIf:
    """One alternative host: its text as given, VMs dropped, copies added,
    settings."""

    text: str
    drop_vms: tuple[str, ...] = ()
    add_vms: tuple[tuple[str, int], ...] = ()
    sets: tuple[tuple[str, str], ...] = ()

    def vms_named(self) -> set[str]:
        named = set(self.drop_vms) | {n for n, _ in self.add_vms}
        named |= {k.split(".", 1)[1] for k, _ in self.sets if k.startswith(VM_PREFIXES)}
        return named

    def resolved(self, typical: str | None) -> WhatIf:
        """`@typical` replaced by the capture's typical VM."""
        if typical is None:
            return self

        def sub(name: str) -> str:
            return typical if name == TYPICAL else name

        sets = tuple((k.split(".", 1)[0] + "." + typical, v) if k.startswith(VM_PREFIXES) and k.split(".", 1)[1] == TYPICAL else (k, v) for k, v in self.sets)
        return WhatIf(self.text, tuple(sub(n) for n in self.drop_vms), tuple((sub(n), c) for n, c in self.add_vms), sets)

    @property
    def added_copies(self) -> int:
        return sum(c for _, c in self.add_vms)


AS_RECORDED = WhatIf("")


def parse_what_if(spec: str) -> WhatIf:
    """`drop-vm=a;add-vm=b:2;pcpus=4` → a WhatIf (settings checked)."""
    from cratrace.replay.settings import split_settings
    from cratrace.replay.whatif import parse_add_vm

    drops: list[str] = []
    adds: list[tuple[str, int]] = []
    sets: dict[str, str] = {}
    parts = [p.strip() for p in spec.split(";") if p.strip()]
    if not parts:
        raise UsageError(f"--what-if {spec!r}: expected drop-vm=NAME, add-vm=NAME[:COUNT] or a --set key=value, several joined by ';'")
    for part in parts:
        key, eq, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not value:
            raise UsageError(f"--what-if {spec!r}: {part!r} is not key=value (drop-vm=NAME, add-vm=NAME[:COUNT], pcpus=N, cap.VM=PCT, ...)")
        if key == "drop-vm":
            drops.append(value)
        elif key == "add-vm":
            try:
                adds.append(parse_add_vm(value))
            except UsageError as e:
                raise UsageError(f"--what-if {spec!r}: {e}") from None
        else:
            sets[key] = value
    try:
        split_settings(sets)
    except UsageError as e:
        raise UsageError(f"--what-if {spec!r}: {e}") from None
    return WhatIf(";".join(parts), tuple(drops), tuple(adds), tuple(sorted(sets.items())))


def headroom_what_ifs(n: int) -> list[WhatIf]:
    """`--headroom N`: 1 to N more copies of each capture's typical VM."""
    if not 1 <= n <= 64:
        raise UsageError(f"--headroom {n}: expected a number of copies from 1 to 64")
    return [parse_what_if(f"add-vm={TYPICAL}:{k}") for k in range(1, n + 1)]


def parse_sets(items: list[str], option: str = "--set") -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        k, eq, v = item.partition("=")
        if not eq or not k.strip():
            raise UsageError(f"{option} {item!r}: expected key=value")
        out[k.strip()] = v.strip()
    return out


def parse_grid(items: list[str]) -> list[dict[str, str]]:
    """`key=v1,v2` options → every combination, as settings (a key's
    values in the order given; keys in the order given)."""
    axes: dict[str, list[str]] = {}
    for item in items:
        k, eq, vs = item.partition("=")
        values = [v.strip() for v in vs.split(",") if v.strip()]
        if not eq or not k.strip() or not values:
            raise UsageError(f"--grid {item!r}: expected key=v1,v2,... (e.g. balance_k=1.05,1.1,1.2)")
        if k.strip() in axes:
            raise UsageError(f"--grid {k.strip()}: given twice; list all its values in one --grid")
        axes[k.strip()] = list(dict.fromkeys(values))
    keys = list(axes)
    return [dict(zip(keys, combo)) for combo in itertools.product(*axes.values())] if keys else [{}]


def expand_captures(refs: list[str], globs: list[str]) -> list[str]:
    """Capture references: as given (a local directory without a
    capture.json but with captures in it stands for them), then each
    glob's matches (local or fsspec), in sorted order; duplicates once."""
    out: list[str] = []
    for ref in refs:
        path = local_path(ref)
        if path is None:
            out.append(ref)
            continue
        if not path.exists():
            raise UsageError(f"{ref}: no such capture (a capture directory, a directory of them, or a URL)")
        if path.is_dir() and not (path / "capture.json").is_file():
            inner = sorted(p for p in path.iterdir() if (p / "capture.json").is_file())
            if not inner:
                raise UsageError(f"{ref}: not a capture (no capture.json) and holds none")
            out += [str(p.resolve()) for p in inner]
        else:
            out.append(str(path.resolve()))
    for pattern in globs:
        if is_url(pattern) and not pattern.startswith("file://"):
            import fsspec

            fs, root = fsspec.core.url_to_fs(pattern)
            proto = pattern.split("://", 1)[0]
            found = [f"{proto}://{p}" for p in sorted(fs.glob(root))]
        else:
            pat = pattern[len("file://"):] if pattern.startswith("file://") else pattern
            found = [str(Path(p).resolve()) for p in sorted(glob.glob(pat)) if Path(p).is_dir()]
        if not found:
            raise UsageError(f"--glob {pattern!r}: matches no capture directory")
        out += found
    if not out:
        raise UsageError("no captures: give capture directories (or --glob 'hosts/*/capture')")
    return list(dict.fromkeys(out))


_UNSAFE = re.compile(r"[^A-Za-z0-9._+@-]+")


def capture_labels(refs: list[str]) -> dict[str, str]:
    """A short, unique, file-name-safe label per capture: the last part of
    its path that tells it from the others (`hosts/h1/capture` and
    `hosts/h2/capture` → `h1`, `h2`)."""
    parts = [[_UNSAFE.sub("_", p) for p in re.split(r"[/\\]+", r.split("://", 1)[-1].rstrip("/")) if p] or ["capture"] for r in refs]
    # drop the trailing parts every path shares (while each keeps one)
    while len(parts) > 1 and all(len(p) > 1 for p in parts) and len({p[-1] for p in parts}) == 1:
        parts = [p[:-1] for p in parts]
    labels: dict[str, str] = {}
    for ref, p in zip(refs, parts):
        for k in range(1, len(p) + 1):
            label = "_".join(p[-k:])
            if sum(1 for q in parts if q[-k:] == p[-k:]) == 1:
                break
        labels[ref] = label
    seen: dict[str, int] = {}
    for ref in refs:  # the same path twice, or paths that differ only in unsafe characters
        n = seen.get(labels[ref], 0)
        seen[labels[ref]] = n + 1
        if n:
            labels[ref] = f"{labels[ref]}~{n}"
    return labels


@dataclass(frozen=True)
class RunSpec:
    """One replay of a sweep, everything a worker needs (plain data)."""

    run_id: str
    capture: str
    label: str
    host: str
    fingerprint: str
    policy: str
    own_policy: bool
    params: dict[str, str]
    what_if: str
    drop_vms: tuple[str, ...]
    add_vms: tuple[tuple[str, int], ...]
    whatif_sets: dict[str, str]
    seed: int
    source_of: dict[str, str] = field(default_factory=dict)

    @property
    def settings(self) -> dict[str, str]:
        """What the replay is given as --set: the run's parameters, then
        its what-if's settings."""
        return {**self.params, **self.whatif_sets}

    def to_dict(self) -> dict:
        return asdict(self)


def run_id(fingerprint: str, policy: str, settings: dict[str, str], drop_vms, add_vms, seed: int, version: str) -> str:
    doc = {"capture": fingerprint, "policy": policy, "settings": dict(sorted(settings.items())), "drop_vm": sorted(drop_vms), "add_vm": [list(a) for a in add_vms], "seed": seed, "cratrace": version}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:20]


def recording_id(fingerprint: str, version: str) -> str:
    """The id of a capture's recorded figures (its scan)."""
    return hashlib.sha256(json.dumps({"capture": fingerprint, "recording": True, "cratrace": version}, sort_keys=True).encode()).hexdigest()[:20]


@dataclass
class Plan:
    """What a sweep asks, before any capture is looked at."""

    policies: list[str]
    sets: dict[str, str]
    grid: list[dict[str, str]]
    what_ifs: list[WhatIf]
    seed: int = 0

    def __post_init__(self) -> None:
        from cratrace.replay.settings import split_settings

        if not 0 <= self.seed < 2**63:
            raise UsageError(f"--seed {self.seed}: expected a whole number from 0 to 2^63 - 1")
        for combo in self.grid:
            split_settings({**self.sets, **combo})  # a bad key or value, before any work
        self.policies = list(dict.fromkeys(self.policies or [OWN_POLICY]))
        texts = [w.text for w in self.what_ifs]
        self.what_ifs = [AS_RECORDED] + [w for i, w in enumerate(self.what_ifs) if w.text and w.text not in texts[:i]]

    @property
    def param_keys(self) -> list[str]:
        """Every setting a run of this sweep may carry, sorted."""
        return sorted({*self.sets, *(k for c in self.grid for k in c), *(k for w in self.what_ifs for k, _ in w.sets)})

    def runs_for(self, ref: str, label: str, scan: dict, version: str) -> tuple[list[RunSpec], list[str]]:
        """The runs of one scanned capture, and a note per what-if left
        out because it names a VM this capture lacks."""
        vms = set(scan["vms"])
        own = scan["own_policy"]
        runs: dict[str, RunSpec] = {}
        notes: list[str] = []
        for policy in self.policies:
            name = own if policy == OWN_POLICY else policy
            for combo in self.grid:
                params = {**self.sets, **combo}
                for w in self.what_ifs:
                    wr = w.resolved(scan.get("typical_vm"))
                    missing = sorted(wr.vms_named() - vms) if not (TYPICAL in w.text and scan.get("typical_vm") is None) else [TYPICAL]
                    missing += sorted(k.split(".", 1)[1] for k in params if k.startswith(VM_PREFIXES) and k.split(".", 1)[1] not in vms)
                    if missing:
                        note = f"{w.text or 'as recorded'}: not run on {label} (no VM {missing[0]})"
                        if note not in notes:
                            notes.append(note)
                        continue
                    settings = {**params, **dict(wr.sets)}
                    rid = run_id(scan["fingerprint"], name, settings, wr.drop_vms, wr.add_vms, self.seed, version)
                    source_of = {f"{n}+{k}": n for n, c in wr.add_vms for k in range(1, c + 1)}
                    runs.setdefault(rid, RunSpec(rid, ref, label, scan.get("host") or label, scan["fingerprint"], name, name == own, params, w.text, wr.drop_vms, wr.add_vms, dict(wr.sets), self.seed, source_of))
        return list(runs.values()), notes
