"""Python audit hooks (PEP 578) a worker installs before it imports the candidate.

Not the trust boundary (the OS draws it: :mod:`harness.execute.boundary`). What the hooks protect that the
boundary and the outside checks do not:

* frames, the garbage collector's object walks, ``ctypes``, new code objects, guarded attributes, tracing, a
  process's memory file: the worker's own objects, above all the kernel profiler's table, the CPU path's
  dispatch record and the launch counter. Library-fallback detection rests on those claims, and nothing outside
  the worker reproduces them.
* processes, signals and sockets asked for by candidate code: the charge. The namespaces make such an attempt
  harmless but silent; the hook makes it a REWARD_HACK the reward sees.

A refused operation raises :class:`Refused` in the candidate and is logged; the parent records every logged
refusal as REWARD_HACK (an honest kernel never needs these: ``tests/execute/test_honest_libraries.py`` runs
production libraries under them).

Which code is "the candidate's": a frame whose file lies under the
candidate's scratch folder (its file, anything it wrote there). Code
compiled from a string has a made-up file name (``<string>``, ``<stdin>``):
it is the code of the first real, non-standard-library file up its stack,
and the candidate's when no such file is there (a thread it started). Bug it
stops: a string annotation evaluated by ``typing.get_type_hints`` ran
``exec``, ``gc.get_objects``, ``ctypes`` and ``subprocess`` as "<string>",
which the hooks took for library code. An event is
refused when it comes *from* candidate code::

    direct events (frames, gc, exec/compile, new code objects, tracing):
        the Python frame that triggered it is the candidate's; or it is
        ``inspect``'s (currentframe, stack, trace, ...) called by the candidate;
        or it is another standard-library frame (not one of OWN_USE) and the
        first frame up the stack that is not, nor a module's import, is the
        candidate's: a function handed the operation as a callable
        (``functools.singledispatch(gc.get_objects)``), or a thread with
        nothing but the standard library beneath it, is the candidate's
        (``exec`` and ``compile`` excepted: the standard library compiles and
        runs strings for honest callers, CPython's traceback printer among
        them; what such code then does is judged by its frames' owner)
    library-mediated events (ctypes, processes, sockets):
        the first frame outside the standard library is the candidate's
        (Triton calling the C compiler, or torch loading a library, is not),
        or there is none (a thread started with a standard-library target)
    screened events (gc, frames, code objects, guarded attributes, processes):
        as above, except that a library frame owns the event only when its
        code names the operation (SCREENED_OPS); one that does not is a
        trampoline (``torch.utils._pytree.tree_map(gc.get_objects, ...)``)
        and the walk goes on up the stack

Since trust goes by file name, a file name is checked where code that wears
one runs or loads while candidate code is on the stack: a code object that
names a real file is run (``exec``) only by importlib's own loader for that
file (``InspectLoader.source_to_code`` compiles any text under any name, and
``_imp._fix_co_filename`` renames a code object unaudited); ``marshal``
loads code only for importlib's loader of a file outside the candidate's
folder (a ``.pyc`` keeps the name it was built with, ``py_compile``'s
``dfile`` picks it). ``compile`` itself is not checked: CPython's own
traceback printer compiles pieces of a library file's lines under its name
(an honest candidate's exception in ``__del__`` would have been refused).

Limits (docs/security.md): hooks are per process and see only what CPython
audits; attribute assignment on classes and modules is not audited (the
worker verifies the identity of what it uses instead, see
:mod:`harness.execute.worker.rules.tamper`); native code already loaded can do anything.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import threading
import types

from harness.execute.worker.rules import trusted_thread

DIRECT = frozenset({
    "sys._getframe", "sys._current_frames", "sys._getframemodulename", "sys.settrace", "sys.setprofile",
    "gc.get_objects", "gc.get_referrers", "gc.get_referents", "compile", "exec", "code.__new__",
    "function.__new__", "object.__getattr__", "object.__setattr__", "object.__delattr__", "sys.addaudithook",
    "sys.monitoring.register_callback",
})
MEDIATED_PREFIXES = ("ctypes.", "subprocess.", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                     "os.forkpty", "os.kill", "os.killpg", "pty.spawn", "socket.", "cffi")
FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back", "f_globals", "f_locals"})
GUARDED_ATTRS = FRAME_ATTRS | {"__code__", "__globals__", "__closure__", "gi_code", "cr_code", "ag_code", "f_code"}
FRAME_EVENTS = frozenset({"sys._getframe", "sys._current_frames", "sys._getframemodulename"})
CODE_EVENTS = frozenset({"exec", "marshal.loads", "marshal.load"})
"""Events that run or load code: checked for a borrowed file name while candidate code is on the stack."""
OWN_USE = ("/warnings.py", "/collections/__init__.py", "/enum.py", "/typing.py", "/logging/__init__.py",
           "/dataclasses.py", "/inspect.py", "/traceback.py", "/abc.py", "/linecache.py")
"""Standard-library modules whose own code does a direct event (a frame, ``__code__``) when honest code calls
them: ``warnings.warn`` and ``logging`` find their caller, ``namedtuple``, ``enum`` and ``typing`` their module,
``inspect.signature`` reads ``__code__``. Any other standard-library frame that raises a direct event for
candidate code is a function handed the operation: ``functools.singledispatch(gc.get_objects)``, ``copy.copy`` of
an object whose ``__reduce_ex__`` returns ``gc.get_objects``."""
HARNESS_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))) + os.sep
"""The harness package's folder: a thread whose stack has its code is the harness's (the candidate thread's
loop), not one the candidate started."""
PROCESS_OPS = {
    "subprocess.Popen": ("Popen",), "os.system": ("system",), "os.fork": ("fork",), "os.forkpty": ("forkpty",),
    "os.kill": ("kill",), "os.killpg": ("killpg",), "pty.spawn": ("spawn",),
    "os.exec": ("execv", "execve", "execl", "execle", "execlp", "execlpe", "execvp", "execvpe"),
    "os.posix_spawn": ("posix_spawn", "posix_spawnp"),
    "os.spawn": ("spawnv", "spawnve", "spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnvp", "spawnvpe"),
}
SCREENED_OPS = {
    "gc.get_objects": ("get_objects",), "gc.get_referrers": ("get_referrers",),
    "gc.get_referents": ("get_referents",), "sys._current_frames": ("_current_frames",),
    "sys._getframe": ("_getframe",), "sys._getframemodulename": ("_getframemodulename", "_getframe"),
    "sys.settrace": ("settrace",), "sys.setprofile": ("setprofile",), "function.__new__": ("FunctionType",),
    "code.__new__": ("CodeType", "replace"), "sys.addaudithook": ("addaudithook",),
    "sys.monitoring.register_callback": ("register_callback",), **PROCESS_OPS,
}
"""Events a library's frame owns only when its own code names the operation (a name or string constant in the
function, e.g. ``gc.get_objects``, ``subprocess.run``, ``getattr(f, "__code__")``), or its module is being
imported. A library frame that does not is a trampoline: ``torch.utils._pytree.tree_map(gc.get_objects, ...)``,
``tree_map(os.system, ...)``, ``numpy.vectorize(gc.get_objects)`` ran the operation for the candidate that handed
it over. The attributes in :data:`GUARDED_ATTRS` are screened the same way
(the name is the attribute's). Not screened, so owned by the first library frame as before: ``ctypes``
(``ctypes.call_function`` is raised by every foreign call a library makes), sockets, ``compile`` and ``exec``
(what code run so does is judged by its frames). ``sys._getframe`` is screened although libraries call it
everywhere (by that name): a frame's ``f_back`` and ``f_globals`` are not audited, so the frame itself is the
gate."""
MEDIATORS = {
    **{e: ("/subprocess.py", "/platform.py", "/ctypes/util.py", "/os.py", "/pty.py", "/multiprocessing/",
           "/concurrent/futures/process.py") for e in PROCESS_OPS},
    "code.__new__": ("/types.py",), "function.__new__": ("/types.py",),
}
"""Standard-library modules that do an operation for the library calling them: the library then names the
function it called (``subprocess.check_output``, ``platform.architecture``, ``inspect.stack``) instead of the
event. Frame and attribute events take ``inspect`` and ``traceback`` (:data:`FRAME_HELPERS`)."""
FRAME_HELPERS = ("inspect.py", "traceback.py")
"""Stdlib modules that hand frames to their caller (inspect.currentframe, stack, trace; traceback.walk_stack):
a frame event they raise for candidate code is the candidate's. Their other reads (``inspect.signature``
reading ``__code__``) are not."""


class Refused(RuntimeError):
    """Raised inside candidate code for an operation the audit hooks do not allow."""


class _Unattributed(Exception):
    """The event has no Python frame to attribute it to."""


NO_CALLER = object()
_UNATTRIBUTED = "has no Python caller to attribute it to (a callback run from C, e.g. at exit): refused, not logged"


class AuditLog:
    """What the hooks refused, in order (``event: detail``), for the worker's next report."""

    def __init__(self) -> None:
        self._items: list[str] = []
        self._lock = threading.Lock()
        self.guards = None
        """The trusted thread's guard functions (:func:`harness.execute.worker.rules.trusted_thread.guards`), set by
        :func:`install` and armed by :func:`harness.execute.worker.rules.trusted_thread.arm`."""
        self.disarm = None
        self.state: dict = {}

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
    _snapshot_loaders()
    roots = tuple(r.rstrip("/") + "/" for r in candidate_roots)
    exempt_roots = tuple(r.rstrip("/") + "/" for r in exempt)
    stdlib = _stdlib_roots()
    site = tuple(p for p in sys.path if "site-packages" in p or "dist-packages" in p)
    guard = threading.local()
    getframe = sys._getframe
    get_ident = threading.get_ident
    main_ident = get_ident()
    state: dict = {"sealed": None, "transparent": set()}
    """Once the trusted thread's guard is armed (:func:`harness.execute.worker.rules.trusted_thread.arm`), the code object of
    its ``disarm``: the only code allowed to change that thread's profiler or tracer. ``transparent``: code objects
    the walk passes over, as it does the standard library's."""
    transparent = state["transparent"]

    def is_candidate(filename: str) -> bool:
        # a compiler cache's Python source is whoever wrote it: the caches hold binaries, never .py files
        return filename.startswith(roots) and (filename.endswith(".py") or not filename.startswith(exempt_roots))

    own: dict[int, object] = {}
    """The candidate's code objects by identity (kept alive, so an id is never reused): every code object run
    (``exec``) under a candidate file's name, with the functions it defines. A rename in place
    (``_imp._fix_co_filename`` on a live function's code, reached through ``dis.Bytecode(f).codeobj``) changes
    the name, not the object."""

    def remember(code: object) -> None:
        todo = [code]
        while todo:
            c = todo.pop()
            if isinstance(c, types.CodeType) and id(c) not in own:
                own[id(c)] = c
                todo.extend(k for k in c.co_consts if isinstance(k, types.CodeType))

    def mine(frame) -> bool:
        """Whether the frame runs candidate code: by its file's name, or by its code object's identity."""
        return is_candidate(frame.f_code.co_filename) or id(frame.f_code) in own

    def is_stdlib(filename: str) -> bool:
        return filename.startswith("<frozen") or (filename.startswith(stdlib) and not filename.startswith(site))

    def owner(frame, imports: bool = False, ops: frozenset | None = None, mediators: tuple = ()) -> bool:
        """Whether the first frame from ``frame`` outward that is neither the standard library's nor made-up
        (code compiled from a string) is the candidate's. With ``imports``, a module being imported (importlib
        running its code) is the library's too. With no such frame, the candidate's: nothing but the standard
        library beneath means a thread it started (a ``ThreadPoolExecutor`` running ``subprocess.run``).

        With ``ops`` (a screened event's names), a library frame is the owner only when its code names one of
        them, or the function it called in one of the ``mediators``, or is a module's body; one that does not
        is passed over as a trampoline. With no owner found above a library frame, the event is the library's
        on the main thread or under the harness's own code (the candidate thread's loop), and the candidate's on
        any other thread (one it started to run the trampoline)."""
        outer = None
        passed = harness = False
        while frame is not None:
            code = frame.f_code
            if code in transparent:
                frame = frame.f_back
                continue
            if id(code) in own:
                return True
            name = code.co_filename
            if imports and code is _IMPORT_EXEC[0]:
                return False
            if _made_up(name) or is_stdlib(name):
                if not passed and not _made_up(name):
                    outer = code
                frame = frame.f_back
                continue
            if is_candidate(name):
                return True
            if ops is None or code.co_name == "<module>":
                return False
            harness = harness or name.startswith(HARNESS_ROOT)
            if not passed:
                passed = True
                if outer is not None and any(m in outer.co_filename for m in mediators):
                    ops = ops | _parts(outer)
            if _names(code, ops):
                return False
            frame = frame.f_back
        return not passed or not (harness or get_ident() == main_ident)

    def trigger():
        """The Python frame that triggered the event (0: this, 1: its caller here, 2: the hook, 3: it), or
        :data:`NO_CALLER` when the event came from C with no Python frame (an ``atexit`` callback)."""
        try:
            return getframe(3)
        except ValueError:
            return NO_CALLER

    def origin(event: str, direct: bool, frames: bool, ops: frozenset | None, mediators: tuple) -> bool:
        frame = trigger()
        if frame is NO_CALLER:
            raise _Unattributed
        name = frame.f_code.co_filename
        if direct:
            if mine(frame):
                return True
            if frames and name.endswith(FRAME_HELPERS):
                return owner(frame, ops=ops, mediators=FRAME_HELPERS)
            if _made_up(name):
                return owner(frame, ops=ops, mediators=mediators)
            if is_stdlib(name):
                if event in ("compile", "exec") or name.endswith(OWN_USE):
                    return False
                return owner(frame, imports=True, ops=ops, mediators=mediators)  # handed the operation, or an import
            return ops is not None and owner(frame, ops=ops, mediators=mediators)
        return owner(frame, imports=event == "import", ops=ops, mediators=mediators)  # a module importing it: its own

    def borrowed_name(event: str, args: tuple) -> str | None:
        """For a code event made by the standard library (or by made-up code) while candidate code is on the
        stack: why the code it makes or runs may wear a file name that is not its own, else None."""
        frame = trigger()
        if frame is NO_CALLER:
            raise _Unattributed
        caller = frame.f_code.co_filename
        if not (is_stdlib(caller) or _made_up(caller)):
            return None  # a library (Triton, torch) or the candidate itself (refused as a direct event)
        stack, f = [], frame
        while f is not None:
            stack.append(f)
            f = f.f_back
        if not any(mine(f) for f in stack):
            return None
        if event == "exec":
            code = args[0] if args else None
            filename = getattr(code, "co_filename", None)
            if id(code) in own:
                return None
            if not isinstance(filename, str) or _made_up(filename) or is_candidate(filename):
                return None
            if any(_loads(f, "exec_module", trusted) for f in stack):
                return None
            if filename.startswith("<frozen ") and any(f.f_code is _FROZEN_EXEC[0] for f in stack):
                return None  # a frozen module's code, from the interpreter's own data
            return f"code named {filename[:80]} run by other than importlib's loader of that file"
        if any(_loads(f, "get_code", trusted) for f in stack):  # marshal.loads / marshal.load
            return None
        return "marshal data loaded as code other than by importlib from a file outside the candidate's folder"

    def trusted(path: str) -> bool:
        return bool(path) and not _made_up(path) and not path.startswith(roots)

    def hook(event: str, args: tuple) -> None:
        if event in ("sys.setprofile", "sys.settrace") and state["sealed"] is not None and get_ident() == main_ident:
            # whoever asks: a finalizer (weakref.finalize(obj, sys.setprofile, None)) run on this thread has only
            # the standard library and the harness beneath it, which the walk below would take for the library's
            frame = trigger()
            if frame is NO_CALLER or frame.f_code is not state["sealed"]:
                log.add(f"{event}: on the trusted thread")
                raise Refused(f"kernelgate: {event} on the worker's trusted thread (audit hook); see docs/security.md")
        if event == "open":
            if args and _memory_file(args[0]):
                log.add(f"open: ...{str(args[0])[-60:]}")
                raise Refused("kernelgate: a process's memory file is not opened in a worker (audit hook); see "
                              "docs/security.md")
            return
        if event == "exec" and args and isinstance(getattr(args[0], "co_filename", None), str) \
                and is_candidate(args[0].co_filename):
            remember(args[0])
        if event in CODE_EVENTS and not getattr(guard, "busy", False):
            guard.busy = True
            try:
                why = borrowed_name(event, args)
            except _Unattributed:
                raise Refused(f"kernelgate: {event} {_UNATTRIBUTED} (audit hook)") from None
            finally:
                guard.busy = False
            if why is not None:
                log.add(f"{event}: {why}")
                raise Refused(f"kernelgate: {why} (audit hook); see docs/security.md")
        frames = event in FRAME_EVENTS
        ops = SCREENED_OPS.get(event)
        if event in DIRECT:
            if event.startswith("object."):
                if len(args) < 2 or args[1] not in GUARDED_ATTRS:
                    return
                frames = args[1] in FRAME_ATTRS
                ops = (args[1],)
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
            refused = origin(event, direct, frames, None if ops is None else frozenset(ops),
                             MEDIATORS.get(event, ()))
        except _Unattributed:
            raise Refused(f"kernelgate: {event} {_UNATTRIBUTED} (audit hook)") from None
        finally:
            guard.busy = False
        if refused:
            detail = f"{event}: {', '.join(str(a)[:40] for a in args[:2])}" if args else event
            log.add(detail)
            raise Refused(f"kernelgate: {event} is not allowed in candidate code (audit hook); see docs/security.md")

    sys.addaudithook(hook)
    log.guards = trusted_thread.guards(roots, exempt_roots, own)
    log.state = state
    return log


