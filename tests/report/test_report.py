"""The report on a real lab capture and its replays, in a real headless
Chromium: loads without console errors, charts render, screenshot taken."""

from __future__ import annotations

import json
import shutil
import subprocess

import polars as pl
import pytest

from cratrace.replay import replay_capture
from cratrace.report import build_report
from cratrace.report.energy import energy
from tests.helpers import cratrace as run_cli
from tests.model.conftest import lab_capture  # noqa: F401

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def report(lab_capture, tmp_path_factory):  # noqa: F811
    d = tmp_path_factory.mktemp("report")
    replay_capture(lab_capture, ["fair", "wapd", "rslp"], d / "replays")
    html = d / "report.html"
    rep = build_report(lab_capture, d / "replays", html, tables_dir=d / "tables")
    return d, rep


def test_summary_compares_every_run_and_marks_the_best(report):
    d, rep = report
    assert rep["summary"]["run"].to_list() == ["recorded", "fair", "rslp", "wapd"]
    assert set(rep["best"]) >= {"ETR /s", "spin s"}
    assert len(rep["sentences"]) == 3
    for name in ("summary", "energy", "energy_per_core", "energy_series", "billing", "throughput_per_vm"):
        assert (d / "tables" / f"{name}.csv").is_file() and (d / "tables" / f"{name}.parquet").is_file()


def test_fidelity_section_sets_each_replay_beside_the_recording(report, lab_capture):  # noqa: F811
    d, rep = report
    fid = rep["fidelity"]
    assert fid["run"].to_list() == ["fair", "rslp", "wapd"]
    for row in fid.iter_rows(named=True):
        m = json.loads((d / "replays" / row["run"] / "metrics.json").read_text())["fidelity"]
        assert row["CPU-time err %"] == m["cpu_time_err_pct"] and row["throughput err %"] == m["throughput_err_pct"]
        assert row["gate"] == ("within" if m["passed"] else "missed") if m["gate_applies"] else row["gate"].startswith("n/a")
        diag = m["diagnostics"]
        assert row["vCPU moves rec"] == diag["vcpu_migrations"]["recorded"] and row["vCPU moves rep"] == diag["vcpu_migrations"]["replayed"]
        assert row["sibling preempt % rec"] == diag["sibling_wakeup_preemption_pct"]["recorded"]
    # the recording's own figures are the same whichever replay they sit
    # beside, and its vCPU moves are the changes of CPU between a vCPU
    # thread's consecutive CPU slices (counted here from cpu_slices; the
    # kernel may not have moved any in a short capture)
    vcpu_tids = lab_capture.model["threads"].filter(pl.col("role") == "vcpu").select("tid").collect()
    slices = lab_capture.model["cpu_slices"].collect().join(vcpu_tids, on="tid").sort("tid", "start")
    moves = slices.select(((pl.col("cpu") != pl.col("cpu").shift(1)) & (pl.col("tid") == pl.col("tid").shift(1))).sum()).item()
    assert fid["vCPU moves rec"].n_unique() == 1 and fid["vCPU moves rec"][0] == moves
    html = (d / "report.html").read_text()
    assert "<h2>Replay fidelity</h2>" in html and "vCPU moves rep" in html
    assert pl.read_parquet(d / "tables" / "fidelity.parquet").equals(fid)


def test_the_same_runs_give_the_same_report_byte_for_byte(report, lab_capture):  # noqa: F811
    # charts once took a fresh random element id each time
    d, _ = report
    again = d / "again.html"
    build_report(lab_capture, d / "replays", again, tables_dir=d / "tables-again")
    assert again.read_bytes() == (d / "report.html").read_bytes()
    for p in sorted((d / "tables").iterdir()):
        assert (d / "tables-again" / p.name).read_bytes() == p.read_bytes(), p.name


def test_json_gives_the_figures_the_tables_hold(report, lab_capture):  # noqa: F811
    d, _ = report
    p = run_cli("report", lab_capture.path, "--replays", d / "replays", "-o", d / "j.html", "--tables", d / "jt", "--json")
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert got["output"] == str(d / "j.html") and (d / "j.html").is_file()
    # the summary is the summary table's rows, run by run
    table = pl.read_parquet(d / "jt" / "summary.parquet")
    assert [r["run"] for r in got["summary"]] == table["run"].to_list() == ["recorded", "fair", "rslp", "wapd"]
    for row, want in zip(got["summary"], table.to_dicts()):
        assert row == want
    assert got["best"]["ETR /s"] in {"fair", "rslp", "wapd"}
    # billing for every run, each run's books reconciled
    assert {(r["run"], r["vm"]) for r in got["billing"]} == {(run, vm) for run in ("recorded", "fair", "rslp", "wapd") for vm in ("vm0", "vm1")}
    assert set(got["reconciliations"]) == {"recorded", "fair", "rslp", "wapd"} and all(r["reconciles"] for r in got["reconciliations"].values())
    # standard output carries the JSON alone: a report printed there too is refused
    bad = run_cli("report", lab_capture.path, "--format", "md", "-o", "-", "--json")
    assert bad.returncode == 2 and "--json" in bad.stderr


