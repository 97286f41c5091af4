"""Identity checks of what the worker relies on: was a function of torch, Triton or the harness replaced?

Assigning to an attribute of a module or a class is not an audited event in
CPython, so the audit hooks cannot refuse ``torch.cuda.synchronize = fake``
or ``DeviceTimer.sample = fake``. Instead the worker snapshots, once its own
hooks are in place and before the candidate is imported, the identity of
every callable and class attribute of the modules and classes below, and
compares after the import and after every call: a replaced or deleted entry
is a reported fact (``patched torch.nn.functional.layer_norm``), and the
parent records REWARD_HACK. New attributes (libraries add caches lazily) are
not flagged; only what existed at the snapshot is. ``gc.callbacks`` is
compared as a whole: the collector runs its callbacks on whichever thread
allocates, the worker's trusted thread among them.

The worker's trusted loop also holds its own references to the functions it
calls (captured before the import), so a replacement changes what the
candidate sees, not what the worker does; this check is how the replacement
is noticed.
"""

from __future__ import annotations

import sys
import types
from typing import Any, Iterable

MODULES = ("torch", "torch.nn.functional", "torch.cuda", "torch.cuda.streams", "torch.autograd", "torch.profiler",
           "torch.autograd.profiler", "torch.utils._python_dispatch", "torch.overrides", "torch._C", "triton",
           "triton.runtime.jit", "triton.runtime.autotuner", "triton.testing", "tilelang", "tilelang.jit", "time",
           "torch._C._autograd", "torch.autograd.profiler_util", "signal", "numpy", "builtins", "os", "select",
           "copyreg", "gc")
CLASSES = ("torch.Tensor", "torch.nn.Module", "torch.cuda.Event", "torch.cuda.Stream",
           "torch.autograd.profiler_util.FunctionEvent", "torch.profiler.profile",
           "triton.runtime.jit.JITFunction", "triton.runtime.autotuner.Autotuner", "tilelang.jit.kernel.JITKernel")
HARNESS_PREFIX = "harness."


def _resolve(dotted: str) -> Any:
    mod_name, _, attr = dotted.rpartition(".")
    mod = sys.modules.get(mod_name)
    return getattr(mod, attr, None) if mod is not None else None


def _watched(value: Any) -> bool:
    return callable(value) or isinstance(value, (types.ModuleType, type, staticmethod, classmethod, property))


class TamperCheck:
    """Snapshot of the watched entries (the objects themselves); :meth:`changed` names what differs now."""

    def __init__(self) -> None:
        self._snap: dict[str, tuple[Any, dict[str, Any]]] = {}

    def _targets(self) -> Iterable[tuple[str, dict]]:
        for name in MODULES:
            mod = sys.modules.get(name)
            if mod is not None:
                yield name, vars(mod)
        for name in CLASSES:
            cls = _resolve(name)
            if isinstance(cls, type):
                yield name, cls.__dict__
        for name, mod in list(sys.modules.items()):
            if (name == "harness" or name.startswith(HARNESS_PREFIX)) and mod is not None:
                yield name, vars(mod)
                for attr, value in list(vars(mod).items()):
                    if isinstance(value, type) and getattr(value, "__module__", "") == name:
                        yield f"{name}.{attr}", value.__dict__

    def snapshot(self) -> None:
        self._snap = {}
        for name, ns in self._targets():
            self._snap[name] = (ns, {k: v for k, v in list(ns.items()) if _watched(v)})
        import gc

        self._gc_callbacks = (gc.callbacks, tuple(gc.callbacks))

    def watch(self, label: str, obj: Any, names: Iterable[str]) -> None:
        """Also compare these instance attributes of ``obj`` (the worker's own components: its channel, timer,
        profiler, guards, audit log, this check) with what they are now. Bug it stops: candidate code that
        reached the worker through ``gc`` (session 15's red team, past the audit hooks) swapped ``worker.guards``
        for a copy whose recorder saw nothing; module and class entries were watched, the worker's were not."""
        ns = vars(obj)
        self._snap[label] = (ns, {n: ns[n] for n in names if n in ns})

    def changed(self, limit: int = 8) -> list[str]:
        out = []
        callbacks, before = getattr(self, "_gc_callbacks", (None, ()))
        if callbacks is not None and (sys.modules["gc"].callbacks is not callbacks or tuple(callbacks) != before):
            # the collector calls these on whichever thread allocates: the worker's trusted one too
            out.append("added a garbage-collector callback (gc.callbacks)")
        for name, (ns, originals) in self._snap.items():
            for key, original in originals.items():
                value = ns.get(key, _MISSING)
                if value is _MISSING:
                    out.append(f"deleted {name}.{key}")
                elif value is not original:
                    out.append(f"patched {name}.{key}")
                if len(out) >= limit:
                    return out
        return out


_MISSING = object()
