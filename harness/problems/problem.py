"""The loaded problem as records: :class:`Problem`, its :class:`Workload` s, and :class:`ProblemError`.

A problem file is read by :mod:`harness.problems.loader`; these records are what every later stage (the
planner, the engine, the checker, the reports) receives. They hold plain values only, so they cross process
boundaries as ``to_dict``/``from_dict``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DTYPES = ("float32", "float16", "bfloat16")
ELEM_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}
DEFAULT_TOLERANCE = {
    "float32": {"atol": 1e-4, "rtol": 1e-4},
    "float32+tf32": {"atol": 5e-3, "rtol": 5e-3},
    "float16": {"atol": 1e-2, "rtol": 1e-2},
    "bfloat16": {"atol": 1e-2, "rtol": 1e-2},
}
MODES = ("train", "eval")


class ProblemError(ValueError):
    """A malformed problem file. The message names the file, the field and the fix."""

    def __init__(self, path: Path | str, field_name: str, why: str):
        self.path = str(path)
        self.field = field_name
        self.why = why
        super().__init__(f"{path}: field '{field_name}': {why}")


@dataclass(frozen=True, slots=True)
class Workload:
    """One shape/dtype configuration of a problem, with its cost.

    Byte counts are DRAM bytes at the workload dtype. ``min_bytes`` is the
    roofline's memory term (every input read once, every output written once);
    ``input_bytes``/``output_bytes``/``param_bytes`` are the sizes of the actual
    tensors from a forward on meta tensors (None when that forward could not
    run; ``cost_note`` says why).
    """

    name: str
    params: dict[str, Any]
    """Final values of every size constant of the module at this workload (overrides applied, derived
    constants recomputed): what the records store. Passing them back to :func:`load_module` rebuilds the
    same module."""
    dtype: str
    tags: tuple[str, ...]
    atol: float
    rtol: float
    allow_tf32: bool
    flops: int
    """FLOPs of one forward; 0 when unknown (see ``flops_known``), so a roofline floor stays a lower bound."""
    min_bytes: int
    reduction_length: int | None
    input_bytes: int | None = None
    """Bytes of the tensors ``get_inputs()`` returns, floating ones cast to ``dtype``."""
    output_bytes: int | None = None
    """Bytes of the forward's output tensors."""
    param_bytes: int | None = None
    """Bytes of ``Model``'s parameters and buffers, floating ones cast to ``dtype``."""
    read_bytes: int = 0
    """The part of ``min_bytes`` that is read: declared (``read_bytes``) or ``min_bytes`` split in proportion
    to input+parameter vs output bytes."""
    write_bytes: int = 0
    """The part of ``min_bytes`` that is written (``min_bytes - read_bytes``)."""
    secret: bool = False
    """Drawn per run from the problem's ``secret`` ranges or a private workload file: its sizes are not in any
    public file, so a kernel cannot be tuned to them (see :mod:`harness.problems.secret`)."""
    flops_known: bool = True
    """False when the FLOPs could not be derived (the forward timed out or failed on meta tensors)."""
    cost_note: str = ""
    """Empty when the cost is complete; else what is unknown or approximate and why."""
    overrides: dict[str, Any] = field(default_factory=dict)
    """The sizes that were set (the workload's ``set`` plus ``--set``), a subset of ``params``."""

    @property
    def is_smoke(self) -> bool:
        return "smoke" in self.tags

    @property
    def is_gpu(self) -> bool:
        return "gpu" in self.tags

    def to_dict(self) -> dict:
        return {
            "name": self.name, "params": _plain(self.params), "dtype": self.dtype, "tags": list(self.tags),
            "atol": self.atol, "rtol": self.rtol, "allow_tf32": self.allow_tf32, "flops": self.flops,
            "min_bytes": self.min_bytes, "reduction_length": self.reduction_length, "input_bytes": self.input_bytes,
            "output_bytes": self.output_bytes, "param_bytes": self.param_bytes, "read_bytes": self.read_bytes,
            "write_bytes": self.write_bytes, "secret": self.secret, "flops_known": self.flops_known,
            "cost_note": self.cost_note, "overrides": _plain(self.overrides),
        }

    @classmethod
    def from_dict(cls, d: dict) -> Workload:
        tup = lambda m: {k: tuple(v) if isinstance(v, list) else v for k, v in dict(m).items()}
        return cls(
            name=d["name"], params=tup(d["params"]), dtype=d["dtype"], tags=tuple(d["tags"]), atol=float(d["atol"]),
            rtol=float(d["rtol"]), allow_tf32=bool(d["allow_tf32"]), flops=int(d["flops"]), min_bytes=int(d["min_bytes"]),
            reduction_length=d.get("reduction_length"), input_bytes=d.get("input_bytes"),
            output_bytes=d.get("output_bytes"), param_bytes=d.get("param_bytes"), read_bytes=int(d.get("read_bytes", 0)),
            write_bytes=int(d.get("write_bytes", 0)), secret=bool(d.get("secret", False)),
            flops_known=bool(d.get("flops_known", True)), cost_note=str(d.get("cost_note", "")),
            overrides=tup(d.get("overrides", {})),
        )


