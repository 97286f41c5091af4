"""Held-out shapes: sizes beside a workload's public one, derived from the problem file's own size constants.

A kernel can be right at the one shape it was shown and wrong at every other (a row sum over unmasked 256-wide
tiles, a grid computed from the public shape, a kernel that asserts it). KernelBench's semantics allow a kernel
specialised to its one shape, so a held-out shape never changes a workload's own verdict by default; its result is
reported beside it (``JobResult.heldout``; ``--heldout-gate`` makes it gate PASSED).

Which constants are sizes (:func:`extents`): the module-level constants assigned a literal number (or a tuple of
numbers: each component on its own) in the file, so a constant computed from others is recomputed rather than
varied (:mod:`harness.problems.sizes`), and only those that are an *extent*: set one higher, on meta tensors, some
dimension of an input grows and none shrinks (``N`` when an input is ``randn(2 * N, 3)``), or, for a constant only
the constructor reads (``out_channels``), the inputs stay and some dimension of an output goes from its value to
one more. ``dim = 1`` (which axis to reduce), a kernel size, a stride or a padding do neither and keep their
value: they are the problem's structure, not its size.

Which values (:func:`boundary_values`), for an extent of public value ``v``: one less and one more, the primes
below and above, and smaller and larger ones off every power of two (``v // 2 + 1``, ``v + v // 2 + 1``) -- none
a multiple of a common tile size unless ``v`` is tiny. A held-out shape moves every extent at once: each extent,
in an order drawn from the run's secret seed, takes the first of its values (also in a drawn order) with which
the module still builds and runs on meta tensors, with the extents already chosen; an extent with no such value
keeps its public one. While the shape's inputs and outputs take more than :data:`MAX_GROWTH` times the public
workload's bytes (1.5 on a GPU, 0.6 on the CPU path), the extents step down to smaller boundary values (or back
to their public one). (A constant the module refuses one higher, such as GroupNorm's channels,
which its groups must divide, is not an extent at all.) Shapes are drawn per run from the secret seed, so
a kernel cannot have been tuned to them; each is then checked for fairness like any workload
(:mod:`harness.execute.checker.fairness`).

The held-out workloads of a public workload ``W`` are named ``W~heldout-1``, ... and tagged :data:`HELDOUT_TAG` and
``heldout-of=W``.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import astparse
from harness.problems.problem import Problem, ProblemError, Workload

HELDOUT_TAG = "heldout"
_OF = "heldout-of="
MAX_GROWTH = {"cuda": 1.5, "cpu": 0.6}
"""A held-out shape's input and output bytes are at most this many times the public workload's, per device kind.
On a GPU a shape may be larger than the public one (a grid or an index computed for the public size breaks there
too); on the CPU path every call runs in the Triton interpreter, whose time grows with the size, and a tail or a
hard-coded shape shows at any size, so held-out shapes there take at most 0.6 of the public one's bytes (the CPU
quick start grows by at most 20% with it; docs/correctness.md, "Cost")."""
DEFAULT_COUNT = 2


@dataclass(frozen=True, slots=True)
class Extent:
    """One size a held-out shape may move: a constant, or one component of a tuple constant."""

    name: str
    position: int | None
    """The component of a tuple constant, or None for a plain number."""
    value: int

    def label(self) -> str:
        return self.name if self.position is None else f"{self.name}[{self.position}]"


def is_heldout(w: Workload) -> bool:
    return HELDOUT_TAG in w.tags


def public_of(w: Workload) -> str | None:
    """The public workload a held-out one belongs to (None for any other workload)."""
    for t in w.tags:
        if t.startswith(_OF):
            return t[len(_OF):]
    return None


def literal_constants(path: str | Path) -> dict[str, Any]:
    """Module-level names the file assigns a literal int or tuple of ints (the roots every other size follows)."""
    tree = astparse.parse(Path(path).read_bytes(), filename=str(path))
    out: dict[str, Any] = {}
    for stmt in tree.body:
        if not (isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets)):
            continue
        try:
            value = ast.literal_eval(stmt.value)
        except ValueError:
            continue
        sized = (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, tuple) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value))
        for t in stmt.targets:  # width = height = 16: two roots
            if sized:
                out[t.id] = value
            else:
                out.pop(t.id, None)  # rebound to something else: not a size
    return out


_SHAPES: dict[str, tuple | None] = {}


def _shapes(path: Path, overrides: dict[str, Any]) -> tuple[list, list] | None:
    """(input shapes, output shapes) of the module at ``overrides``, on meta tensors; None when it fails there.
    Kept per (file, overrides) for the process: a draw asks for the same sizes again."""
    key = json.dumps([str(path), sorted((k, list(v) if isinstance(v, tuple) else v) for k, v in overrides.items())],
                     default=str)
    if key not in _SHAPES:
        got = _meta_run(path, overrides)
        _SHAPES[key] = None if got is None else got[:2]
        _PARAMS[key] = None if got is None else got[2]
    return _SHAPES[key]


_PARAMS: dict[str, int | None] = {}


def _meta_run(path: Path, overrides: dict[str, Any]) -> tuple[list, list, int] | None:
    import warnings

    import torch

    from harness.problems.derive import _build_model
    from harness.problems.workloads import exec_module

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module, _ = exec_module(path, overrides)
            with torch.device("meta"):
                torch.manual_seed(0)
                inputs = [x.to("meta") if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
            model, _, _ = _build_model(module, torch.float32)
            with torch.no_grad():
                out = model(*inputs)
    except Exception:  # noqa: BLE001 - a size the module does not accept
        return None
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    params = sum(t.numel() for t in [*model.parameters(), *model.buffers()] if t.is_floating_point())
    return ([tuple(x.shape) for x in inputs if isinstance(x, torch.Tensor)],
            [tuple(o.shape) for o in outs if isinstance(o, torch.Tensor)], params)


def _elements(shapes: list) -> int:
    n = 0
    for shape in shapes:
        k = 1
        for d in shape:
            k *= d
        n += k
    return n


def _grew(before: list, after: list, v: int | None) -> bool:
    """Shapes of the same ranks where no dimension shrank and one grew: by any amount (``v`` None), or from ``v``
    to ``v + 1``."""
    if len(before) != len(after):
        return False
    hit = False
    for a, b in zip(before, after):
        if len(a) != len(b) or any(y < x for x, y in zip(a, b)):
            return False
        hit = hit or any((y > x) if v is None else (x == v and y == v + 1) for x, y in zip(a, b))
    return hit


def _with(overrides: dict[str, Any], ext: Extent, value: int, base: dict[str, Any]) -> dict[str, Any]:
    out = dict(overrides)
    if ext.position is None:
        out[ext.name] = value
    else:
        cur = list(out.get(ext.name, base[ext.name]))
        cur[ext.position] = value
        out[ext.name] = tuple(cur)
    return out


def extents(problem: Problem, workload: Workload) -> list[Extent]:
    """The sizes of ``workload`` a held-out shape may move (see the module docstring), in the file's order."""
    path = Path(problem.path)
    base = {**literal_constants(path), **dict(workload.params)}
    roots = literal_constants(path)
    over = dict(workload.overrides)
    ref = _shapes(path, over)
    if ref is None:
        return []
    out = []
    for name in roots:
        value = base.get(name)
        parts = [(None, value)] if isinstance(value, int) else list(enumerate(value)) if isinstance(value, tuple) else []
        for pos, v in parts:
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                continue
            ext = Extent(name, pos, v)
            got = _shapes(path, _with(over, ext, v + 1, base))
            if got is not None and (_grew(ref[0], got[0], None) or (ref[0] == got[0] and _grew(ref[1], got[1], v))):
                out.append(ext)
    return out


