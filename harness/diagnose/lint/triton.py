"""Triton kernel rules: the checks that read one ``@triton.jit`` kernel.

Each function takes a :class:`~harness.diagnose.lint.triton_kernel.TritonKernel`
and returns findings (the rules' contracts are in
:mod:`harness.diagnose.lint.rules`): ``sequential-reduction``,
``fp64-promotion``, ``cast-in-inner-loop``, ``one-element-per-program`` and
``tiny-tile`` (block sizes), ``non-coalesced-access``; the tensor-core rule
is :mod:`harness.diagnose.lint.triton_matmul`. :func:`check` runs them all.
"""

from __future__ import annotations

import ast
import re

from harness.diagnose._astutil import assigned_in, call_arg, int_const, names_in, snippet, target_names, walk_scope
from harness.diagnose.findings import Finding
from harness.diagnose.lint.loops import (
    accumulation,
    dtype_text,
    innermost_loop,
    loops_in,
    range_trip,
    rebound_before,
    stmts_directly_in,
)
from harness.diagnose.lint.rules import finding
from harness.diagnose.lint.triton_kernel import TL, TritonKernel
from harness.diagnose.lint.triton_matmul import matmul_on_cuda_cores

KIND = "triton"


def check(k: TritonKernel) -> list[Finding]:
    """Every Triton rule on kernel ``k``; a statement the tensor-core rule names is not also a sequential reduction."""
    out: list[Finding] = []
    out += _sequential_reduction(k)
    out += _fp64(k)
    out += _casts(k)
    out += _block_size(k)
    out += _coalescing(k)
    mm = matmul_on_cuda_cores(k)
    if mm:  # the tensor-core fix subsumes the reduction fix: one finding per statement
        lines = {f.line for f in mm}
        out = [f for f in out if not (f.rule == "sequential-reduction" and f.line in lines)]
    return out + mm


def _sequential_reduction(k: TritonKernel) -> list[Finding]:
    for loop in loops_in(k.fn):
        trip = range_trip(loop, k.resolve)
        if trip is not None and trip < 16:
            continue
        varying = assigned_in(loop)
        # names holding (values computed from) a scalar load that changes per iteration
        scalar_vals: set[str] = set()

        def scalar_contrib(e: ast.AST) -> ast.AST | None:
            for n in ast.walk(e):
                if k.is_scalar_load(n) and names_in(call_arg(n, 0, "pointer")) & (varying | scalar_vals):
                    return n
                if isinstance(n, ast.Name) and n.id in scalar_vals:
                    return n
            return None

        assigns = [n for n in walk_scope(loop) if isinstance(n, ast.Assign)]
        for _ in range(3):
            for a in assigns:
                if not k.has_block_work(a.value) and scalar_contrib(a.value) is not None:
                    scalar_vals |= {t for tgt in a.targets for t in target_names(tgt)}
        for stmt in stmts_directly_in(loop):
            acc = accumulation(stmt)
            if acc is None:
                continue
            target, contrib = acc
            if k.has_block_work(contrib):
                continue
            if isinstance(target, ast.Name) and rebound_before(loop, stmt, {target.id}):
                continue
            src = scalar_contrib(contrib)
            if src is None:
                continue
            var = snippet(loop.target) if isinstance(loop, ast.For) else "while"
            return [finding(
                "sequential-reduction", KIND, "defect", stmt.lineno,
                f"`{k.name}`: loop over `{var}` accumulates `{snippet(target)}` from a scalar "
                f"tl.load, one element per iteration",
            )]
    return []


def _fp64(k: TritonKernel) -> list[Finding]:
    for n in k.nodes:
        hit = None
        if isinstance(n, ast.Attribute) and (k.idx.imports.qual(n) or "") in (TL + "float64", TL + "double"):
            hit = snippet(n)
        elif isinstance(n, ast.Constant) and n.value in ("float64", "fp64"):
            hit = repr(n.value)
        if hit:
            return [finding("fp64-promotion", KIND, "defect", n.lineno, f"`{k.name}` computes in float64 (`{hit}`)")]
    return []


