"""A worker or checker ends when its parent does, however the parent ended.

The parent starts its children in sessions of their own (so a timeout can
kill a child's whole process group), which also means a terminal's Ctrl-C
does not reach them and a parent killed with SIGKILL leaves them running. A
daemon thread in each child checks once a second whether the process that
started it is still its parent; when it is not (the child was re-parented),
the child exits at once, with everything it started in its group.
"""

from __future__ import annotations

import os
import signal
import threading
import time

EXIT_ORPHANED = 70


def watch_parent(interval_s: float = 1.0) -> threading.Thread:
    """Start the watch (a daemon thread); returns it."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(interval_s)
            if os.getppid() != parent:
                try:
                    os.killpg(os.getpgrp(), signal.SIGKILL)
                finally:
                    os._exit(EXIT_ORPHANED)

    t = threading.Thread(target=watch, name="kg-lifeline", daemon=True)
    t.start()
    return t
