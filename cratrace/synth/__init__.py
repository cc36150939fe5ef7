"""Scenario generator (issue #8): real trace files with known truth.

:mod:`.tracedat_writer` writes trace.dat (v6 or v7; none/zlib/zstd; 32-
or 64-bit kernel layouts; little or big endian) that `trace-cmd report`
reads; :mod:`.scenarios` builds parameterised, seeded workloads with a
ground-truth sidecar.
"""