def _casts(k: TritonKernel) -> list[Finding]:
    out: list[Finding] = []
    flagged: set[int] = set()
    for n in k.nodes:
        cast = k.cast_of(n)
        if cast is None:
            continue
        operand, dtype = cast
        loop = innermost_loop(k.idx, n, k.fn)
        # round trip x.to(a).to(b).to(a)
        inner = k.cast_of(operand)
        if inner is not None:
            d_outer, d_mid = dtype_text(dtype), dtype_text(inner[1])
            inner2 = k.cast_of(inner[0])
            if inner2 is not None and dtype_text(inner2[1]) == d_outer and d_mid != d_outer:
                out.append(finding(
                    "cast-in-inner-loop", KIND, "defect" if loop is not None else "warning", n.lineno,
                    f"`{k.name}`: round-trip cast `{snippet(n)}` ({d_outer} -> {d_mid} -> {d_outer})",
                ))
                continue
            if d_outer == d_mid and d_outer is not None:
                out.append(finding(
                    "cast-in-inner-loop", KIND, "warning", n.lineno, f"`{k.name}`: redundant double cast `{snippet(n)}`",
                ))
                continue
        if loop is None:
            continue
        varying = assigned_in(loop)
        # accumulator converted on every iteration: acc = (acc.to(fp32) + x).to(fp16)
        stmt = k.idx.enclosing(n, (ast.stmt,))
        if (
            isinstance(stmt, (ast.Assign, ast.AugAssign))
            and id(stmt) not in flagged
            and innermost_loop(k.idx, stmt, k.fn) is loop
        ):
            tgts = target_names(stmt.target) if isinstance(stmt, ast.AugAssign) else set().union(
                *(target_names(t) for t in stmt.targets)
            )
            rebound_earlier = {
                name
                for m in walk_scope(loop)
                if isinstance(m, ast.Assign) and m.lineno < stmt.lineno
                for t in m.targets
                for name in target_names(t)
            }
            if (tgts & names_in(operand)) - rebound_earlier:
                flagged.add(id(stmt))
                out.append(finding(
                    "cast-in-inner-loop", KIND, "defect", n.lineno,
                    f"`{k.name}`: accumulator `{', '.join(sorted(tgts))}` is converted "
                    f"(`{snippet(n)}`) on every iteration",
                ))
                continue
        # loop-invariant conversion
        used = names_in(operand)
        if not used or used & varying:
            continue
        block_loads = [
            m for m in ast.walk(operand) if isinstance(m, ast.Call) and k.tl(m, "load") and k.is_vec(m)
        ]
        if block_loads:
            # a compiler may hoist a pure conversion, but not a load: this one repeats per iteration
            out.append(finding(
                "cast-in-inner-loop", KIND, "warning", n.lineno,
                f"`{k.name}`: loop-invariant `{snippet(operand)}` is re-loaded and converted on every iteration",
            ))
    # fp16 dot operands widened to fp32 inside the K loop
    assigned_from_cast: dict[str, ast.AST] = {}
    for n in k.nodes:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            c = k.cast_of(n.value)
            if c is not None:
                assigned_from_cast[n.targets[0].id] = n.value
    for dot in k.calls("dot"):
        if innermost_loop(k.idx, dot, k.fn) is None:
            continue
        for a in dot.args[:2]:
            c = k.cast_of(a)
            if c is None and isinstance(a, ast.Name) and a.id in assigned_from_cast:
                c = k.cast_of(assigned_from_cast[a.id])
            if c is not None and dtype_text(c[1]) in ("float32", "fp32"):
                out.append(finding(
                    "cast-in-inner-loop", KIND, "warning", dot.lineno,
                    f"`{k.name}`: tl.dot operand `{snippet(a)}` is widened to float32 in the K loop "
                    "(fp16/bf16 inputs lose tensor-core rate)",
                ))
                break
    return out


def _single_program(k: TritonKernel) -> bool:
    """Every launch uses a grid of one program (a scalar finalize step, not a data-parallel kernel)."""
    launches = k.launches()
    if not launches:
        return False
    for call in launches:
        grid = call.func.slice if isinstance(call.func, ast.Subscript) else None
        dims = grid.elts if isinstance(grid, (ast.Tuple, ast.List)) else [grid]
        if not dims or any(int_const(d) != 1 for d in dims):
            return False
    return True


