"""Runtime guards installed in the worker *before* candidate code is imported.

Everything here runs in the candidate's process, so what it counts is a
claim (the parent's trusted checks decide; see harness.execute.wire.protocol):

* Launch counters: every Triton launch (compiled or interpreted) and every
  TileLang kernel call increments a counter, and the kernels' names are kept
  (the profiler's kernel table is matched against them). On the CPU path,
  where no profiler sees kernels, a forward that launched none of the
  candidate's own DSL kernels is not a DSL kernel.
* Library interception (CPU path): a ``TorchDispatchMode`` records the aten
  ops a forward dispatches and the input elements of each; one of the
  problem's ``library_aten`` ops on a real share of the forward's inputs
  means the candidate fell back to the library it claims to replace (a small
  tensor of partial results finished with it does not). On a GPU the
  profiler's kernel attribution does this job instead.
* TileLang lowering on a machine without a GPU: ``tilelang.compile`` is
  replaced by a function that lowers the kernel to CUDA source for an explicit
  target (default sm_90a) and returns a stub that raises
  :class:`LoweredOnly` when launched, so a candidate's forward runs up to its
  first TileLang launch and the lowered source is kept for inspection.
* Autotuners on the CPU path: the Triton interpreter cannot benchmark, so an autotuned kernel runs with the
  first of its configs that survive its own pruning.
* Dry launches (GPU precompile): inside :func:`dry_launches`, a Triton launch
  compiles its kernel without launching it, and an autotuned Triton kernel
  compiles every config without benchmarking any (the choice is left to the
  first real call, which then runs with the GPU to itself). The compile, the slow
  part, then overlaps other candidates' timing while the GPU work does not.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any


class LoweredOnly(Exception):
    """Raised by a TileLang kernel stub on a machine that cannot execute it."""


class DryAutotuned(BaseException):
    """Ends a dry forward at its first autotuned kernel, once every config is compiled (the choice is the first real
    call's). A BaseException: the candidate's and libraries' ``except Exception`` fallbacks do not see it."""


class _Dry:
    active = False
    autotuned = False  # an autotuner was reached inside the last dry block


def dry_saw_autotune() -> bool:
    """Whether the last dry forward reached an autotuner (its choice is then made with the GPU held alone)."""
    return _Dry.autotuned


class dry_launches:
    """Context manager: Triton launches compile only; autotuners compile all configs, pick none."""

    def __enter__(self) -> "dry_launches":
        _Dry.active = True
        _Dry.autotuned = False
        return self

    def __exit__(self, *exc: Any) -> None:
        _Dry.active = False


class LaunchCounter:
    def __init__(self) -> None:
        self.triton = 0
        self.tilelang = 0
        self.lowered_sources: list[str] = []
        self.names: set[str] = set()
        """Names of the DSL kernels launched (Triton function names, TileLang ``__global__`` names)."""

    @property
    def total(self) -> int:
        return self.triton + self.tilelang

    def reset(self) -> None:
        self.triton = 0
        self.tilelang = 0


COUNTER = LaunchCounter()


_INSTALLED: set[str] = set()
_GLOBAL_FN = re.compile(r"__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s*)?(\w+)\s*\(")


def install_triton_counter() -> bool:
    """Count Triton launches by wrapping ``run`` of JIT and interpreted functions (once per process)."""
    if "triton" in _INSTALLED:
        return True
    try:
        from triton.runtime import jit as tjit
    except Exception:  # noqa: BLE001 - triton missing or broken: nothing to count
        return False
    classes = [tjit.JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    except Exception:  # noqa: BLE001
        pass
    for cls in classes:
        orig = cls.run

        def run(self, *args, _orig=orig, **kwargs):
            # the name of every kernel this process compiles, launched or not: a library that caches the compiled
            # kernel of its first call and launches it directly afterwards (FlagGems' LibEntry) never comes back
            # through run, and after a dry forward its first call was the compile-only one
            name = getattr(self, "__name__", None) or getattr(getattr(self, "fn", None), "__name__", None)
            if isinstance(name, str) and len(COUNTER.names) < 256:
                COUNTER.names.add(name)
            if _Dry.active and "warmup" in kwargs:
                kwargs["warmup"] = True
                kernel = _orig(self, *args, **kwargs)
                # also load the binary and build its launcher (Triton does both lazily at the
                # first real launch; the launcher can be a C compile): still no kernel runs
                init = getattr(kernel, "_init_handles", None)
                if callable(init):
                    try:
                        init()
                    except Exception:  # noqa: BLE001 - e.g. out of shared memory: the real launch reports it
                        pass
                return kernel
            if not kwargs.get("warmup", False):
                COUNTER.triton += 1
            return _orig(self, *args, **kwargs)

        cls.run = run
    _INSTALLED.add("triton")
    try:
        from triton.runtime.autotuner import Autotuner
    except Exception:  # noqa: BLE001
        return True
    orig_tune = Autotuner.run

    def tune(self, *args, **kwargs):
        if not _Dry.active:
            return orig_tune(self, *args, **kwargs)
        # compile every config (errors such as out-of-resources are the real
        # call's business), never benchmark, never fill the autotuner's cache
        _Dry.autotuned = True
        for config in self.configs:
            try:
                self.fn.run(*args, **{**kwargs, **config.all_kwargs()})
            except Exception:  # noqa: BLE001
                pass
        # no kernel is chosen, so none is returned: the dry forward ends here. Returning None instead was cached
        # by libraries that keep the first call's kernel (FlagGems' LibEntry), whose real calls then failed
        raise DryAutotuned(getattr(getattr(self, "fn", None), "__name__", "?"))

    Autotuner.run = tune
    if os.environ.get("TRITON_INTERPRET") == "1":
        # the interpreter has no benchmarker: an autotuned kernel runs with the first of its (pruned) configs, as
        # the dry launches compile without choosing; its correctness does not depend on which config runs
        orig_prune = Autotuner.prune_configs

        def one_config(self, kwargs, *args, **kw):
            return orig_prune(self, kwargs, *args, **kw)[:1]

        Autotuner.prune_configs = one_config
    return True


def install_tilelang_hooks(execute: bool, target: dict | None = None) -> bool:
    """Count TileLang launches (GPU) or lower-only with a stub (no GPU); once per process."""
    if "tilelang" in _INSTALLED:
        return True
    try:
        import sys

        import tilelang
        from tilelang.jit.kernel import JITKernel

        # "import tilelang.jit as m" would bind the jit *function* that shadows the
        # submodule; the module itself is what JITImpl.compile looks 'compile' up in
        tjit = sys.modules["tilelang.jit"]
    except Exception:  # noqa: BLE001
        return False
    if execute:
        orig_call = JITKernel.__call__
        seen: dict[int, tuple[str, ...]] = {}

        def call(self, *args, **kwargs):
            COUNTER.tilelang += 1
            if id(self) not in seen:
                try:
                    seen[id(self)] = tuple(_GLOBAL_FN.findall(self.get_kernel_source() or ""))
                except Exception:  # noqa: BLE001 - no source: the count still stands
                    seen[id(self)] = ()
                COUNTER.names.update(seen[id(self)][:16])
            return orig_call(self, *args, **kwargs)

        JITKernel.__call__ = call
        _INSTALLED.add("tilelang")
        return True

    from tilelang.tools.compile_only import compile_kernel_source

    lower_target = target or {"kind": "cuda", "arch": "sm_90a"}

    class _Stub:
        def __init__(self, source: str):
            self.source = source

        def get_kernel_source(self) -> str:
            return self.source

        def __call__(self, *args, **kwargs):
            COUNTER.tilelang += 1
            raise LoweredOnly("TileLang kernel lowered to CUDA source; it cannot execute without a GPU")

    def lower_only(func=None, *args, **kwargs):
        source = compile_kernel_source(func, target=lower_target)
        COUNTER.lowered_sources.append(source)
        return _Stub(source)

    tjit.compile = lower_only
    tilelang.compile = lower_only
    _INSTALLED.add("tilelang")
    return True


class AtenRecorder:
    """Context manager recording the aten overload packets dispatched inside it, and the input elements each was
    dispatched on."""

    def __init__(self) -> None:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        recorder = self

        class _Mode(TorchDispatchMode):
            @classmethod
            def _should_skip_dynamo(cls) -> bool:
                # True (torch's default) wraps __torch_dispatch__ in torch._disable_dynamo, whose first call imports
                # Dynamo, Inductor and sympy: ~5 s of every CPU worker's warm-up, for a mode never compiled
                return False

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                name = str(func.overloadpacket.__name__)
                recorder.ops.add(name)
                n = sum(a.numel() for a in args if isinstance(a, torch.Tensor))
                recorder.elements[name] = recorder.elements.get(name, 0) + n
                return func(*args, **(kwargs or {}))

        self.ops: set[str] = set()
        self.elements: dict[str, int] = {}
        """Input elements each op was dispatched on, summed over its calls (its share of the forward's work)."""
        self._mode = _Mode()

    def __enter__(self) -> "AtenRecorder":
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._mode.__exit__(*exc)


def live_threads() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.ident is not None}


def candidate_threads(before: set[int], roots: tuple[str, ...]) -> int:
    """Python threads alive now that were not in ``before`` and may run candidate code: whose ``run`` (a subclass's
    own) or target is a function from a file under ``roots`` (the candidate's folder), or whose code is unknown (a
    C callable, a callable object). A thread whose code is a library's (tqdm's monitor, a thread pool's worker) is
    not counted: it runs no candidate code and cannot touch an output the candidate did not hand it."""
    import functools

    n = 0
    for t in threading.enumerate():
        if t.ident is None or t.ident in before:
            continue
        run = type(t).run
        fn = run if run is not threading.Thread.run else getattr(t, "_target", None)
        while isinstance(fn, functools.partial):
            fn = fn.func
        fn = getattr(fn, "__func__", fn)
        code = getattr(fn, "__code__", None)
        if code is None or code.co_filename.startswith(roots):
            n += 1
    return n


def live_children() -> set[int]:
    """Pids of this process's live children: /proc/self/task/*/children where the kernel has it, else a scan."""
    out: set[int] = set()
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children", "rb") as f:
                out.update(int(p) for p in f.read().split())
        return out
    except OSError:
        pass
    me = str(os.getpid())
    try:
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat", "rb") as f:
                        fields = f.read().rsplit(b")", 1)[1].split()
                    if fields[1].decode() == me and fields[0] != b"Z":
                        out.add(int(entry))
                except (OSError, IndexError):
                    continue
    except OSError:
        pass
    return out
