"""Exports of captures and replays to other tools' formats.

One module per format: `cratrace.export.perfetto` writes a Perfetto trace
(``.pftrace``) that ui.perfetto.dev opens as a timeline.
"""
