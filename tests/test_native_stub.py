"""The type stub of the native module (`cratrace/_native.pyi`) names every
function and class the module exports, and nothing it lacks: an editor's
completion and a type checker see the module as it is."""

from __future__ import annotations

import ast

import cratrace._native as native
from tests.conftest import REPO


def _stub_names() -> tuple[set[str], set[str]]:
    """(names the stub defines as functions or classes, its other names:
    type aliases and annotated attributes such as a submodule's)."""
    tree = ast.parse((REPO / "cratrace" / "_native.pyi").read_text())
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    aliases = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    aliases |= {n.target.id for n in tree.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    return defined, aliases


def test_the_stub_names_what_the_native_module_exports():
    defined, aliases = _stub_names()
    public = {k for k in dir(native) if not k.startswith("_")}
    assert public - defined - aliases == set(), "exported but not in the stub"
    # a stub-only name is a type alias or a private helper class
    assert {n for n in defined - public if not n.startswith("_")} == set(), "in the stub but not exported"
