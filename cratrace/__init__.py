"""cratrace: trace-driven analysis and what-if replay for virtualization hosts.

>>> import cratrace
>>> cap = cratrace.open("capture/")          # doctest: +SKIP
>>> cap.events["sched_switch"].collect()     # doctest: +SKIP
>>> cap.sql("SELECT vm, sum(dur) FROM vcpu_states GROUP BY vm")  # doctest: +SKIP
"""

__version__ = "0.1.0"
__all__ = ["Capture", "CratraceError", "open", "__version__"]


def __getattr__(name: str):
    # Capture pulls in polars (a quarter of a second); commands that never
    # open a capture (import, record, synth) should not pay for it. The
    # errors load the native module: the CLI's entry point installs its
    # signal handlers before that (issue 42: a Ctrl-C while it loaded
    # printed a traceback).
    if name == "CratraceError":
        from cratrace.errors import CratraceError

        return CratraceError
    if name in ("Capture", "open"):
        from cratrace import capture

        return getattr(capture, name)
    raise AttributeError(f"module 'cratrace' has no attribute {name!r}")
