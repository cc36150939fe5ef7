"""cratrace: trace-driven analysis and what-if replay for virtualization hosts.

>>> import cratrace
>>> cap = cratrace.open("capture/")          # doctest: +SKIP
>>> cap.events["sched_switch"].collect()     # doctest: +SKIP
>>> cap.sql("SELECT vm, sum(dur) FROM vcpu_states GROUP BY vm")  # doctest: +SKIP
"""

from cratrace.capture import Capture, open
from cratrace.errors import CratraceError

__version__ = "0.1.0"
__all__ = ["Capture", "CratraceError", "open", "__version__"]
