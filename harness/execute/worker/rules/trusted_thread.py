"""The worker's trusted (main) thread runs no candidate code: a guard that ends the worker when it does.

Candidate code runs only on the candidate's thread (:mod:`harness.execute.shared.threads`); the audit hooks
(:mod:`harness.execute.worker.rules.audit`) decide what it may do there. This module's guard watches the other side: code from
the candidate's files that starts running on the main thread (a replaced method, builtin or standard-library
function the loop calls; a finalizer or collector callback written in Python) ends the worker with
:data:`EXIT_TRUSTED_THREAD`, which the parent records as REWARD_HACK (``trusted_thread``).
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

EXIT_TRUSTED_THREAD = 71
"""A worker's exit code when candidate code ran on its trusted thread (:func:`guards`)."""


def guards(roots: tuple[str, ...], exempt_roots: tuple[str, ...], own: dict):
    """The trusted (main) thread's guard: the first call of candidate code there ends the process at once, with
    :data:`EXIT_TRUSTED_THREAD` and a line on stderr naming the code. Returns (a ``sys.setprofile`` function, a
    ``sys.monitoring`` PY_START/PY_RESUME callback); :func:`arm` installs one of them.

    Candidate code runs only on the candidate's thread. It can still be *called* from the trusted one: harness
    classes are reachable (``object.__subclasses__()``), and a method, builtin or standard-library function the
    worker's loop calls, replaced for a moment and put back before the identity check
    (:mod:`harness.execute.worker.rules.tamper`), runs there; so do a garbage-collector callback, a finalizer, an exception's
    ``__str__``. Protects: the dispatch record's view of the work (library-fallback detection on the CPU path): a
    forward that did no work and had a method of the worker's loop, replaced for a moment, compute its outputs
    with the library on this thread would leave the library's ops out of the record (outputs are committed and
    read outside the worker, so it gains no other way: work done late is still counted by the parent's clock).

    Everything it uses is bound here, in its closure (reachable only through the interpreter's profiler or
    monitoring slots), so a replaced builtin is not called from inside it; candidate code is told by file name and
    by code identity (:func:`harness.execute.worker.rules.audit.install`'s ``own``)."""
    write, exit_, ident, get_ident = os.write, os._exit, id, threading.get_ident
    main = get_ident()
    disable = getattr(getattr(sys, "monitoring", None), "DISABLE", None)

    def theirs(code) -> bool:
        name = code.co_filename
        return (name.startswith(roots) and (name.endswith(".py") or not name.startswith(exempt_roots))) \
            or ident(code) in own

    def alarm(code) -> None:
        try:
            write(2, b"kernelgate: candidate code ran on the worker's trusted thread: "
                  + code.co_qualname.encode(errors="replace") + b" ("
                  + code.co_filename.encode(errors="replace") + b")\n")
        finally:
            exit_(EXIT_TRUSTED_THREAD)

    def profile(frame, event, arg):
        if event == "call" and get_ident() == main and theirs(frame.f_code):
            alarm(frame.f_code)

    def started(code, offset):
        if not theirs(code):
            return disable  # library and harness code: never asked about again, on any thread
        if get_ident() == main:
            alarm(code)
        return None
    return profile, started


def arm(log: Any) -> str:
    """Arm the trusted-thread guard of an audit log (:func:`harness.execute.worker.rules.audit.install`) on the calling thread
    (the worker's main thread); returns how. Python 3.12 instruments every thread's code for ``sys.setprofile``
    (the candidate's thread ran its launches at half speed on the H200, and the suite took twice as long): there,
    a ``sys.monitoring`` tool sees each function start instead, library code is switched off after its first
    start, and ``sys.monitoring`` is then removed from ``sys`` so that candidate code cannot switch the tool off.
    Before 3.12 a profile function on this thread costs the other threads nothing. Either way, from then on only
    ``log.disarm`` may change this thread's profiler or tracer (``log.state["sealed"]``, read by the audit hook)."""
    profile, started = log.guards
    mon = getattr(sys, "monitoring", None)
    tool = next((t for t in (4, 3, 5, 1, 0, 2) if mon is not None and _claim(mon, t)), None)
    if tool is None:
        sys.setprofile(profile)
        log.disarm = lambda: sys.setprofile(None)
        how = "sys.setprofile" if mon is None else "sys.setprofile (no free sys.monitoring tool)"
    else:
        mon.register_callback(tool, mon.events.PY_START, started)
        mon.register_callback(tool, mon.events.PY_RESUME, started)
        mon.set_events(tool, mon.events.PY_START | mon.events.PY_RESUME)
        log.disarm = lambda: mon.set_events(tool, 0)
        del sys.monitoring
        how = f"sys.monitoring tool {tool}"
    log.state["sealed"] = log.disarm.__code__
    return how


def _claim(mon: Any, tool: int) -> bool:
    """Whether ``sys.monitoring`` tool id ``tool`` was free and is now KernelGate's."""
    try:
        mon.use_tool_id(tool, "kernelgate")
    except ValueError:
        return False
    return True
