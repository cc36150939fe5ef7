"""`python3 -m cratrace_collect` (or `python3 cratrace_collect/`, the
package's directory copied to a host): the collector's command line."""

import os
import sys

if not __package__:  # run as a directory: its parent holds the package
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cratrace_collect import main  # noqa: E402

sys.exit(main())
