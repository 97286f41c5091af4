"""Python audit hooks (PEP 578) a worker installs before it imports the candidate.

Defence in depth, not the trust boundary: what the hooks refuse would let
candidate code reach or rewrite the worker's own state (frames of other
threads, the garbage collector's view of every object, raw memory through
``ctypes``, new code objects, processes, sockets). A refused operation raises
:class:`Refused` in the candidate and is logged; the parent treats every
logged refusal as a reward hack (an honest kernel never needs these).

Which code is "the candidate's": a frame whose file lies under the
candidate's scratch folder (its file, anything it wrote there). An event is
refused when it comes *from* candidate code::

    direct events (frames, gc, exec/compile, new code objects, tracing):
        the Python frame that triggered it is the candidate's, or it is
        ``inspect``'s (currentframe, stack, trace, ...) called by the candidate
    library-mediated events (ctypes, processes, sockets):
        the first frame outside the standard library is the candidate's
        (Triton calling the C compiler, or torch loading a library, is not)

Limits (README "Security"): hooks are per process and see only what CPython
audits; attribute assignment on classes and modules is not audited (the
worker verifies the identity of what it uses instead, see
:mod:`harness.execute.tamper`); native code already loaded can do anything.
"""

from __future__ import annotations

import sys
import sysconfig
import threading

DIRECT = frozenset({
    "sys._getframe", "sys._current_frames", "sys._getframemodulename", "sys.settrace", "sys.setprofile",
    "gc.get_objects", "gc.get_referrers", "gc.get_referents", "compile", "exec", "code.__new__",
    "function.__new__", "object.__getattr__", "object.__setattr__", "object.__delattr__",
})
MEDIATED_PREFIXES = ("ctypes.", "subprocess.", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                     "os.forkpty", "os.kill", "os.killpg", "pty.spawn", "socket.", "cffi")
FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back", "f_globals", "f_locals"})
GUARDED_ATTRS = FRAME_ATTRS | {"__code__", "__globals__", "__closure__"}
FRAME_EVENTS = frozenset({"sys._getframe", "sys._current_frames", "sys._getframemodulename"})
FRAME_HELPERS = ("inspect.py", "traceback.py")
"""Stdlib modules that hand frames to their caller (inspect.currentframe, stack, trace; traceback.walk_stack):
a frame event they raise for candidate code is the candidate's. Their other reads (``inspect.signature``
reading ``__code__``) are not."""


class Refused(RuntimeError):
    """Raised inside candidate code for an operation the audit hooks do not allow."""


class AuditLog:
    """What the hooks refused, in order (``event: detail``), for the worker's next report."""

    def __init__(self) -> None:
        self._items: list[str] = []
        self._lock = threading.Lock()

    def add(self, item: str) -> None:
        with self._lock:
            if len(self._items) < 64:
                self._items.append(item[:200])

    def take(self) -> tuple[str, ...]:
        with self._lock:
            out, self._items = tuple(self._items), []
            return out


def _stdlib_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths.get("stdlib", ""), paths.get("platstdlib", "")}
    return tuple(r.rstrip("/") + "/" for r in roots if r)


def install(candidate_roots: tuple[str, ...], exempt: tuple[str, ...] = ()) -> AuditLog:
    """Install the hook (for the rest of the process's life) and return its log.

    Files under ``candidate_roots`` are candidate code, except those under
    ``exempt`` (the compilers' caches inside the scratch folder).
    """
    log = AuditLog()
    roots = tuple(r.rstrip("/") + "/" for r in candidate_roots)
    exempt_roots = tuple(r.rstrip("/") + "/" for r in exempt)
    stdlib = _stdlib_roots()
    site = tuple(p for p in sys.path if "site-packages" in p or "dist-packages" in p)
    guard = threading.local()
    getframe = sys._getframe

    def is_candidate(filename: str) -> bool:
        return filename.startswith(roots) and not filename.startswith(exempt_roots)

    def is_stdlib(filename: str) -> bool:
        return filename.startswith("<frozen") or (filename.startswith(stdlib) and not filename.startswith(site))

    def origin(direct: bool, frames: bool) -> bool:
        frame = getframe(2)  # 0: origin, 1: hook, 2: the code that triggered the event
        if frame is None:
            return False
        name = frame.f_code.co_filename
        if direct:
            if is_candidate(name):
                return True
            if not (frames and name.endswith(FRAME_HELPERS)):
                return False
            frame = frame.f_back
        while frame is not None:
            name = frame.f_code.co_filename
            if not is_stdlib(name):
                return is_candidate(name)
            frame = frame.f_back
        return False

    def hook(event: str, args: tuple) -> None:
        frames = event in FRAME_EVENTS
        if event in DIRECT:
            if event.startswith("object."):
                if len(args) < 2 or args[1] not in GUARDED_ATTRS:
                    return
                frames = args[1] in FRAME_ATTRS
            direct = True
        elif event.startswith(MEDIATED_PREFIXES) or (event == "import" and args and str(args[0]).split(".")[0]
                                                      in ("ctypes", "_ctypes", "cffi", "_cffi_backend")):
            direct = False
        else:
            return
        if getattr(guard, "busy", False):
            return
        guard.busy = True
        try:
            refused = origin(direct, frames)
        finally:
            guard.busy = False
        if refused:
            detail = f"{event}: {', '.join(str(a)[:40] for a in args[:2])}" if args else event
            log.add(detail)
            raise Refused(f"kernelgate: {event} is not allowed in candidate code (audit hook); see README 'Security'")

    sys.addaudithook(hook)
    return log