def _prime(n: int) -> bool:
    if n < 2:
        return False
    k = 2
    while k * k <= n:
        if n % k == 0:
            return False
        k += 1
    return True


def boundary_values(v: int) -> list[int]:
    """Held-out values for an extent of public value ``v``: one less and more, the nearest primes below and above,
    and ``v // 2 + 1`` and ``v + v // 2 + 1`` (see the module docstring); distinct, positive, never ``v``."""
    below = next((k for k in range(v - 1, 1, -1) if _prime(k)), None)
    above = next(k for k in range(v + 1, 2 * v + 3) if _prime(k))
    vals = [v - 1, v + 1, below, above, v // 2 + 1, v + v // 2 + 1]
    out: list[int] = []
    for x in vals:
        if x is not None and x >= 1 and x != v and x not in out:
            out.append(x)
    return out


def _rng(base_seed: int, problem: Problem, workload: Workload, index: int) -> random.Random:
    h = hashlib.sha256(f"kernelgate-heldout|{base_seed}|{problem.id}|{problem.version}|{workload.name}|{index}"
                       .encode()).digest()
    return random.Random(int.from_bytes(h[:8], "big"))


def draw(problem: Problem, workload: Workload, base_seed: int, index: int, exts: list[Extent],
         taken: list[dict[str, Any]], max_growth: float = MAX_GROWTH["cuda"]) -> dict[str, Any] | None:
    """The overrides of held-out shape ``index`` (1-based), or None when no extent can move, the shape cannot be
    brought within the byte budget, or it is one of ``taken``.

    Every extent first takes the first of its boundary values (in a drawn order) with which the module still runs
    on meta tensors; then, while the shape takes more than ``max_growth`` times the public bytes, the extents take
    turns (in the drawn order) stepping down to their next smaller boundary value (or back to the public value)
    that still runs.
    """
    path = Path(problem.path)
    rng = _rng(base_seed, problem, workload, index)
    base = {**literal_constants(path), **dict(workload.params)}
    over = dict(workload.overrides)
    order = list(exts)
    rng.shuffle(order)
    chosen: dict[Extent, int] = {}
    for ext in order:
        values = boundary_values(ext.value)
        rng.shuffle(values)
        for value in values:
            trial = _with(over, ext, value, base)
            if _shapes(path, trial) is not None:
                over, chosen[ext] = trial, value
                break
    public_bytes = _input_bytes(path, dict(workload.overrides), workload.dtype)
    if public_bytes is not None:
        limit = max_growth * public_bytes
        turn = 0
        while (_input_bytes(path, over, workload.dtype) or 0) > limit:
            for k in range(len(order)):  # the extents take turns, so the shrinking spreads over them
                ext = order[(turn + k) % len(order)]
                smaller = sorted((v for v in {*boundary_values(ext.value), ext.value}  # back to public: allowed
                                  if v < chosen.get(ext, ext.value)), reverse=True)
                step = next((v for v in smaller if _shapes(path, _with(over, ext, v, base)) is not None), None)
                if step is not None:
                    over, chosen[ext] = _with(over, ext, step, base), step
                    turn = (turn + k + 1) % len(order)
                    break
            else:
                return None  # nothing can shrink further
    return over if chosen and over not in taken and over != dict(workload.overrides) else None


def _input_bytes(path: Path, overrides: dict[str, Any], dtype: str) -> int | None:
    """Bytes of the module's inputs and outputs at ``overrides`` (meta tensors, the workload's dtype)."""
    from harness.problems.problem import ELEM_BYTES

    shapes = _shapes(path, overrides)
    if shapes is None:
        return None
    return _elements(shapes[0] + shapes[1]) * ELEM_BYTES.get(dtype, 4)


def heldout_workloads(problem: Problem, workload: Workload, base_seed: int, count: int = DEFAULT_COUNT,
                      device: str = "cuda") -> list[Workload]:
    """``count`` held-out workloads of ``workload`` for the run whose secret seed is ``base_seed`` (fewer when the
    problem has fewer distinct shapes to offer; none when it has no extent), within ``device``'s byte budget
    (:data:`MAX_GROWTH`)."""
    if count <= 0 or is_heldout(workload):
        return []
    exts = extents(problem, workload)
    if not exts:
        return []
    taken: list[dict[str, Any]] = [dict(workload.overrides)]
    out: list[Workload] = []
    for index in range(1, count + 1):
        over = None
        for attempt in range(3):  # a draw that repeats an earlier shape is drawn again
            over = draw(problem, workload, base_seed, index + 1000 * attempt, exts, taken,
                        MAX_GROWTH["cpu" if device == "cpu" else "cuda"])
            if over is not None:
                break
        if over is None:
            continue
        taken.append(over)
        w = _workload_at(problem, workload, over, index)
        if w is not None:
            out.append(w)
    return out


def _workload_at(problem: Problem, public: Workload, overrides: dict[str, Any], index: int) -> Workload | None:
    """Held-out workload ``index`` of ``public`` at ``overrides``: the public workload's dtype, tolerance and TF32,
    the module's final sizes, its reduction length and the byte counts of its meta run. No FLOPs: a held-out shape
    is never timed or screened (and its cost is not derived, so nothing of a run's secret shapes reaches the cost
    cache on disk)."""
    from harness.problems.problem import ELEM_BYTES
    from harness.problems.sizes import effective_sizes
    from harness.problems.workloads import eval_expr, exec_module

    path = Path(problem.path)
    shapes = _shapes(path, overrides)
    if shapes is None:
        return None
    try:
        module, tree = exec_module(path, overrides)
    except Exception:  # noqa: BLE001 - refused at these sizes after all
        return None
    sizes = effective_sizes(module.__dict__, tree)
    elem = ELEM_BYTES.get(public.dtype, 4)
    red = (getattr(module, "KERNELGATE", None) or {}).get("reduction_length")
    names = {k: v for k, v in sizes.items() if isinstance(v, (int, float))}
    names["ELEM"] = elem
    try:
        red_len = int(eval_expr(red, names, path=path, field_name="reduction_length")) if red is not None else None
    except ProblemError:
        red_len = public.reduction_length
    ins, outs = _elements(shapes[0]) * elem, _elements(shapes[1]) * elem
    key = json.dumps([str(path), sorted((k, list(v) if isinstance(v, tuple) else v) for k, v in overrides.items())],
                     default=str)
    params = (_PARAMS.get(key) or 0) * elem
    return dataclasses.replace(
        public, name=f"{public.name}~heldout-{index}", params=sizes, tags=(HELDOUT_TAG, _OF + public.name),
        flops=0, flops_known=False, min_bytes=ins + outs + params, reduction_length=red_len, input_bytes=ins,
        output_bytes=outs, param_bytes=params, read_bytes=ins + params, write_bytes=outs, secret=True,
        cost_note="a held-out shape: never timed, so no FLOPs", overrides=dict(overrides))


def index_of(w: Workload) -> int:
    """The 1-based index of a held-out workload among its public workload's (0 for any other workload)."""
    head, sep, k = w.name.rpartition("~heldout-")
    return int(k) if sep and k.isdigit() else 0


def moved_sizes(public: Workload, heldout: Workload) -> dict[str, Any]:
    """The size constants whose value differs between ``public`` and its held-out ``heldout`` (derived ones too)."""
    return {k: v for k, v in heldout.params.items() if public.params.get(k) != v}