def _block_size(k: TritonKernel) -> list[Finding]:
    out: list[Finding] = []
    has_pid = bool(k.calls("program_id"))
    has_mem = bool(k.calls("load", "store", "atomic_add"))
    if has_pid and has_mem and not k.has_vector_source():
        loops_load = any(
            isinstance(m, ast.Call) and k.tl(m, "load") for loop in loops_in(k.fn) for m in ast.walk(loop)
        )
        if not loops_load and not _single_program(k):
            return [finding(
                "one-element-per-program", KIND, "defect", k.fn.lineno,
                f"`{k.name}` has no tl.arange: each program loads and stores a single element",
            )]
    aranges = k.calls("arange")
    if not aranges:
        return out
    sizes: dict[str, int] = {}
    for a in aranges:
        start = call_arg(a, 0, "start")
        end = call_arg(a, 1, "end")
        if end is None:
            return out
        s = k.resolve(start) if start is not None else {0}
        e = k.resolve(end)
        if s is None or e is None:
            return out
        key = end.id if isinstance(end, ast.Name) else f"@{a.lineno}:{a.col_offset}"
        sizes[key] = max(sizes.get(key, 0), max(e) - min(s))
    uses_dot = bool(k.calls("dot", "dot_scaled"))
    if uses_dot:
        small = {key: size for key, size in sizes.items() if size < 16}
        if small:
            named = [f"{key}={size}" for key, size in sorted(small.items()) if not key.startswith("@")]
            desc = ", ".join(named) or "tl.arange"
            out.append(finding(
                "tiny-tile", KIND, "defect", aranges[0].lineno,
                f"`{k.name}`: tl.dot tile dimension under 16 ({desc})",
            ))
        return out
    total = 1
    for v in sizes.values():
        total *= max(v, 1)
    named = [f"{key}={size}" for key, size in sorted(sizes.items()) if not key.startswith("@")]
    desc = ", ".join(named) or f"{total} elements"
    if total <= 1:
        out.append(finding(
            "one-element-per-program", KIND, "defect", aranges[0].lineno,
            f"`{k.name}` is launched with a block of one element ({desc})",
        ))
    elif total < 32:
        out.append(finding(
            "tiny-tile", KIND, "defect", aranges[0].lineno,
            f"`{k.name}`: block of {total} elements per program ({desc}), under one warp",
        ))
    return out

# -- coalescing ------------------------------------------------------------------


_ROW_STRIDE_RE = re.compile(r"(row_?stride|stride_?row|^(n_?cols|num_?cols|n_?columns|ncols?)$)", re.I)


def _stride_kind(k: TritonKernel, e: ast.AST) -> str:
    """``outer`` (a row/batch stride), ``contig`` (stride 1) or ``unknown``."""
    if int_const(e) == 1:
        return "contig"
    if not isinstance(e, ast.Name):
        return "unknown"
    name = e.id
    if name in k.params:
        kinds = set()
        pos = k.params.index(name)
        for call in k.launches():
            arg = None
            for kw in call.keywords:
                if kw.arg == name:
                    arg = kw.value
            if arg is None and pos < len(call.args):
                arg = call.args[pos]
            if arg is not None:
                kinds.add(k.ctx.host_stride_kind(arg, call))
        if kinds:  # what the launch passes beats what the name suggests
            return "outer" if kinds == {"outer"} else "unknown"
    return "outer" if _ROW_STRIDE_RE.search(name) else "unknown"


def _inline(k: TritonKernel, e: ast.AST, depth: int = 0) -> ast.AST:
    if depth > 6:
        return e
    if isinstance(e, ast.Name):
        vals = k.assigns.get(e.id, [])
        if len(vals) == 1:
            return _inline(k, vals[0], depth + 1)
        return e
    if isinstance(e, ast.BinOp):
        return ast.BinOp(left=_inline(k, e.left, depth + 1), op=e.op, right=_inline(k, e.right, depth + 1))
    return e