def test_per_vm_figures_add_up_to_the_host_in_every_output(report, lab_capture):  # noqa: F811
    """One definition of throughput (each VM over its window: its first
    vCPU's start to its last transaction; the host the VMs' sum), the same
    for the recording and every replay, in metrics.json, --tables, --json
    and the Markdown; the energy by run adds its owners up to its total."""
    d, rep = report
    for policy in ("fair", "rslp", "wapd"):
        m = json.loads((d / "replays" / policy / "metrics.json").read_text())
        assert m["host"]["etr"] == pytest.approx(sum(v["throughput_per_s"] for v in m["vms"].values()), abs=1e-5)
        assert m["host"]["recorded_etr"] == pytest.approx(sum(v["recorded_throughput_per_s"] for v in m["vms"].values()), abs=1e-5)
    summary = pl.read_csv(d / "tables" / "summary.csv")
    per_vm = pl.read_csv(d / "tables" / "throughput_per_vm.csv")
    for run, etr in summary.select("run", "ETR /s").iter_rows():
        assert etr == pytest.approx(per_vm.filter(pl.col("run") == run)["throughput_per_s"].sum(), abs=0.02), run
    # the recording's VMs rated as each replay's metrics rate them
    rec = per_vm.filter(pl.col("run") == "recorded")
    m = json.loads((d / "replays" / "fair" / "metrics.json").read_text())
    for vm, tp in rec.select("vm", "throughput_per_s").iter_rows():
        assert tp == pytest.approx(m["vms"][vm]["recorded_throughput_per_s"], rel=1e-6), vm
    by_run = pl.read_csv(d / "tables" / "energy_by_run.csv")
    for row in by_run.iter_rows(named=True):
        assert sum(v for k, v in row.items() if k not in ("run", "total J")) == pytest.approx(row["total J"], rel=1e-6)
    md = run_cli("report", lab_capture.path, "--replays", d / "replays", "--format", "md", "-o", "-").stdout
    billing = md.split("## Billing", 1)[1]
    assert all(f"| {run} | vm0 |" in billing for run in ("recorded", "fair", "rslp", "wapd"))


def test_energy_is_conserved_with_idle_as_its_own_row(lab_capture):  # noqa: F811
    per, tot = energy(lab_capture.model["cpu_slices"].collect(), lab_capture.model["threads"].collect())
    assert tot["conserved"] and tot["total_j"] > 0
    owners = set(per["owner"])
    assert {"idle", "vm0", "vm1"} <= owners
    assert per["joules"].sum() == pytest.approx(sum(tot["per_core_j"]), rel=1e-12)


def test_trace_strings_are_escaped(lab_capture, tmp_path):  # noqa: F811
    import shutil as sh

    cap = tmp_path / "cap"
    sh.copytree(lab_capture.path, cap)
    th = pl.read_parquet(cap / "model" / "threads.parquet").with_columns(pl.when(pl.col("vm") == "vm0").then(pl.lit("<script>alert(1)</script>")).otherwise(pl.col("vm")).alias("vm"))
    th.write_parquet(cap / "model" / "threads.parquet")
    vs = pl.read_parquet(cap / "model" / "vcpu_states.parquet").with_columns(pl.when(pl.col("vm") == "vm0").then(pl.lit("<script>alert(1)</script>")).otherwise(pl.col("vm")).alias("vm"))
    vs.write_parquet(cap / "model" / "vcpu_states.parquet")
    out = tmp_path / "r.html"
    build_report(cap, None, out)
    text = out.read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "<script>alert(1)</script>" not in text


