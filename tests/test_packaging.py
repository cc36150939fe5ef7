"""How cratrace is packaged (issue #44): wheels PyPI takes (manylinux),
the collector as a package of its own name with its command, and the
vermin check in the test extra."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def test_wheels_are_manylinux():
    # `maturin build` tags and checks the wheel against this policy; without
    # it (or with "off") the tag is linux_x86_64, which PyPI refuses
    compat = PYPROJECT["tool"]["maturin"].get("compatibility", "")
    assert compat.startswith("manylinux"), compat


def test_the_collector_is_cratrace_collect_with_its_command():
    maturin = PYPROJECT["tool"]["maturin"]
    assert set(maturin["python-packages"]) == {"cratrace", "cratrace_collect"}
    assert "collectors" not in maturin["python-packages"]
    assert PYPROJECT["project"]["scripts"]["cratrace-collect"] == "cratrace_collect:main"
    assert any(i["path"] == "cratrace_collect/presets/*.json" for i in maturin["include"])
    assert not (REPO / "collectors" / "__init__.py").exists()
    import cratrace_collect

    assert callable(cratrace_collect.main) and (Path(cratrace_collect.PRESET_DIR) / "kvm-sched.json").is_file()


def test_vermin_is_in_the_test_extra():
    assert any(d.split(">")[0].split("=")[0].strip() == "vermin" for d in PYPROJECT["project"]["optional-dependencies"]["test"])
