"""Privileges a worker gives up before its candidate: every capability, the right to gain any, and its
dumpability; and the tie to its keeper (it dies when the keeper does).

* Capabilities: the bounding set emptied (no program it starts can regain one), the ambient set cleared, and
  the effective, permitted and inheritable sets emptied. In its own user namespace the worker starts with every
  capability over that namespace; afterwards it has none anywhere, as root or not.
* ``no_new_privs``: set-uid programs and file capabilities grant nothing (also required by Landlock and seccomp).
* Not dumpable, unless it is alone in its own PID namespace with its own ``/proc``: then no process but the
  harness's can name it, and the harness reads its descriptor table at each freeze (``/proc/PID/fd`` of a
  non-dumpable process is closed to an unprivileged parent). Elsewhere processes of the same user cannot
  ``ptrace`` it or open its ``/proc/PID/mem``. No core dump either way (``RLIMIT_CORE`` is 0).
* Parent-death signal: SIGKILL when its keeper ends, so a worker never outlives the process that watches it.
"""

from __future__ import annotations

import os
import signal

from harness.execute.boundary import linux


def die_with_parent(keeper_fd: int) -> None:
    """SIGKILL this process when its parent (the keeper) ends. ``keeper_fd``: the read end of a pipe whose write
    end only the keeper holds; at end of file the keeper was already gone before the signal was armed, and this
    process ends now."""
    import select

    linux.prctl(linux.PR_SET_PDEATHSIG, int(signal.SIGKILL))
    ready, _, _ = select.select([keeper_fd], [], [], 0)
    if ready and not os.read(keeper_fd, 1):
        os._exit(70)
    os.close(keeper_fd)


def drop_all(dumpable: bool = False) -> list[str]:
    """Give up capabilities, new privileges and (unless ``dumpable``) dumpability; returns what could not be done
    (empty when all)."""
    failed = []
    try:
        linux.prctl(linux.PR_SET_NO_NEW_PRIVS, 1)
    except OSError as exc:
        failed.append(f"no_new_privs ({exc.strerror})")
    for cap in range(linux.last_capability() + 1):
        try:
            linux.prctl(linux.PR_CAPBSET_DROP, cap)
        except OSError as exc:
            if exc.errno != 22:  # EINVAL: a capability this kernel does not have
                failed.append(f"bounding set ({exc.strerror})")
                break
    try:
        linux.prctl(linux.PR_CAP_AMBIENT, linux.PR_CAP_AMBIENT_CLEAR_ALL)
    except OSError:
        pass  # kernels before 4.3 have no ambient set
    try:
        linux.clear_capabilities()
    except OSError as exc:
        failed.append(f"capabilities ({exc.strerror})")
    if not dumpable:
        try:
            linux.prctl(linux.PR_SET_DUMPABLE, 0)
        except OSError as exc:
            failed.append(f"dumpable ({exc.strerror})")
    return failed
