"""Names from a capture cannot add markup to a report (issue 42). The HTML
around the charts was escaped, but plotly reads its own markup in labels,
hover text and titles: a VM named `<a href="http://evil.example/x">`
became a link in four charts and `<b>` drew bold. Here hostile VM names
(host.json's inventory), host name, thread names (tenants of a capture
without VMs) and marker names go through import, model, replay, report,
sweep and fleet-report, and headless Chromium's DOM is checked: no
element made by a name, every name shown as its text.

Marker names and the names of VM processes do not appear in a report
today; they are in the captures so that they would be caught when they do.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import plotly.graph_objects as go
import pytest

from cratrace.synth.scenarios._common import Builder
from cratrace.synth.tracedat_writer import write_tracedat
from tests.helpers import cratrace
from tests.report.test_report import CHROMIUM, FLAGS

HOSTILE_VMS = ['<a href="http://evil.example/x">', "<b>bold</b> & co"]
HOSTILE_HOST = "<i>host</i>"
#: thread names: at most 15 characters (the kernel's comm) and no `/`
#: (which would make them kernel threads, one tenant `kernel`)
HOSTILE_THREADS = ["<a href=e.x>", "<b>proc &amp;"]
HOSTILE_MARKERS = ['<a href="http://evil.example/m">', "<b>mark</b>"]


def _raw(out: Path, with_vms: bool) -> Path:
    """A raw capture of two 2-thread processes on 2 CPUs taking turns every
    millisecond for 200 ms, each writing a txn_end and a hostile marker per
    turn; with VMs: QEMU-like vCPU threads and a host.json naming the VMs."""
    out.mkdir(parents=True)
    b = Builder(ncpus=2)
    workers = []
    for i in range(2):
        pid = 1000 + 100 * i
        if with_vms:
            b.thread(pid, "qemu-system-x86", pid, "vmm", vm=HOSTILE_VMS[i])
            workers += [b.thread(pid + 1 + j, f"CPU {j}/KVM", pid, "vcpu", vm=HOSTILE_VMS[i], vcpu=j) for j in range(2)]
        else:
            b.thread(pid, HOSTILE_THREADS[i], pid, "app")
            workers += [b.thread(pid + 1 + j, HOSTILE_THREADS[i], pid, "app") for j in range(2)]
    if with_vms:
        b.forks()
    for k in range(200):
        t = k * 1_000_000
        for cpu in range(2):
            tid = workers[(k + cpu) % len(workers)]
            b.switch(t, cpu, tid)
            if with_vms:
                b.kvm_entry(t + 1000, cpu, tid, 0)
            b.marker(t + 200_000, cpu, tid, "txn_end")
            b.marker(t + 300_000, cpu, tid, HOSTILE_MARKERS[k % 2] + " n=1")
            if with_vms:
                b.kvm_exit(t + 900_000, cpu, tid, 0, 40)
    write_tracedat(out / "trace.dat", b.events, comms=b.comms(), cpus=2)
    files = [{"path": "trace.dat", "kind": "tracedat"}]
    if with_vms:
        (out / "host.json").write_text(json.dumps({"hostname": HOSTILE_HOST, "vms": b.inventory()}))
        files.append({"path": "host.json", "kind": "host"})
    (out / "manifest.json").write_text(json.dumps({"format": "cratrace-raw", "files": files}))
    return out


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    """{"vms": report.html, "threads": report.html, "fleet": fleet.html}"""
    d = tmp_path_factory.mktemp("hostile")
    out = {}
    for name, with_vms in (("vms", True), ("threads", False)):
        cap, replays = d / f"cap-{name}", d / f"replays-{name}"
        cratrace("import", _raw(d / "raw" / name, with_vms), "-o", cap, "-q", check=True)
        m = cratrace("model", cap, "-q")
        assert m.returncode == 0, m.stderr
        r = cratrace("replay", cap, "-o", replays, "-p", "fair", "-q")
        assert r.returncode in (0, 1), r.stderr  # 1: the fidelity gate, not an error
        cratrace("report", cap, "--replays", replays, "-o", d / f"{name}.html", "-q", check=True)
        out[name] = d / f"{name}.html"
    # the fleet report: host name, tenants and a what-if naming a VM
    sweep = d / "sweep"
    cratrace("sweep", d / "cap-vms", "-p", "own", "-p", "fair", "--what-if", f"drop-vm={HOSTILE_VMS[1]}", "--headroom", "1", "--workers", "1", "-o", sweep, "-q", check=True)
    cratrace("fleet-report", sweep, "-o", d / "fleet.html", "-q", check=True)
    out["fleet"] = d / "fleet.html"
    return out


class _Dom(HTMLParser):
    """What a rendered page holds: its links, the styled text plotly made
    inside its SVG (<tspan style="font-weight:bold">), and the text of each
    SVG <text> element."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[dict] = []
        self.styled: list[str] = []
        self.texts: list[str] = []
        self._open: list[str] = []
        self._text: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "a":
            self.links.append(a)
        if tag in ("b", "i", "em", "strong") and "svg" in self._open:
            self.styled.append(tag)
        if tag == "tspan" and any(s in (a.get("style") or "") for s in ("font-weight:bold", "font-style:italic")):
            self.styled.append(a["style"])
        if tag == "text" and "svg" in self._open:
            self._text = []
        self._open.append(tag)

    def handle_endtag(self, tag):
        if tag == "text" and self._text is not None:
            self.texts.append("".join(self._text))
            self._text = None
        while self._open and self._open.pop() != tag:
            pass

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)