def _memory_file(path: object) -> bool:
    """Whether ``path`` names a process's memory (``/proc/self/mem``, ``/proc/self/task/TID/mem``, or a link to
    one): writing it rewrites the worker's memory, reading it reads the channel's key. Landlock cannot refuse it:
    ``/proc/self/task`` must stay writable (CUDA names its threads there), and ``mem`` lies beneath it. Bug it
    stops: a sandboxed candidate opened ``/proc/self/task/TID/mem`` for writing and patched its own process's
    bytes, no ``ctypes`` needed. A relative ``mem`` is refused whatever the folder (``os.open``
    with a ``dir_fd`` names no folder in its audit event)."""
    if isinstance(path, bytes):
        path = path.decode(errors="replace")
    if not isinstance(path, str):
        return False  # an open file descriptor: opened (and checked) before
    if path.rstrip("/").rsplit("/", 1)[-1] == "mem":
        return True
    real = os.path.realpath(path)
    return real.startswith("/proc/") and real.endswith("/mem")


def _made_up(filename: str) -> bool:
    """A code object's file name that names no file: code compiled from a string (``<string>``, ``<stdin>``),
    not the interpreter's frozen modules."""
    return not filename or (filename.startswith("<") and not filename.startswith("<frozen"))


def _names(code: types.CodeType, ops: frozenset) -> bool:
    """Whether ``code`` names one of ``ops``: as a global or attribute it uses, or a string constant (also inside
    a constant tuple or frozenset, as ``getattr(f, name)`` over ``("__code__", ...)`` has it)."""
    if not ops.isdisjoint(code.co_names):
        return True
    todo = list(code.co_consts)
    while todo:
        c = todo.pop()
        if isinstance(c, str):
            if c in ops:
                return True
        elif isinstance(c, (tuple, frozenset)):
            todo.extend(c)
    return False


