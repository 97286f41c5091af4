"""Load one problem file: KernelBench module + optional ``KERNELGATE`` metadata.

The format is documented in ``docs/problem-format.md``. Problem files are
trusted; they are executed as modules (never by the candidate-facing parent in
a way that touches CUDA: ``get_inputs`` must build CPU tensors).

A problem's FLOPs and minimum bytes per workload come from its metadata
expressions when present, otherwise they are *derived* by running the model on
meta tensors (:mod:`harness.problems.derive`, cached on disk by
:mod:`harness.problems.costcache`) and the problem is marked ``derived=True``.
Either way every workload also carries the bytes of its inputs, outputs and
parameters from that meta run, so the engine can size buffers and split the
memory floor into reads and writes.

Size overrides (``--set``, a workload's ``set``) are applied to the module's
source before it runs (:mod:`harness.problems.sizes`), so constants computed
from an overridden one are recomputed; :attr:`Workload.params` holds the final
values of every size constant.

Size (about 600 lines): the problem-file format is defined here, once (metadata fields, their
validation and error texts, workload expansion); sizes, derivation and KernelBench mapping are
its neighbours (sizes.py, derive.py, kernelbench.py).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import itertools
import math
import os
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import astparse
from harness.problems import costcache
from harness.problems.categories import CATEGORIES, classify
from harness.problems.derive import DerivedCost, derive
from harness.problems.kernelbench import problem_level
from harness.problems.sizes import SizeOverrides, apply_overrides, effective_sizes

DTYPES = ("float32", "float16", "bfloat16")
ELEM_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}
DEFAULT_TOLERANCE = {
    "float32": {"atol": 1e-4, "rtol": 1e-4},
    "float32+tf32": {"atol": 5e-3, "rtol": 5e-3},
    "float16": {"atol": 1e-2, "rtol": 1e-2},
    "bfloat16": {"atol": 1e-2, "rtol": 1e-2},
}
MODES = ("train", "eval")
#: CPU-time cap (s) on one forward on meta tensors; ``KERNELGATE_DERIVE_BUDGET_S`` overrides it.
#: Measured with torch 2.13 on this project's 2-core CPU machine: run on meta tensors, KernelBench's
#: LSTM/GRU files take 9-30 s of CPU (38_LSTMBidirectional 20-30 s), which is why recurrent layers
#: are costed by arithmetic (:mod:`harness.problems.recurrent`); every other level-1/2/3 file takes
#: under 1 s. The cap is for files nobody has measured.
DEFAULT_DERIVE_BUDGET_S = 30.0
_KNOWN_META_KEYS = {
    "id", "category", "library_op", "library_aten", "flops", "bytes", "read_bytes", "write_bytes", "reduction_length",
    "workloads", "tolerance", "allow_tf32", "input_transform", "in_place", "tags", "description", "secret", "level",
    "mode",
}
_KNOWN_WORKLOAD_KEYS = {"name", "set", "dtype", "tags", "tolerance", "allow_tf32"}
_INPUT_TRANSFORMS = ("any", "positive", "scale", "none")
_SHORT_DTYPE = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
#: Import names whose pip package is spelled differently.
_PIP_NAMES = {"sklearn": "scikit-learn", "cv2": "opencv-python", "PIL": "pillow", "yaml": "pyyaml"}
_module_counter = itertools.count()


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


# --------------------------------------------------------------------------- module loading

def _exec_module(path: Path, overrides: dict[str, Any] | None) -> tuple[types.ModuleType, ast.Module]:
    """Run a problem file as a fresh module with ``overrides`` written into its source; (module, parsed tree)."""
    source = path.read_bytes()
    try:
        tree = astparse.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise ProblemError(path, "<file>", f"line {exc.lineno}: {exc.msg}; the file must be valid Python") from None
    unbound: set[str] = set()
    if overrides:
        tree, unbound = apply_overrides(tree, dict(overrides))
    name = f"kernelgate_problem_{path.stem}_{next(_module_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ProblemError(path, "<file>", "cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    code = astparse.compile_tree(tree, str(path), "exec")
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)  # noqa: S102 - problem files are trusted
    finally:
        sys.modules.pop(name, None)
    for key in sorted(unbound):
        if not hasattr(module, key):
            consts = sorted(effective_sizes(module.__dict__, tree))
            raise ProblemError(path, f"--set {key}", f"the module has no constant '{key}'; it has {consts}")
        setattr(module, key, overrides[key])  # bound some other way (globals()[...]): nothing derived from it
    return module, tree


def load_module(path: Path, overrides: dict[str, Any] | None = None) -> types.ModuleType:
    """Execute a problem file as a fresh module with size constants overridden in its source.

    Each call gives an independent module object, so applying one workload's
    constants never leaks into another. ``overrides`` may be a workload's
    ``params`` (every size's final value) or just the sizes to change; lists
    are written back as tuples. Raises :class:`ProblemError` for a name the
    module does not have.
    """
    return _exec_module(Path(path), overrides)[0]


def import_error_text(exc: BaseException) -> str:
    """A problem file's import failure as advice: a missing package is named with the command that fixes it."""
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        top = exc.name.split(".")[0]
        pip = _PIP_NAMES.get(top, top)
        return (f"it imports '{exc.name}', which is not installed here; install it (pip install {pip}) or leave "
                "this file out of --problems")
    return f"importing it raised {type(exc).__name__}: {exc}"


# --------------------------------------------------------------------------- safe expressions

_ALLOWED_NODES = (
    ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Load, ast.Call,
    ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Pow, ast.Mod, ast.USub, ast.UAdd,
)
_ALLOWED_FUNCS = {"min": min, "max": max, "ceil": math.ceil, "sqrt": math.sqrt}


def eval_expr(expr: str | float, names: dict[str, Any], *, path: Path, field_name: str) -> float:
    """Evaluate an arithmetic metadata expression over size constants (no builtins, no attributes)."""
    if isinstance(expr, (int, float)):
        return float(expr)
    if not isinstance(expr, str):
        raise ProblemError(path, field_name, f"expected an expression string or number, got {type(expr).__name__}")
    try:
        tree = astparse.parse(expr, mode="eval")
    except SyntaxError as exc:
        raise ProblemError(path, field_name, f"'{expr}' is not a valid expression ({exc.msg})") from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise ProblemError(path, field_name, f"'{expr}': {type(node).__name__} is not allowed; use arithmetic on constants")
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in _ALLOWED_FUNCS):
            raise ProblemError(path, field_name, f"'{expr}': only {sorted(_ALLOWED_FUNCS)} may be called")
        if isinstance(node, ast.Name) and node.id not in names and node.id not in _ALLOWED_FUNCS:
            raise ProblemError(path, field_name, f"'{expr}': unknown name '{node.id}'; known: {sorted(names)}")
    return float(eval(astparse.compile_tree(tree, str(path), "eval"), {"__builtins__": {}}, {**_ALLOWED_FUNCS, **names}))


