"""Reference reader: the kernel tracing community's own C libraries.

Not the fast path. Tests hold the native reader against it field by field;
see :mod:`cratrace.reference.libtracecmd`.
"""