def test_markdown_and_cli(lab_capture, tmp_path):  # noqa: F811
    p = run_cli("report", lab_capture.path, "--format", "md", "-o", "-")
    assert p.returncode == 0 and "## Billing" in p.stdout and "reconciled" in p.stdout
    out = tmp_path / "r.html"
    assert run_cli("report", lab_capture.path, "-o", out).returncode == 0
    again = run_cli("report", lab_capture.path, "-o", out)
    assert again.returncode == 2 and "--force" in again.stderr
    # --replays that holds no replay: one line naming it, not an internal error
    (tmp_path / "empty").mkdir()
    (tmp_path / "damaged" / "fair").mkdir(parents=True)
    (tmp_path / "damaged" / "fair" / "metrics.json").write_text("{oops")
    # a replay whose timeline table was cut short
    (tmp_path / "cut" / "fair" / "model").mkdir(parents=True)
    (tmp_path / "cut" / "fair" / "metrics.json").write_text(json.dumps({"policy": "fair", "duration_s": 1.0, "vms": {}, "host": {}}))
    (tmp_path / "cut" / "fair" / "model" / "vcpu_states.parquet").write_bytes((lab_capture.path / "model" / "vcpu_states.parquet").read_bytes()[:300])
    for replays, says in (("missing", "not a directory"), ("empty", "holds no replay"), ("damaged", "metrics.json: damaged"), ("cut", "vcpu_states.parquet")):
        bad = run_cli("report", lab_capture.path, "--replays", tmp_path / replays, "-o", tmp_path / "x.html")
        assert bad.returncode == 2 and says in bad.stderr and "internal error" not in bad.stderr, bad.stderr
    # prices: a typo or a bad value is refused rather than billed at the default
    for text, says in (('{"cpu_seconds": 1}', "unknown price 'cpu_seconds'"), ('{"cpu_second": "x"}', "expected a number >= 0"), ('{"cpu_second": -1}', "expected a number >= 0"), ("[1]", "expected a JSON object")):
        (tmp_path / "prices.json").write_text(text)
        bad = run_cli("report", lab_capture.path, "--prices", tmp_path / "prices.json", "-o", tmp_path / "y.html")
        assert bad.returncode == 2 and says in bad.stderr and not (tmp_path / "y.html").exists(), bad.stderr
    (tmp_path / "prices.json").write_text('{"cpu_second": 0.5}')
    for name, extra in (("at-1", []), ("at-half", ["--prices", tmp_path / "prices.json"])):
        assert run_cli("report", lab_capture.path, *extra, "--tables", tmp_path / name, "-o", tmp_path / f"{name}.html").returncode == 0
    bills = [pl.read_parquet(tmp_path / name / "billing.parquet").sort("vm")["bill"] for name in ("at-1", "at-half")]
    assert bills[0].sum() > 0 and (bills[1] * 2 - bills[0]).abs().max() < 1e-9


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install chromium)")
@pytest.mark.browser
def test_report_renders_in_headless_chromium(report, tmp_path):
    d, _ = report
    page = (d / "report.html").as_uri()
    prof = tmp_path / "profile"
    dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={prof}", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", "--dump-dom", page], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-500:]
    # plotly drew its SVG charts
    assert dom.stdout.count('class="main-svg"') >= 5, "charts did not render"
    console_errors = [line for line in dom.stderr.splitlines() if "CONSOLE" in line and ("Error" in line or "Uncaught" in line)]
    assert console_errors == []
    shot = tmp_path / "report.png"
    subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={prof}", "--window-size=1280,2400", "--virtual-time-budget=5000", f"--screenshot={shot}", page], capture_output=True, timeout=120)
    assert shot.is_file() and shot.stat().st_size > 20_000
    shutil.copy(shot, d / "report.png")


def test_a_capture_without_markers_shows_no_transaction_rate(repo_root, tmp_path):
    # kvm-io-billing writes no trace_marker lines: its ETR was printed as 0
    # and every policy's throughput as "+0.0% vs recorded"
    cap, reps = tmp_path / "cap", tmp_path / "reps"
    run_cli("import", repo_root / "sample-traces" / "kvm-io-billing.dat", "-o", cap, "-q", check=True)
    run_cli("model", cap, check=True)
    r = run_cli("replay", cap, "-p", "fair", "-p", "wapd", "-o", reps, check=True)
    rows = {line.split()[0]: line.split()[1:3] for line in r.stdout.splitlines() if line.split()[:1] in (["fair"], ["wapd"])}
    assert rows == {"fair": ["–", "–"], "wapd": ["–", "–"]}
    rep = build_report(cap, reps, tmp_path / "r.md", fmt="md")
    assert rep["summary"]["ETR /s"].null_count() == 3
    assert all("throughput not compared (no transaction markers)" in s for s in rep["sentences"])


def test_quiet_replay_and_report_print_nothing_and_still_write(repo_root, tmp_path):
    cap, reps, page = tmp_path / "cap", tmp_path / "reps", tmp_path / "r.html"
    run_cli("import", repo_root / "sample-traces" / "kvm-io-billing.dat", "-o", cap, "-q", check=True)
    m = run_cli("model", cap, "-q", check=True)
    r = run_cli("replay", cap, "-p", "fair", "-o", reps, "-q")
    p = run_cli("report", cap, "--replays", reps, "-o", page, "-q", check=True)
    assert r.returncode in (0, 1), r.stderr  # 1: a missed fidelity gate
    assert (m.stdout, r.stdout, p.stdout) == ("", "", "")
    assert (reps / "fair" / "metrics.json").is_file() and page.stat().st_size > 10_000