# --------------------------------------------------------------------------- costs

def derive_budget_s(value: float | None = None) -> float | None:
    """The derivation time budget: ``value``, else ``$KERNELGATE_DERIVE_BUDGET_S``, else the default (0: none)."""
    if value is None:
        env = os.environ.get("KERNELGATE_DERIVE_BUDGET_S")
        try:
            value = float(env) if env else DEFAULT_DERIVE_BUDGET_S
        except ValueError:
            value = DEFAULT_DERIVE_BUDGET_S
    return value if value and value > 0 else None


def derived_cost(module: types.ModuleType, *, path: Path, source_sha256: str, sizes: dict[str, Any], dtype: str,
                 budget_s: float | None) -> DerivedCost:
    """The module's meta-tensor cost at one workload, from the on-disk cache when it has it.

    Raises :class:`ProblemError` only when ``get_inputs()`` cannot run on meta
    tensors (the workload's size is then unknown).
    """
    key = costcache.cost_key(source_sha256, sizes, dtype)
    hit = costcache.lookup(key, budget_s=budget_s)
    if hit is not None:
        return hit
    try:
        cost = derive(module, dtype, budget_s=budget_s)
    except Exception as exc:  # noqa: BLE001 - reported with the file and the fix
        raise ProblemError(path, "flops/bytes", f"get_inputs() cannot run on meta tensors ({type(exc).__name__}: "
                           f"{exc}); declare 'flops' and 'bytes' in KERNELGATE") from None
    costcache.store(key, cost)
    return cost


