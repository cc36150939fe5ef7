"""The notebooks run top to bottom on the sample traces (nbclient)."""

from __future__ import annotations

import os

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")


@pytest.mark.parametrize("name", ["01-explore-a-capture", "02-what-if-spin-policies", "03-energy-and-billing"])
def test_notebook_runs(repo_root, name, tmp_path, monkeypatch):
    # the kernel's temporary directory is this test's own, so what it
    # leaves there is its own
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    nb = nbformat.read(repo_root / "notebooks" / f"{name}.ipynb", as_version=4)
    os.environ["CRATRACE_REPO"] = str(repo_root)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(repo_root / "notebooks")}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    # its temporary directory (the capture, the replays) is gone with it
    left = sorted(p.name for p in tmp_path.glob("cratrace-nb-*"))
    assert not left, f"{name} left {left} behind in its temporary directory"
