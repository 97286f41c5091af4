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
import select
import signal
import threading
import time

EXIT_ORPHANED = 70


def watch_parent(interval_s: float = 1.0, pid: int | None = None) -> threading.Thread:
    """Start the watch (a daemon thread); returns it.

    ``pid``: watch that process instead of this one's parent (a worker forked by the fork server watches the
    harness, not the server: :mod:`harness.execute.forkserver.server`). Its end is seen through a pidfd; where none can be
    opened, the watch falls back to the parent.

    The checker starts it. A confined worker does not: its keeper, outside its namespaces and out of its
    candidate's reach, is its lifeline (:mod:`harness.execute.boundary.enter`); only a worker started with
    ``--isolation off`` starts this watch, after its limits. The loop takes everything it calls into its own
    locals when it starts, before any candidate code is imported: it looks nothing up in a module afterwards,
    so replacing ``select.select`` or ``os.getppid`` does not run candidate code on it."""
    parent = os.getppid()
    pidfd = None
    if pid is not None and pid != parent:
        try:
            pidfd = os.pidfd_open(pid)
        except (OSError, AttributeError):
            pidfd = None
    t = threading.Thread(target=_watch, args=(interval_s, pidfd, parent), name="kg-lifeline", daemon=True)
    t.start()
    return t


def _watch(interval_s: float, pidfd: int | None, parent: int) -> None:
    sleep, getppid, select_, killpg, getpgrp, exit_ = (time.sleep, os.getppid, select.select, os.killpg,
                                                        os.getpgrp, os._exit)
    sigkill = signal.SIGKILL
    while True:
        sleep(interval_s)
        if (select_([pidfd], [], [], 0)[0] if pidfd is not None else getppid() != parent):  # no builtin looked up
            try:
                killpg(getpgrp(), sigkill)
            finally:
                exit_(EXIT_ORPHANED)
