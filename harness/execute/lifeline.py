"""A worker or checker ends when its parent does, however the parent ended.

The parent starts its children in sessions of their own (so a timeout can
kill a child's whole process group), which also means a terminal's Ctrl-C
does not reach them and a parent killed with SIGKILL leaves them running. A
daemon thread in each child checks once a second whether the process that
started it is still its parent; when it is not (the child was re-parented),
the child exits at once, with everything it started in its group. A worker
forked by the fork server watches the harness itself, so the server's end
(a candidate that kills it, where Landlock cannot stop the signal) ends no
other candidate's worker.
"""

from __future__ import annotations

import os
import signal
import threading
import time

EXIT_ORPHANED = 70


def watch_parent(interval_s: float = 1.0, pid: int | None = None) -> threading.Thread:
    """Start the watch (a daemon thread); returns it.

    ``pid``: watch that process instead of this one's parent (a worker forked by the fork server watches the
    harness, not the server: :mod:`harness.execute.zygote`). Its end is seen through a pidfd; where none can be
    opened, the watch falls back to the parent."""
    parent = os.getppid()
    pidfd = None
    if pid is not None and pid != parent:
        try:
            pidfd = os.pidfd_open(pid)
        except (OSError, AttributeError):
            pidfd = None

    def gone() -> bool:
        if pidfd is not None:
            import select

            return bool(select.select([pidfd], [], [], 0)[0])
        return os.getppid() != parent

    def watch() -> None:
        while True:
            time.sleep(interval_s)
            if gone():
                try:
                    os.killpg(os.getpgrp(), signal.SIGKILL)
                finally:
                    os._exit(EXIT_ORPHANED)

    t = threading.Thread(target=watch, name="kg-lifeline", daemon=True)
    t.start()
    return t