def _arange_terms(k: TritonKernel, e: ast.AST) -> list[str]:
    """Stride kind of each additive term of a pointer expression that holds a tl.arange.

    A term whose lanes reach it only through ``//`` (``oc = offs // (H * W)``)
    changes once per many lanes: neighbouring lanes read the same address (a
    broadcast), whatever the term is multiplied by, so it is ``unknown``, not
    a row stride.
    """
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
        return _arange_terms(k, e.left) + _arange_terms(k, e.right)
    if not _has_arange(k, e):
        return []
    if not _has_fast_lane(k, e):
        return ["unknown"]
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult):
        lv, rv = _has_arange(k, e.left), _has_arange(k, e.right)
        if lv and not rv:
            return [_stride_kind(k, e.right)]
        if rv and not lv:
            return [_stride_kind(k, e.left)]
        return ["unknown"]
    if isinstance(e, (ast.BinOp, ast.Call)):
        return ["unknown"]
    if isinstance(e, ast.Name) and (
        len(k.assigns.get(e.id, [])) != 1
        or any(isinstance(n, ast.AugAssign) and target_names(n.target) == {e.id} for n in k.nodes)
    ):
        return ["unknown"]  # a pointer advanced in place: its strides are not visible here
    return ["contig"]


def _has_arange(k: TritonKernel, e: ast.AST) -> bool:
    for n in ast.walk(e):
        if isinstance(n, ast.Call) and k.tl(n, "arange"):
            return True
        if isinstance(n, ast.Name) and n.id in k.arange_names:
            return True
    return False


def _has_fast_lane(k: TritonKernel, e: ast.AST) -> bool:
    """``e`` varies from one tl.arange lane to the next: an arange reaches it other than through ``//``."""
    stack = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.FloorDiv):
            continue  # the quotient of a lane index changes once per divisor's worth of lanes
        if isinstance(n, ast.Call) and k.tl(n, "arange"):
            return True
        if isinstance(n, ast.Name) and n.id in k.arange_names and n.id not in _slow_names(k):
            return True
        stack.extend(ast.iter_child_nodes(n))
    return False


def _slow_names(k: TritonKernel) -> set[str]:
    """Names built from tl.arange only through ``//`` (``tmp = offs // W; oc = tmp % C``): slow across lanes."""
    cached = k.derived.get("slow_lane_names")
    if cached is not None:
        return cached
    slow: set[str] = set()
    k.derived["slow_lane_names"] = slow  # filled in place; recursive lookups see the names found so far
    pairs = [(t, n.value) for n in k.nodes if isinstance(n, ast.Assign) for t in n.targets]
    changed = True
    while changed:
        changed = False
        for name in k.arange_names - slow:
            values = [v for t, v in pairs if name in target_names(t)]
            if values and all(_has_arange(k, v) and not _has_fast_lane(k, v) for v in values):
                slow.add(name)
                changed = True
    return slow


def _lane_extent(k: TritonKernel, ptr: ast.AST) -> int | None:
    """Largest resolved tl.arange extent an address is built from; ``None`` if any is unknown."""
    extents: list[int] = []
    seen: set[str] = set()
    stack = [ptr]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Call) and k.tl(n, "arange"):
            start, end = call_arg(n, 0, "start"), call_arg(n, 1, "end")
            s = k.resolve(start) if start is not None else {0}
            e = k.resolve(end) if end is not None else None
            if s is None or e is None:
                return None
            extents.append(max(e) - min(s))
            continue
        if isinstance(n, ast.Name) and n.id in k.arange_names and n.id not in seen:
            seen.add(n.id)
            stack.extend(k.values(n.id))
        stack.extend(ast.iter_child_nodes(n))
    return max(extents) if extents else None


def _coalescing(k: TritonKernel) -> list[Finding]:
    """Loads/stores with no lane-contiguous axis; single-lane and broadcast (``//``) lanes are left alone."""
    out: list[Finding] = []
    for call in k.calls("load", "store"):
        ptr = call_arg(call, 0, "pointer")
        if ptr is None or k.is_vec(ptr) is False:
            continue
        extent = _lane_extent(k, ptr)
        if extent is not None and extent <= 1:
            continue  # one lane: nothing to coalesce
        terms = _arange_terms(k, _inline(k, ptr))
        if terms and all(t == "outer" for t in terms):
            op = "tl.load" if k.tl(call, "load") else "tl.store"
            out.append(finding(
                "non-coalesced-access", KIND, "warning", call.lineno,
                f"`{k.name}`: {op}(`{snippet(ptr)}`) steps every tl.arange lane by a row stride "
                "(no contiguous axis)",
            ))
    return out[:3]
