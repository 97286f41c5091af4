"""Identity checks of what the worker's own claims rest on: was a function of the profiler, the DSL launch hooks
or the harness replaced?

Protects: the kernel attribution and the CPU path's dispatch record (library-fallback detection), which are
claims made inside the worker that no outside check reproduces. Outputs, inputs, the library baseline and the
clock that decides are checked outside the worker, so replacing a torch function there (``torch.manual_seed``,
``F.layer_norm``, ``torch.cuda.synchronize``) gains a candidate nothing it could keep: those are not watched,
and libraries that wrap them (PyTorch's Dynamo wraps ``torch.manual_seed`` when it is imported) are not
accused (``tests/execute/test_honest_libraries.py``).

Assigning to an attribute of a module or a class is not an audited event in CPython, so the audit hooks cannot
refuse ``FunctionEvent.__init__ = fake`` or ``DeviceTimer.sample = fake``. Instead the worker snapshots, before
the candidate is imported, the identity of every callable and class attribute of the modules and classes below,
and compares after the import and at each phase's end: a replaced or deleted entry is a reported fact
(``patched triton.runtime.jit.JITFunction.run``), and the parent records REWARD_HACK. New attributes (libraries
add caches lazily) are not flagged; only what existed at the snapshot is.
"""

from __future__ import annotations

import sys
import types
from typing import Any, Iterable

MODULES = ("torch.profiler", "torch.autograd.profiler", "torch.autograd.profiler_util", "torch._C._autograd",
           "triton.runtime.jit", "triton.runtime.autotuner")
"""The kernel profiler's modules and Triton's launch path (the launch counter wraps them)."""
CLASSES = ("torch.autograd.profiler_util.FunctionEvent", "torch.profiler.profile", "triton.runtime.jit.JITFunction",
           "triton.runtime.autotuner.Autotuner", "tilelang.jit.kernel.JITKernel")
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

    def watch(self, label: str, obj: Any, names: Iterable[str]) -> None:
        """Also compare these instance attributes of ``obj`` (the worker's own components: its channel, timer,
        profiler, guards, audit log, this check) with what they are now. Bug it stops: candidate code that
        reached the worker through ``gc`` (past the audit hooks) swapped ``worker.guards`` for a copy whose recorder
        saw nothing; module and class entries were watched, the worker's were not."""
        ns = vars(obj)
        self._snap[label] = (ns, {n: ns[n] for n in names if n in ns})

    def changed(self, limit: int = 8) -> list[str]:
        out = []
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