def _parts(code: types.CodeType) -> frozenset:
    """The names a caller uses for ``code``'s function: its name and its class's (``Popen`` for
    ``Popen.__init__``), dunders left out."""
    qual = getattr(code, "co_qualname", code.co_name)
    return frozenset(p for p in (code.co_name, *qual.split(".")) if not p.startswith(("__", "<")))


_LOADERS: dict[type, dict[str, object]] = {}
"""importlib's file loaders and zip importer, with their methods as they were when the hooks were installed."""
_LOADER_STATE = {"name", "path", "archive", "prefix", "_files"}
"""What such a loader's instance may hold: an instance attribute ``get_code`` or ``get_data`` would shadow the
method and hand importlib any code."""


_IMPORT_EXEC: list[object] = []
"""The code of importlib's ``_load_unlocked``: below it, a module's own code runs at its import."""
_FROZEN_EXEC: list[object] = []
"""The code of importlib's ``FrozenImporter.exec_module``, which runs frozen modules' code ("<frozen runpy>")."""


def _snapshot_loaders() -> None:
    import importlib.machinery
    import zipimport

    import importlib._bootstrap

    _FROZEN_EXEC[:] = [importlib.machinery.FrozenImporter.exec_module.__code__]
    _IMPORT_EXEC[:] = [importlib._bootstrap._load_unlocked.__code__]
    for cls in (importlib.machinery.SourceFileLoader, importlib.machinery.SourcelessFileLoader,
                zipimport.zipimporter):
        _LOADERS[cls] = _methods(cls)


def _methods(cls: type) -> dict[str, object]:
    """The class's attributes as its MRO defines them (raw: a classmethod read through the class is a new
    object each time)."""
    out: dict[str, object] = {}
    for k in reversed(cls.__mro__):
        out.update((n, v) for n, v in vars(k).items() if not n.startswith("__"))
    return out


def _loads(frame, method: str, trusted) -> bool:
    """Whether ``frame`` is importlib's own ``method`` (``exec_module`` or ``get_code``) of a file loader or zip
    importer (exact class, methods as installed, no instance attributes but its own: a subclass or a patched
    method may return any code) for a file or archive ``trusted`` accepts."""
    code = frame.f_code
    if code.co_name != method or not code.co_filename.startswith(("<frozen importlib", "<frozen zipimport")):
        return False
    owner = frame.f_locals.get("self")
    methods = _LOADERS.get(type(owner))
    if methods is None or not set(getattr(owner, "__dict__", {})) <= _LOADER_STATE:
        return False
    now = _methods(type(owner))
    if now.keys() != methods.keys() or any(now[n] is not m for n, m in methods.items()):
        return False
    path = getattr(owner, "archive", None) if hasattr(owner, "archive") else getattr(owner, "path", None)
    return isinstance(path, str) and trusted(path)
