"""Load one problem file: KernelBench module + optional ``KERNELGATE`` metadata.

The format is documented in ``docs/problem-format.md``. Problem files are
trusted; they are executed as modules (never by the candidate-facing parent in
a way that touches CUDA: ``get_inputs`` must build CPU tensors).

A problem's FLOPs and minimum bytes per workload come from its metadata
expressions when present, otherwise they are *derived* by running the model on
meta tensors (``torch.utils.flop_counter.FlopCounterMode`` for FLOPs, tensor
sizes for bytes) and the problem is marked ``derived=True``.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import itertools
import math
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CATEGORIES = ("normalization", "reduction", "convolution", "gemm", "elementwise")
DTYPES = ("float32", "float16", "bfloat16")
ELEM_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}
DEFAULT_TOLERANCE = {
    "float32": {"atol": 1e-4, "rtol": 1e-4},
    "float32+tf32": {"atol": 5e-3, "rtol": 5e-3},
    "float16": {"atol": 1e-2, "rtol": 1e-2},
    "bfloat16": {"atol": 1e-2, "rtol": 1e-2},
}
_KNOWN_META_KEYS = {
    "id", "category", "library_op", "library_aten", "flops", "bytes", "reduction_length",
    "workloads", "tolerance", "allow_tf32", "input_transform", "in_place", "tags", "description",
}
_KNOWN_WORKLOAD_KEYS = {"name", "set", "dtype", "tags", "tolerance", "allow_tf32"}
_INPUT_TRANSFORMS = ("any", "positive", "scale", "none")
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
    """One shape/dtype configuration of a problem."""

    name: str
    params: dict[str, Any]
    """Module constants to override before calling get_inputs/get_init_inputs."""
    dtype: str
    tags: tuple[str, ...]
    atol: float
    rtol: float
    allow_tf32: bool
    flops: int
    min_bytes: int
    reduction_length: int | None

    @property
    def is_smoke(self) -> bool:
        return "smoke" in self.tags

    @property
    def is_gpu(self) -> bool:
        return "gpu" in self.tags

    def to_dict(self) -> dict:
        return {
            "name": self.name, "params": dict(self.params), "dtype": self.dtype, "tags": list(self.tags),
            "atol": self.atol, "rtol": self.rtol, "allow_tf32": self.allow_tf32, "flops": self.flops,
            "min_bytes": self.min_bytes, "reduction_length": self.reduction_length,
        }


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
    """``--set`` overrides applied on top of every workload."""

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
        }


# --------------------------------------------------------------------------- module loading

def load_module(path: Path, overrides: dict[str, Any] | None = None) -> types.ModuleType:
    """Execute a problem file as a fresh module and apply constant overrides.

    Each call gives an independent module object, so applying one workload's
    constants never leaks into another.
    """
    name = f"kernelgate_problem_{path.stem}_{next(_module_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ProblemError(path, "<file>", "cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    for key, value in (overrides or {}).items():
        if not hasattr(module, key):
            consts = sorted(k for k in vars(module) if k.isupper())
            raise ProblemError(path, f"--set {key}", f"the module has no constant '{key}'; it has {consts}")
        setattr(module, key, value)
    return module


# --------------------------------------------------------------------------- safe expressions

_ALLOWED_NODES = (
    ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Load, ast.Call,
    ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Pow, ast.Mod, ast.USub, ast.UAdd,
)
_ALLOWED_FUNCS = {"min": min, "max": max, "ceil": math.ceil, "sqrt": math.sqrt}


def eval_expr(expr: str | int | float, names: dict[str, Any], *, path: Path, field_name: str) -> float:
    """Evaluate an arithmetic metadata expression over size constants (no builtins, no attributes)."""
    if isinstance(expr, (int, float)):
        return float(expr)
    if not isinstance(expr, str):
        raise ProblemError(path, field_name, f"expected an expression string or number, got {type(expr).__name__}")
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as exc:
        raise ProblemError(path, field_name, f"'{expr}' is not a valid expression ({exc.msg})") from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise ProblemError(path, field_name, f"'{expr}': {type(node).__name__} is not allowed; use arithmetic on constants")
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in _ALLOWED_FUNCS):
            raise ProblemError(path, field_name, f"'{expr}': only {sorted(_ALLOWED_FUNCS)} may be called")
        if isinstance(node, ast.Name) and node.id not in names and node.id not in _ALLOWED_FUNCS:
            raise ProblemError(path, field_name, f"'{expr}': unknown name '{node.id}'; known: {sorted(names)}")
    return float(eval(compile(tree, str(path), "eval"), {"__builtins__": {}}, {**_ALLOWED_FUNCS, **names}))


def _constants(module: types.ModuleType) -> dict[str, Any]:
    return {k: v for k, v in vars(module).items() if k.isupper() and isinstance(v, (int, float)) and not isinstance(v, bool)}


# --------------------------------------------------------------------------- derivation

def derive_cost(module: types.ModuleType, dtype: str) -> tuple[int, int]:
    """FLOPs and minimum bytes of the module's model on meta tensors (no memory, no device).

    FLOPs come from FlopCounterMode, which counts matmul/conv-like ops only: for
    elementwise or reduction problems it reports 0 and the roofline then uses
    the memory term alone, which is the right bound for those ops anyway.
    """
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    tdtype = getattr(torch, dtype)
    with torch.device("meta"):
        torch.manual_seed(0)
        model = module.Model(*module.get_init_inputs())
        inputs = [_cast(x, tdtype) for x in module.get_inputs()]
        model = model.to(tdtype)
        counter = FlopCounterMode(display=False)
        with counter, torch.no_grad():
            out = model(*inputs)
    outs = out if isinstance(out, (tuple, list)) else [out]
    nbytes = sum(t.numel() * t.element_size() for t in itertools.chain(inputs, outs) if isinstance(t, torch.Tensor))
    nbytes += sum(t.numel() * t.element_size() for t in itertools.chain(model.parameters(), model.buffers()))
    return int(counter.get_total_flops()), int(nbytes)


def _cast(x: Any, dtype: Any) -> Any:
    import torch

    if isinstance(x, torch.Tensor) and x.is_floating_point():
        return x.to(dtype)
    return x


_CATEGORY_HINTS = [
    ("normalization", ("norm",)),
    ("convolution", ("conv",)),
    ("gemm", ("matmul", "gemm", "bmm", "mm_", "linear", "matrix")),
    ("reduction", ("sum", "mean", "max", "min", "argm", "softmax", "logsumexp", "reduction", "cumsum", "prod")),
]


def guess_category(stem: str) -> str:
    s = stem.lower()
    for cat, keys in _CATEGORY_HINTS:
        if any(k in s for k in keys):
            return cat
    return "elementwise"


# --------------------------------------------------------------------------- the loader

def _require(cond: bool, path: Path, field_name: str, why: str) -> None:
    if not cond:
        raise ProblemError(path, field_name, why)


def load_problem(path: str | Path, *, overrides: dict[str, Any] | None = None) -> Problem:
    """Load and validate one problem file. Raises :class:`ProblemError` on any defect."""
    path = Path(path)
    try:
        source = path.read_bytes()
    except OSError as exc:
        raise ProblemError(path, "<file>", f"cannot be read ({exc.strerror}); check the path and permissions") from None
    overrides = dict(overrides or {})
    try:
        module = load_module(path, overrides)
    except ProblemError:
        raise
    except Exception as exc:  # noqa: BLE001 - any error in a problem file is reported, never raised raw
        raise ProblemError(path, "<module>", f"importing it raised {type(exc).__name__}: {exc}") from None
    for name in ("Model", "get_inputs", "get_init_inputs"):
        _require(hasattr(module, name), path, name, "missing; a KernelBench problem defines Model, get_inputs and get_init_inputs")

    meta = getattr(module, "KERNELGATE", None)
    derived = meta is None
    meta = dict(meta or {})
    _require(isinstance(meta, dict), path, "KERNELGATE", "must be a dict")
    unknown = set(meta) - _KNOWN_META_KEYS
    _require(not unknown, path, "KERNELGATE", f"unknown key(s) {sorted(unknown)}; known keys: {sorted(_KNOWN_META_KEYS)}")

    pid = meta.get("id", path.stem)
    _require(isinstance(pid, str) and pid.replace("_", "").replace("-", "").isalnum(), path, "id",
             f"'{pid}' must be letters, digits, '_' or '-'")
    category = meta.get("category", guess_category(path.stem))
    _require(category in CATEGORIES, path, "category", f"'{category}' is not one of {CATEGORIES}")
    library_aten = tuple(meta.get("library_aten", ()))
    _require(all(isinstance(a, str) and a.startswith("aten.") for a in library_aten), path, "library_aten",
             "must be a list of names like 'aten.native_layer_norm'")
    input_transform = meta.get("input_transform", "any")
    _require(input_transform in _INPUT_TRANSFORMS, path, "input_transform", f"must be one of {_INPUT_TRANSFORMS}")
    prob_tol = meta.get("tolerance", {})
    _require(isinstance(prob_tol, dict), path, "tolerance", "must map dtype names to {'atol':..,'rtol':..}")
    prob_tf32 = bool(meta.get("allow_tf32", False))

    raw_workloads = meta.get("workloads")
    if raw_workloads is None:
        raw_workloads = [{"name": "default", "set": {}, "dtype": "float32", "tags": ["smoke", "gpu"]}]
    _require(isinstance(raw_workloads, list) and raw_workloads, path, "workloads", "must be a non-empty list")

    workloads: list[Workload] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_workloads):
        where = f"workloads[{i}]"
        _require(isinstance(raw, dict), path, where, "must be a dict with name, set, dtype, tags")
        bad = set(raw) - _KNOWN_WORKLOAD_KEYS
        _require(not bad, path, where, f"unknown key(s) {sorted(bad)}; known: {sorted(_KNOWN_WORKLOAD_KEYS)}")
        name = raw.get("name")
        _require(isinstance(name, str) and name and name not in seen, path, f"{where}.name", "must be a unique non-empty string")
        seen.add(name)
        dtype = raw.get("dtype", "float32")
        _require(dtype in DTYPES, path, f"{where}.dtype", f"'{dtype}' is not one of {DTYPES}")
        params = dict(raw.get("set", {}))
        params.update(overrides)
        try:
            wmod = load_module(path, params)
        except ProblemError as exc:
            raise ProblemError(path, f"{where}.set", exc.why) from None
        consts = _constants(wmod)
        allow_tf32 = bool(raw.get("allow_tf32", prob_tf32)) and dtype == "float32"
        tol_key = "float32+tf32" if allow_tf32 else dtype
        tol = {**DEFAULT_TOLERANCE[tol_key], **prob_tol.get(dtype, {}), **raw.get("tolerance", {})}
        names = {**consts, "ELEM": ELEM_BYTES[dtype]}
        if "flops" in meta and "bytes" in meta:
            flops = eval_expr(meta["flops"], names, path=path, field_name="flops")
            nbytes = eval_expr(meta["bytes"], names, path=path, field_name="bytes")
        else:
            try:
                flops, nbytes = derive_cost(wmod, dtype)
            except Exception as exc:  # noqa: BLE001
                raise ProblemError(path, "flops/bytes", f"could not be derived on meta tensors ({type(exc).__name__}: {exc}); "
                                   "declare them in KERNELGATE") from None
            derived = True
        red = meta.get("reduction_length")
        red_len = int(eval_expr(red, names, path=path, field_name="reduction_length")) if red is not None else None
        _require(nbytes > 0, path, "bytes", f"evaluates to {nbytes} for workload '{name}'; must be positive")
        tags = tuple(raw.get("tags", ()))
        workloads.append(Workload(
            name=name, params=params, dtype=dtype, tags=tags, atol=float(tol["atol"]), rtol=float(tol["rtol"]),
            allow_tf32=allow_tf32, flops=int(flops), min_bytes=int(nbytes), reduction_length=red_len,
        ))

    return Problem(
        id=pid, category=category, path=path.resolve(), source_sha256=hashlib.sha256(source).hexdigest(),
        library_op=str(meta.get("library_op", "torch (reference Model)")), library_aten=library_aten,
        input_transform=input_transform, in_place=bool(meta.get("in_place", False)), derived=derived,
        workloads=tuple(workloads), description=(module.__doc__ or "").strip().splitlines()[0] if module.__doc__ else "",
        overrides=overrides,
    )
