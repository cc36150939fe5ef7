"""Host-side capture (issue #3): `cratrace_collect.py` runs on a production
host with only the Python standard library plus trace-cmd, perf and
xentrace; `cratrace record` uses the same code."""
