"""Reports (issue #7): throughput, energy and per-VM billing for the
recorded run and every replay, as pure functions from frames to frames,
rendered to self-contained HTML (plotly inline), Markdown and CSV/Parquet."""

from cratrace.report.build import build_report

__all__ = ["build_report"]