def test_tables_are_not_replaced_without_force(lab_capture, tmp_path):  # noqa: F811
    tables = tmp_path / "tables"
    first = run_cli("report", lab_capture.path, "--tables", tables, "-o", tmp_path / "a.html")
    assert first.returncode == 0, first.stderr
    before = {p.name: p.read_bytes() for p in tables.iterdir()}
    assert "billing.csv" in before and "billing.parquet" in before
    (tables / "billing.csv").write_text("the user's edits\n")
    again = run_cli("report", lab_capture.path, "--tables", tables, "-o", tmp_path / "b.html")
    assert again.returncode != 0 and "--force" in again.stderr and len(again.stderr.strip().splitlines()) == 1, again.stderr
    assert (tables / "billing.csv").read_text() == "the user's edits\n" and not (tmp_path / "b.html").exists()
    forced = run_cli("report", lab_capture.path, "--tables", tables, "-o", tmp_path / "b.html", "--force")
    assert forced.returncode == 0, forced.stderr
    assert (tables / "billing.csv").read_bytes() == before["billing.csv"]
    assert sorted(p.name for p in tables.iterdir()) == sorted(before)  # no temporaries left behind


def test_two_reports_of_the_same_runs_have_the_same_tables(report, lab_capture, tmp_path):  # noqa: F811
    # energy was summed as floats by several threads, and its series
    # changed in the last digits from one report to the next
    d, _ = report
    build_report(lab_capture, d / "replays", tmp_path / "again.html", tables_dir=tmp_path / "tables")
    for f in sorted((d / "tables").glob("*.parquet")):
        assert pl.read_parquet(f).equals(pl.read_parquet(tmp_path / "tables" / f.name)), f.name


def test_a_tie_for_best_goes_to_the_same_run_whatever_the_row_order():
    # two replays with no spinning at all tie for the lowest spin; which one
    # the report marks best must not depend on the order the runs were given
    from cratrace.report.build import HIGHER_BETTER, best_marks

    rows = {"run": ["recorded", "wopd", "wapd", "spin"], **{c: [None] * 4 for c in HIGHER_BETTER}}
    rows |= {"ETR /s": [5.0, 9.0, 9.0, 7.0], "spin s": [1.0, 0.0, 0.0, 2.0]}
    marks = set()
    for order in ([0, 1, 2, 3], [0, 2, 1, 3], [3, 2, 1, 0]):
        s = pl.DataFrame(rows, schema={"run": pl.String, **{c: pl.Float64 for c in HIGHER_BETTER}})[order]
        b = best_marks(s)
        marks.add((b["ETR /s"], b["spin s"]))
    assert marks == {("wapd", "wapd")}


def test_fidelity_evidence_from_the_benchmarks_is_shown(lab_capture, tmp_path):  # noqa: F811
    floor = {"captures": {}, "noise_floor": {"count clock, pv lock, 2x": {"captures": 5, "within": False, "measures": {
        "worst-thread CPU time": {"recordings_median_pct": 4.0, "recordings_p90_pct": 9.0, "replay_median_pct": 3.0, "replay_p90_pct": 12.0, "median_ratio": 0.75, "p90_ratio": 1.33, "within": False}}}}}
    whatif = [{"what_if": "2 CPUs -> 1 CPU", "replay_args": "--set pcpus=1", "recorded_change_pct": -43.6, "predicted_change_pct": -43.5, "prediction_error_pct": 0.2, "target_noise_pct": 4.0, "within_noise": True, "same_sign": True}]
    (tmp_path / "f.json").write_text(json.dumps(floor))
    (tmp_path / "w.json").write_text(json.dumps(whatif))
    p = run_cli("report", lab_capture.path, "-o", tmp_path / "r.html", "--evidence", tmp_path / "f.json", "--evidence", tmp_path / "w.json", "--json")
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert got["noise_floor"] == [{"setting": "count clock, pv lock, 2x", "measure": "worst-thread CPU time", "replay median %": 3.0, "recordings median %": 4.0, "replay p90 %": 12.0, "recordings p90 %": 9.0, "within": False}]
    assert got["what_ifs"][0]["predicted change %"] == -43.5 and got["what_ifs"][0]["same sign"] is True
    html = (tmp_path / "r.html").read_text()
    assert "noise floor" in html and "2 CPUs -&gt; 1 CPU" in html
    (tmp_path / "bad.json").write_text('{"something": 1}')
    bad = run_cli("report", lab_capture.path, "-o", tmp_path / "r2.html", "--evidence", tmp_path / "bad.json")
    assert bad.returncode == 2 and "--evidence" in bad.stderr and not (tmp_path / "r2.html").exists()
