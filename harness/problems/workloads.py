"""Building a problem's workloads: run the problem file at a workload's sizes and compute its cost.

A workload's FLOPs and minimum bytes come from the problem's ``KERNELGATE`` expressions
(:func:`eval_expr`, arithmetic over the size constants only) when it declares them, otherwise from a
forward on meta tensors (:mod:`harness.problems.derive`, cached on disk by
:mod:`harness.problems.costcache`). Either way every workload also carries the bytes of its inputs,
outputs and parameters from that meta run, so the engine can size buffers and split the memory floor
into reads and writes.

Size overrides (``--set``, a workload's ``set``) are applied to the module's source before it runs
(:mod:`harness.problems.sizes`), so constants computed from an overridden one are recomputed.
:mod:`harness.problems.loader` validates the metadata and builds a problem's own workloads with
:func:`build_workload_in`; :mod:`harness.problems.secret` builds further ones with :func:`build_workload`.
"""

from __future__ import annotations

import ast
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
from harness.problems.derive import DerivedCost, derive
from harness.problems.problem import DEFAULT_TOLERANCE, DTYPES, ELEM_BYTES, Problem, ProblemError, Workload
from harness.problems.sizes import apply_overrides, effective_sizes

#: CPU-time cap (s) on one forward on meta tensors; ``KERNELGATE_DERIVE_BUDGET_S`` overrides it.
#: Measured with torch 2.13 on a 2-core CPU machine: run on meta tensors, KernelBench's
#: LSTM/GRU files take 9-30 s of CPU (38_LSTMBidirectional 20-30 s), which is why recurrent layers
#: are costed by arithmetic (:mod:`harness.problems.recurrent`); every other level-1/2/3 file takes
#: under 1 s. The cap is for files nobody has measured.
DEFAULT_DERIVE_BUDGET_S = 30.0
_SHORT_DTYPE = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
_module_counter = itertools.count()


# --------------------------------------------------------------------------- module loading

def exec_module(path: Path, overrides: dict[str, Any] | None) -> tuple[types.ModuleType, ast.Module]:
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
    return exec_module(Path(path), overrides)[0]


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


# --------------------------------------------------------------------------- workloads

def require(cond: bool, path: Path, field_name: str, why: str) -> None:
    """Raise :class:`ProblemError` naming the file, the field and the fix unless ``cond`` holds."""
    if not cond:
        raise ProblemError(path, field_name, why)


@dataclass
class WorkloadContext:
    """What every workload of one problem file shares while it is built."""

    path: Path
    source_sha256: str
    meta: dict
    overrides: dict[str, Any]
    budget_s: float | None
    prob_tol: dict
    prob_tf32: bool
    costs: list[DerivedCost] = field(default_factory=list)


def build_workload_in(ctx: WorkloadContext, *, name: str, set_: dict[str, Any], dtype: str, tags: tuple[str, ...],
                      tolerance: dict | None = None, allow_tf32: bool | None = None, secret: bool = False,
                      where: str = "workloads") -> Workload:
    """One workload: run the module at its sizes, evaluate or derive its cost. ``where`` names the workload in
    error messages (``workloads[2]``)."""
    path, meta = ctx.path, ctx.meta
    params = {**set_, **ctx.overrides}
    try:
        wmod, tree = exec_module(path, params)
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
                require(int(total) == read + write, path, "read_bytes", f"read_bytes + write_bytes = {read + write} "
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
    require(nbytes > 0, path, "bytes", f"evaluates to {nbytes} for workload '{name}'; must be positive")
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


def problem_context(problem: Problem, *, derive_budget: float | None = None) -> WorkloadContext:
    """The shared build state of a loaded problem, to build more workloads for it (secret ones)."""
    module, _ = exec_module(Path(problem.path), None)
    meta = dict(getattr(module, "KERNELGATE", None) or {})
    return WorkloadContext(path=Path(problem.path), source_sha256=problem.source_sha256, meta=meta,
                    overrides=dict(problem.overrides), budget_s=derive_budget_s(derive_budget),
                    prob_tol=meta.get("tolerance", {}), prob_tf32=bool(meta.get("allow_tf32", False)))


def build_workload(problem: Problem, *, name: str, set_: dict[str, Any], dtype: str, tags: tuple[str, ...],
                   allow_tf32: bool | None = None, secret: bool = False, where: str = "workload",
                   context: WorkloadContext | None = None) -> Workload:
    """A further workload of a loaded problem, with FLOPs/bytes computed like those of its own workloads."""
    ctx = context or problem_context(problem)
    require(dtype in DTYPES, ctx.path, f"{where}.dtype", f"'{dtype}' is not one of {DTYPES}")
    return build_workload_in(ctx, name=name, set_=dict(set_), dtype=dtype, tags=tuple(tags), allow_tf32=allow_tf32,
                           secret=secret, where=where)