def _plain(d: dict[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


@dataclass(frozen=True, slots=True)
class Problem:
    """A loaded problem: where it lives, what it measures, and its workloads."""

    id: str
    category: str
    path: Path
    source_sha256: str
    library_op: str
    library_aten: tuple[str, ...]
    input_transform: str
    in_place: bool
    derived: bool
    """True when FLOPs/bytes were derived (plain KernelBench file) rather than declared."""
    workloads: tuple[Workload, ...]
    description: str = ""
    overrides: dict[str, Any] = field(default_factory=dict)
    """``--set`` overrides applied on top of every workload (common and scoped to this problem)."""
    level: int | None = None
    """KernelBench level (1, 2, 3, ...) when known (:mod:`harness.problems.kernelbench` says from where)."""
    kernelbench: bool = False
    """A plain KernelBench file: no ``KERNELGATE`` metadata."""
    default_mode: str = "eval"
    """``train`` for plain KernelBench files (KernelBench's evaluator never calls ``.eval()``, so BatchNorm
    uses batch statistics and Dropout is active), ``eval`` for annotated problems; ``KERNELGATE['mode']``
    overrides it."""
    category_source: str = "declared"
    """Where ``category`` came from: ``declared`` (KERNELGATE), ``kernelbench map`` (the checked-in map of
    KernelBench ids), ``ops`` (the aten ops of its forward) or ``name`` (its id's words)."""
    secret: Any = None
    """The problem's :class:`harness.problems.secret.SecretSpec` (ranges for per-run secret workloads), or None."""
    skipped_overrides: tuple[str, ...] = ()
    """Common ``--set`` names not applied because this file has no such constant (folder runs only)."""
    level_source: str = ""

    @property
    def version(self) -> str:
        return self.source_sha256[:16]

    def workload(self, name: str) -> Workload:
        for w in self.workloads:
            if w.name == name:
                return w
        raise KeyError(f"problem '{self.id}' has no workload '{name}'; it has {[w.name for w in self.workloads]}")

    def select(self, tags: tuple[str, ...] | None = None, names: tuple[str, ...] | None = None) -> list[Workload]:
        out = list(self.workloads)
        if names:
            out = [w for w in out if w.name in names]
        if tags:
            out = [w for w in out if set(tags) & set(w.tags)]
        return out

    def to_dict(self) -> dict:
        return {
            "id": self.id, "category": self.category, "path": str(self.path), "version": self.version,
            "library_op": self.library_op, "library_aten": list(self.library_aten),
            "input_transform": self.input_transform, "in_place": self.in_place, "derived": self.derived,
            "description": self.description, "workloads": [w.to_dict() for w in self.workloads],
            "overrides": _plain(self.overrides), "level": self.level, "kernelbench": self.kernelbench,
            "default_mode": self.default_mode, "category_source": self.category_source,
            "secret": self.secret.to_dict() if self.secret is not None else None,
            "skipped_overrides": list(self.skipped_overrides),
        }