def derive_cost(module: types.ModuleType, dtype: str) -> tuple[int, int]:
    """FLOPs and minimum bytes of the module's model on meta tensors (no cache, no budget; FLOPs 0 if unknown)."""
    cost = derive(module, dtype)
    return int(cost.flops or 0), cost.min_bytes


def split_bytes(min_bytes: int, cost: DerivedCost) -> tuple[int, int]:
    """(read, write) parts of ``min_bytes`` in proportion to input+parameter vs output bytes.

    With the output bytes unknown everything counts as read (``cost.note`` says why they are unknown).
    """
    read_side = cost.input_bytes + (cost.param_bytes or 0)
    write_side = cost.output_bytes or 0
    if read_side + write_side <= 0:
        return min_bytes, 0
    read = round(min_bytes * read_side / (read_side + write_side))
    return read, min_bytes - read


# --------------------------------------------------------------------------- the loader

def _require(cond: bool, path: Path, field_name: str, why: str) -> None:
    if not cond:
        raise ProblemError(path, field_name, why)


@dataclass
class _Context:
    """What every workload of one problem file shares while it is built."""

    path: Path
    source_sha256: str
    meta: dict
    overrides: dict[str, Any]
    budget_s: float | None
    prob_tol: dict
    prob_tf32: bool
    costs: list[DerivedCost] = field(default_factory=list)