def _render(page: Path, tmp_path: Path) -> tuple[_Dom, str]:
    dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-500:]
    parsed = _Dom()
    parsed.feed(dom.stdout)
    return parsed, dom.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install chromium)")
@pytest.mark.browser
@pytest.mark.parametrize("which, names, charts", [
    ("vms", HOSTILE_VMS, 5),
    ("threads", HOSTILE_THREADS, 3),
    ("fleet", [*HOSTILE_VMS, HOSTILE_HOST, f"drop-vm={HOSTILE_VMS[1]}"], 4),
])
def test_hostile_names_make_no_element_and_show_as_text(reports, tmp_path, which, names, charts):
    dom, text = _render(reports[which], tmp_path)
    assert text.count('class="main-svg"') >= charts, "charts did not render"
    assert dom.links == [], "a name became a link"
    assert dom.styled == [], "a name's markup styled a chart's text"
    shown = "\n".join(dom.texts)
    for name in names:
        assert name in shown, f"{name!r} is not shown in any chart"


def test_plotly_markup_in_strings_is_escaped_wherever_plotly_shows_text():
    from cratrace.report.render import escape_figure, plot_text

    f = go.Figure()
    f.add_bar(name="<b>n</b>", x=["<a href='e'>", "plain"], y=[1, 2], text=["t & u"], hovertext="<i>h</i>")
    f.add_box(name="s", y=[1.0, 2.0], text=["<br>", "z"])
    f.update_layout(title="<b>T</b>", xaxis_title="<x>", yaxis_title="y", legend_title_text="<l>")
    f.add_annotation(text="<a href='e'>note</a>")
    escape_figure(f)
    bar, box = f.data
    assert bar.name == "&lt;b&gt;n&lt;/b&gt;" and bar.x == ("&lt;a href='e'&gt;", "plain") and bar.y == (1, 2)
    assert bar.text == ("t &amp; u",) and bar.hovertext == "&lt;i&gt;h&lt;/i&gt;" and box.text == ("&lt;br&gt;", "z")
    assert f.layout.title.text == "&lt;b&gt;T&lt;/b&gt;" and f.layout.xaxis.title.text == "&lt;x&gt;" and f.layout.yaxis.title.text == "y"
    assert f.layout.legend.title.text == "&lt;l&gt;" and f.layout.annotations[0].text == "&lt;a href='e'&gt;note&lt;/a&gt;"
    assert plot_text(3.5) == 3.5 and plot_text("a&b") == "a&amp;b"
