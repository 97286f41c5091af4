"""Process creation in a worker passes the audit hooks: ``_posixsubprocess.fork_exec`` raises an event too.

CPython audits ``subprocess.Popen`` in Python, above the C function that forks and executes
(``_posixsubprocess.fork_exec``), which raises no event of its own. A candidate that called that function directly
(``subprocess._fork_exec``, or the module through ``importlib``) started processes the hooks never saw (session
16's red team): they inherit the worker's Landlock domain but run no hooks, and as root with ``CAP_SYS_PTRACE`` such
a process could write the worker's memory through ``/proc/PID/task/TID/mem``, which lies under the folder Landlock
must leave writable.

:func:`install` (the worker, before it imports the candidate) puts a wrapper where ``subprocess`` and
``sys.modules`` find the function. The wrapper hands each call to a generator that raises :data:`EVENT` and then
forks; the real function lives only in that generator's frame, which the hooks keep from candidate code (a
generator's ``gi_frame``, ``gc``). The hooks judge :data:`EVENT` like ``subprocess.Popen``, and skip the wrapper's
and the generator's frames (:func:`harness.execute.worker.rules.audit.install`'s ``transparent``), so the caller above them is
the one judged: Triton calling ``subprocess.run`` is the library's, the candidate calling the wrapper is refused.
Loading the extension again (a new module, a new ``fork_exec``) is an ``import`` event, refused to candidate code.
"""

from __future__ import annotations

import sys
import threading
import types
from typing import Any

EVENT = "_posixsubprocess.fork_exec"


def install(transparent: set) -> None:
    """Put the audited wrapper in place; add its frames' code objects to ``transparent``."""
    import _posixsubprocess
    import subprocess

    pending = _keeper(_posixsubprocess.fork_exec, sys.audit)
    next(pending)
    lock = threading.Lock()

    def fork_exec(*args: Any) -> Any:
        with lock:  # one generator: concurrent sends would fail ("generator already executing")
            ok, value = pending.send(args)
        if not ok:
            raise value
        return value

    shim = types.ModuleType("_posixsubprocess", "fork_exec, audited (harness.execute.worker.rules.spawn)")
    shim.fork_exec = fork_exec
    subprocess._fork_exec = fork_exec
    sys.modules["_posixsubprocess"] = shim
    transparent.update((fork_exec.__code__, _keeper.__code__))


def _keeper(real: Any, audit: Any):
    """Holds the real ``fork_exec`` in its frame; each call raises :data:`EVENT` first."""
    reply: tuple = (True, None)
    while True:
        args = yield reply
        try:
            audit(EVENT, len(args))
            reply = (True, real(*args))
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller, as the real call would raise it
            reply = (False, exc)
        del args