def _build_workload(ctx: _Context, *, name: str, set_: dict[str, Any], dtype: str, tags: tuple[str, ...],
                    tolerance: dict | None = None, allow_tf32: bool | None = None, secret: bool = False,
                    where: str = "workloads") -> Workload:
    """One workload: run the module at its sizes, evaluate or derive its cost."""
    path, meta = ctx.path, ctx.meta
    params = {**set_, **ctx.overrides}
    try:
        wmod, tree = _exec_module(path, params)
    except ProblemError as exc:
        raise ProblemError(path, f"{where}.set", exc.why) from None
    except Exception as exc:  # noqa: BLE001
        raise ProblemError(path, f"{where}.set", f"the module fails at these sizes ({type(exc).__name__}: {exc})") from None
    sizes = effective_sizes(wmod.__dict__, tree)
    allow = bool(ctx.prob_tf32 if allow_tf32 is None else allow_tf32) and dtype == "float32"
    tol_key = "float32+tf32" if allow else dtype
    tol = {**DEFAULT_TOLERANCE[tol_key], **ctx.prob_tol.get(dtype, {}), **(tolerance or {})}
    names = {k: v for k, v in sizes.items() if isinstance(v, (int, float))}
    names["ELEM"] = ELEM_BYTES[dtype]
    declared = "flops" in meta and ("bytes" in meta or {"read_bytes", "write_bytes"} <= meta.keys())
    try:
        cost: DerivedCost | None = derived_cost(wmod, path=path, source_sha256=ctx.source_sha256, sizes=params,
                                                dtype=dtype, budget_s=ctx.budget_s)
    except ProblemError:
        if not declared:
            raise
        cost = None  # declared FLOPs/bytes need no meta run; only the tensor sizes stay unknown
    if cost is not None:
        ctx.costs.append(cost)
    note = ""
    if declared:
        flops = eval_expr(meta["flops"], names, path=path, field_name="flops")
        flops_known = True
        if {"read_bytes", "write_bytes"} <= meta.keys():
            read = int(eval_expr(meta["read_bytes"], names, path=path, field_name="read_bytes"))
            write = int(eval_expr(meta["write_bytes"], names, path=path, field_name="write_bytes"))
            nbytes = float(read + write)
            if "bytes" in meta:
                total = eval_expr(meta["bytes"], names, path=path, field_name="bytes")
                _require(int(total) == read + write, path, "read_bytes", f"read_bytes + write_bytes = {read + write} "
                         f"but bytes = {int(total)} for workload '{name}'; they must add up (or drop 'bytes')")
        else:
            nbytes = eval_expr(meta["bytes"], names, path=path, field_name="bytes")
            if cost is None:
                read, write = int(nbytes), 0
                note = ("get_inputs() cannot run on meta tensors: input/output/parameter bytes unknown, and "
                        "the read/write split with them (declare read_bytes and write_bytes)")
            else:
                read, write = split_bytes(int(nbytes), cost)
    else:
        assert cost is not None  # derived_cost raised otherwise
        note = cost.note
        flops_known = cost.flops is not None
        flops = float(cost.flops or 0)
        nbytes = float(cost.min_bytes)
        read, write = split_bytes(int(nbytes), cost)
    red = meta.get("reduction_length")
    red_len = int(eval_expr(red, names, path=path, field_name="reduction_length")) if red is not None else None
    _require(nbytes > 0, path, "bytes", f"evaluates to {nbytes} for workload '{name}'; must be positive")
    return Workload(
        name=name, params=sizes, dtype=dtype, tags=tags, atol=float(tol["atol"]), rtol=float(tol["rtol"]),
        allow_tf32=allow, flops=int(flops), min_bytes=int(nbytes), reduction_length=red_len,
        input_bytes=cost.input_bytes if cost else None, output_bytes=cost.output_bytes if cost else None,
        param_bytes=cost.param_bytes if cost else None, read_bytes=int(read), write_bytes=int(write), secret=secret,
        flops_known=flops_known, cost_note=note, overrides=params,
    )


def default_workload_name(precision: str) -> str:
    """``default`` for float32 (as before precision was selectable), ``default-fp16``/``default-bf16`` otherwise."""
    return "default" if precision == "float32" else f"default-{_SHORT_DTYPE[precision]}"


