"""Scenario generator: real trace files whose ground truth is known (issue #8).

Two layers:

* :func:`write_tracedat` (``tracedat_writer``) writes any list of
  :class:`Event` as a trace.dat that ``trace-cmd report`` reads: file
  version 6 or 7, no/zlib/zstd compression, 32- or 64-bit kernel, little- or
  big-endian, instances, lost-event flags. Readers' tests use it directly.
* :func:`synthesize` (``generate``) runs a scenario from
  :data:`SCENARIOS` and writes ``FILE`` plus ``FILE.truth.json``;
  ``cratrace synth`` is its CLI. docs/synth.md documents every truth key.

>>> from cratrace.synth import synthesize
>>> truth = synthesize("kvm-heavy-spin", "spin.dat", seed=1)   # doctest: +SKIP
>>> truth["totals"]["lhp_episodes"]                             # doctest: +SKIP
"""

from cratrace.synth.generate import synthesize
from cratrace.synth.scenarios import SCENARIOS
from cratrace.synth.tracedat_writer import Event, TraceDatWriter, WriterError, write_tracedat

__all__ = ["Event", "SCENARIOS", "TraceDatWriter", "WriterError", "synthesize", "write_tracedat"]
