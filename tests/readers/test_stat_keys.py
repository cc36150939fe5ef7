"""The trace.dat reader's stats keys are declared once, in Rust
(readers/src/tracedat/stats.rs), and exported as `_native.tracedat_stats`;
the Python side reads a summary's `stats` only through those names (issue
46). These tests fail when one side renames a key the other still uses."""

from __future__ import annotations

import ast
from pathlib import Path

from cratrace import _native

ROOT = Path(__file__).resolve().parents[2]
EXPORTED = _native.tracedat_stats
KEYS = EXPORTED.ALL
IDENTS = {name: getattr(EXPORTED, name) for name in dir(EXPORTED) if name.isupper() and name != "ALL"}


def _python_files() -> list[Path]:
    here = Path(__file__).resolve()
    return [p for d in ("cratrace", "tests") for p in sorted((ROOT / d).rglob("*.py")) if p.resolve() != here]


def _reads_of_stats(tree: ast.AST):
    """(node, how) of each place the code names a stats key: an attribute
    of `tracedat_stats`, or a string read from (or put in) something it
    calls stats."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, (ast.Name, ast.Attribute)):
            owner = node.value.attr if isinstance(node.value, ast.Attribute) else node.value.id
            if owner == "tracedat_stats":
                yield node, ("attr", node.attr)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
            key = node.args[0]
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and "stats" in ast.unparse(node.func.value):
                yield node, ("literal", key.value)
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            if "stats" in ast.unparse(node.value):
                yield node, ("literal", node.slice.value)
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value == "stats" and isinstance(v, ast.Dict):
                    for inner in v.keys:
                        if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                            yield inner, ("literal", inner.value)


def test_every_key_is_exported_once_under_its_constants_name():
    assert KEYS, "the binding exports no stats keys"
    assert sorted(IDENTS.values()) == sorted(KEYS)
    for ident, key in IDENTS.items():
        assert ident == key.upper()
        assert KEYS[key].strip(), f"{key} says nothing of what it counts"


def test_python_names_stats_keys_only_through_the_export():
    used, literals = set(), []
    for path in _python_files():
        for node, (how, name) in _reads_of_stats(ast.parse(path.read_text(), str(path))):
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            if how == "attr":
                assert name in IDENTS or name == "ALL", f"{where}: tracedat_stats.{name} is not exported"
                used.add(name)
            elif name in KEYS:
                literals.append(f"{where}: {name!r}")
    assert not literals, "stats keys spelt out instead of read from _native.tracedat_stats:\n" + "\n".join(literals)
    # what the importer relies on: that it sorts out-of-order reads and
    # counts a read's damage (cratrace/importer.py)
    assert {"TS_OUT_OF_ORDER", "CORRUPT_PAGES", "CORRUPT_RECORDS", "UNPARSEABLE_FORMATS"} <= used


def test_the_stub_lists_what_the_binding_exports():
    stub = ast.parse((ROOT / "cratrace" / "_native.pyi").read_text())
    cls = next(n for n in stub.body if isinstance(n, ast.ClassDef) and n.name == "_TraceDatStats")
    names = {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign)}
    assert names == set(IDENTS) | {"ALL"}


def test_a_read_counts_under_the_exported_names(tmp_path, fixtures_dir):
    summary = _native.read_tracedat(fixtures_dir / "trappy_idle.dat", tmp_path)
    assert summary["stats"], "a read with pages counts them"
    assert set(summary["stats"]) <= set(KEYS)
    assert summary["stats"][EXPORTED.PAGES] > 0