def _resolve_overrides(path: Path, pid: str, base: types.ModuleType, overrides: SizeOverrides,
                       strict: bool) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The overrides that apply to this file (common ones it has + scoped ones) and the common ones skipped."""
    have = set(vars(base))
    applied: dict[str, Any] = {}
    skipped: list[str] = []
    for key, value in overrides.common.items():
        if key in have:
            applied[key] = value
        elif strict:
            consts = sorted(effective_sizes(vars(base), astparse.parse(path.read_bytes())))
            raise ProblemError(path, f"--set {key}", f"the module has no constant '{key}'; it has {consts}")
        else:
            skipped.append(key)
    for key, value in overrides.scoped_for(path.stem, pid).items():
        if key not in have:
            consts = sorted(effective_sizes(vars(base), astparse.parse(path.read_bytes())))
            raise ProblemError(path, f"--set {pid}:{key}", f"the module has no constant '{key}'; it has {consts}")
        applied[key] = value
    return applied, tuple(skipped)


def load_problem(path: str | Path, *, overrides: SizeOverrides | dict[str, Any] | None = None,
                 precision: str = "float32", strict_overrides: bool = True,
                 derive_budget: float | None = None) -> Problem:
    """Load and validate one problem file. Raises :class:`ProblemError` on any defect.

    ``overrides``: ``--set`` values (a :class:`SizeOverrides`, or a plain dict
    applying to this file). With ``strict_overrides`` (one file), a common
    override the file lacks is an error; without it (a folder), it is skipped
    and listed in :attr:`Problem.skipped_overrides`. A scoped override
    (``PROBLEM:NAME``) the file lacks is always an error.

    ``precision``: dtype of the derived default workload of a plain
    KernelBench file (KernelBench's evaluator offers fp32/fp16/bf16);
    annotated problems declare their own dtypes. ``derive_budget``: seconds
    one forward on meta tensors may take (None: ``$KERNELGATE_DERIVE_BUDGET_S``
    or the default; 0: no limit).
    """
    path = Path(path)
    try:
        source = path.read_bytes()
    except OSError as exc:
        raise ProblemError(path, "<file>", f"cannot be read ({exc.strerror}); check the path and permissions") from None
    _require(precision in DTYPES, path, "precision", f"'{precision}' is not one of {DTYPES}")
    sha = hashlib.sha256(source).hexdigest()
    ov = SizeOverrides.coerce(overrides)
    try:
        base, _ = _exec_module(path, None)
    except ProblemError:
        raise
    except Exception as exc:  # noqa: BLE001 - any error in a problem file is reported, never raised raw
        raise ProblemError(path, "<module>", import_error_text(exc)) from None
    for name in ("Model", "get_inputs", "get_init_inputs"):
        _require(hasattr(base, name), path, name, "missing; a KernelBench problem defines Model, get_inputs and get_init_inputs")

    raw_meta = getattr(base, "KERNELGATE", None)
    kernelbench = raw_meta is None
    _require(raw_meta is None or isinstance(raw_meta, dict), path, "KERNELGATE", "must be a dict")
    meta = dict(raw_meta or {})
    unknown = set(meta) - _KNOWN_META_KEYS
    _require(not unknown, path, "KERNELGATE", f"unknown key(s) {sorted(unknown)}; known keys: {sorted(_KNOWN_META_KEYS)}")

    pid = meta.get("id", path.stem)
    _require(isinstance(pid, str) and bool(pid) and pid.replace("_", "").replace("-", "").isalnum(), path, "id",
             f"'{pid}' must be letters, digits, '_' or '-'")
    if "category" in meta:
        _require(meta["category"] in CATEGORIES, path, "category", f"'{meta['category']}' is not one of {CATEGORIES}")
    library_aten = tuple(meta.get("library_aten", ()))
    _require(all(isinstance(a, str) and a.startswith("aten.") for a in library_aten), path, "library_aten",
             "must be a list of names like 'aten.native_layer_norm'")
    input_transform = meta.get("input_transform", "any")
    _require(input_transform in _INPUT_TRANSFORMS, path, "input_transform", f"must be one of {_INPUT_TRANSFORMS}")
    prob_tol = meta.get("tolerance", {})
    _require(isinstance(prob_tol, dict), path, "tolerance", "must map dtype names to {'atol':..,'rtol':..}")
    mode = meta.get("mode", "train" if kernelbench else "eval")
    _require(mode in MODES, path, "mode", f"'{mode}' is not one of {MODES} (the module mode forward runs in)")
    declared_level = meta.get("level")
    _require(declared_level is None or (isinstance(declared_level, int) and not isinstance(declared_level, bool)
                                        and declared_level >= 1), path, "level", "must be a KernelBench level (1, 2, 3, ...)")
    has_read, has_write = "read_bytes" in meta, "write_bytes" in meta
    _require(has_read == has_write, path, "read_bytes" if has_read else "write_bytes",
             "declare both read_bytes and write_bytes, or neither")
    if "flops" in meta or "bytes" in meta or has_read:
        _require("flops" in meta and ("bytes" in meta or has_read), path, "flops" if "flops" not in meta else "bytes",
                 "declare 'flops' together with 'bytes' (or 'read_bytes' and 'write_bytes'), or neither (derived)")

    applied, skipped = _resolve_overrides(path, pid, base, ov, strict_overrides)
    ctx = _Context(path=path, source_sha256=sha, meta=meta, overrides=applied, budget_s=derive_budget_s(derive_budget),
                   prob_tol=prob_tol, prob_tf32=bool(meta.get("allow_tf32", False)))

    raw_workloads = meta.get("workloads")
    if raw_workloads is None:
        raw_workloads = [{"name": default_workload_name(precision), "set": {}, "dtype": precision,
                          "tags": ["smoke", "gpu"]}]
    _require(isinstance(raw_workloads, list) and bool(raw_workloads), path, "workloads", "must be a non-empty list")

    workloads: list[Workload] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_workloads):
        where = f"workloads[{i}]"
        _require(isinstance(raw, dict), path, where, "must be a dict with name, set, dtype, tags")
        bad = set(raw) - _KNOWN_WORKLOAD_KEYS
        _require(not bad, path, where, f"unknown key(s) {sorted(bad)}; known: {sorted(_KNOWN_WORKLOAD_KEYS)}")
        name = raw.get("name")
        _require(isinstance(name, str) and bool(name) and name not in seen, path, f"{where}.name",
                 "must be a unique non-empty string")
        seen.add(name)
        dtype = raw.get("dtype", "float32")
        _require(dtype in DTYPES, path, f"{where}.dtype", f"'{dtype}' is not one of {DTYPES}")
        set_ = raw.get("set", {})
        _require(isinstance(set_, dict), path, f"{where}.set", "must map constant names to values")
        workloads.append(_build_workload(ctx, name=name, set_=dict(set_), dtype=dtype, tags=tuple(raw.get("tags", ())),
                                         tolerance=raw.get("tolerance"), allow_tf32=raw.get("allow_tf32"), where=where))

    if "category" in meta:
        category, category_source = meta["category"], "declared"
    else:
        category, category_source = classify(pid, ctx.costs[0] if ctx.costs else None)
    level, level_source = problem_level(path, pid, declared_level)

    secret = None
    if "secret" in meta:
        from harness.problems.secret import parse_secret_spec

        secret = parse_secret_spec(meta["secret"], path=path, sizes=workloads[0].params)

    return Problem(
        id=pid, category=category, path=path.resolve(), source_sha256=sha,
        library_op=str(meta.get("library_op", "torch (reference Model)")), library_aten=library_aten,
        input_transform=input_transform, in_place=bool(meta.get("in_place", False)),
        derived=not ("flops" in meta), workloads=tuple(workloads),
        description=(base.__doc__ or "").strip().splitlines()[0] if (base.__doc__ or "").strip() else "",
        overrides=applied, level=level, kernelbench=kernelbench, default_mode=mode, category_source=category_source,
        secret=secret, skipped_overrides=skipped, level_source=level_source,
    )


def problem_context(problem: Problem, *, derive_budget: float | None = None) -> _Context:
    """The shared build state of a loaded problem, to build more workloads for it (secret ones)."""
    module, _ = _exec_module(Path(problem.path), None)
    meta = dict(getattr(module, "KERNELGATE", None) or {})
    return _Context(path=Path(problem.path), source_sha256=problem.source_sha256, meta=meta,
                    overrides=dict(problem.overrides), budget_s=derive_budget_s(derive_budget),
                    prob_tol=meta.get("tolerance", {}), prob_tf32=bool(meta.get("allow_tf32", False)))


def build_workload(problem: Problem, *, name: str, set_: dict[str, Any], dtype: str, tags: tuple[str, ...],
                   allow_tf32: bool | None = None, secret: bool = False, where: str = "workload",
                   context: _Context | None = None) -> Workload:
    """A further workload of a loaded problem, with FLOPs/bytes computed like those of its own workloads."""
    ctx = context or problem_context(problem)
    _require(dtype in DTYPES, ctx.path, f"{where}.dtype", f"'{dtype}' is not one of {DTYPES}")
    return _build_workload(ctx, name=name, set_=dict(set_), dtype=dtype, tags=tuple(tags), allow_tf32=allow_tf32,
                           secret=secret, where=where)
