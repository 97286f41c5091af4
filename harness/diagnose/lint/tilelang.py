"""TileLang kernel rules: the checks that read one ``with T.Kernel(...)`` block.

``sequential-reduction`` (a thread or the whole block folding one element
per serial iteration, ``threads=1``), ``one-element-per-program`` and
``tiny-tile`` (blocks, thread counts, ``T.Parallel`` extents, ``T.gemm``
tiles), ``cast-in-inner-loop``, ``fp64-promotion``; the tensor-core rule is
:mod:`harness.diagnose.lint.tilelang_matmul`. :func:`check` runs them all on
every kernel of a :class:`~harness.diagnose.lint.tilelang_kernel.TileLangModule`.
The rules' contracts are in :mod:`harness.diagnose.lint.rules`.
"""

from __future__ import annotations

import ast

from harness.diagnose._astutil import FuncDef, call_arg, func_params, names_in, snippet, target_names, walk_scope
from harness.diagnose.findings import Finding
from harness.diagnose.lint.loops import accumulation, prod, range_trip, rebound_before, stmts_directly_in
from harness.diagnose.lint.rules import finding
from harness.diagnose.lint.tilelang_kernel import (
    TILELANG,
    TL_CROSS,
    TL_GEMMS,
    TL_THREAD,
    TL_TILE_OPS,
    TL_WRITES_ARG,
    TileLangModule,
    TLKernel,
)
from harness.diagnose.lint.tilelang_matmul import matmul_without_gemm

KIND = "tilelang"


def check(tlm: TileLangModule) -> list[Finding]:
    """Every TileLang rule on every kernel of the module, then the module-wide fp64 check."""
    out: list[Finding] = []
    for k in tlm.kernels:
        out += _check_kernel(tlm, k)
    out += _fp64(tlm)
    return out


def _check_kernel(tlm: TileLangModule, k: TLKernel) -> list[Finding]:
    out: list[Finding] = []
    body_nodes = [m for s in k.with_node.body for m in [s, *walk_scope(s)]]
    calls = [m for m in body_nodes if isinstance(m, ast.Call)]
    short = [tlm.tq(c) for c in calls]
    loops = [m for m in body_nodes if isinstance(m, (ast.For, ast.While))]
    has_cross = any(s in TL_CROSS for s in short)
    has_tile = any(s in TL_TILE_OPS for s in short)
    has_thread = any(s in TL_THREAD for s in short)
    line = k.with_node.lineno

    threads_expr = None
    for kw in k.call.keywords:
        if kw.arg == "threads":
            threads_expr = kw.value
    if threads_expr is None:
        threads = {128}
    elif isinstance(threads_expr, (ast.Tuple, ast.List)):
        parts = [tlm.resolve(k, e) for e in threads_expr.elts]
        threads = None if any(p is None for p in parts) else {prod(max(p) for p in parts)}
    else:
        threads = tlm.resolve(k, threads_expr)
    tmax = max(threads) if threads else None

    if tmax == 1:
        if loops:
            lp = loops[0]
            var = snippet(lp.target) if isinstance(lp, ast.For) else "while"
            out.append(finding(
                "sequential-reduction", KIND, "defect", lp.lineno,
                f"kernel `{k.name}` runs threads=1: a single thread walks the loop over `{var}`",
            ))
        else:
            out.append(finding(
                "one-element-per-program", KIND, "defect", line,
                f"kernel `{k.name}` runs threads=1 and computes one element per block",
            ))
        return out + _casts(tlm, k, loops)
    if tmax is not None and tmax < 32:
        out.append(finding("tiny-tile", KIND, "defect", line, f"kernel `{k.name}`: threads={tmax}, under one warp per block"))

    mm = None
    if not any(s in TL_GEMMS for s in short):
        mm = matmul_without_gemm(tlm, k)
        if mm is not None:
            out.append(mm)
    if not has_cross:
        f = _serial_accumulation(tlm, k, loops)
        if f is not None and not (mm is not None and mm.line == f.line):
            out.append(f)

    if not loops and not has_tile and not has_thread:
        out.append(finding(
            "one-element-per-program", KIND, "defect", line,
            f"kernel `{k.name}`: each block computes a single element (no T.Parallel / tile copy)",
        ))
    elif not any(s in ("gemm", "gemm_sp", "wgmma_gemm", "tcgen05_gemm") for s in short) and not has_thread:
        products = []
        for lp in loops:
            if tlm.loop_kind(lp) != "parallel" or not isinstance(lp.iter, ast.Call):
                continue
            outer = tlm.idx.parents.get(lp)
            nested = False
            while outer is not None and outer is not k.with_node:
                if isinstance(outer, ast.For) and tlm.loop_kind(outer) == "parallel":
                    nested = True
                outer = tlm.idx.parents.get(outer)
            if nested:
                continue
            ext = [tlm.resolve(k, a) for a in lp.iter.args]
            if not ext or any(e is None for e in ext):
                products = None
                break
            products.append((prod(max(e) for e in ext), lp))
        if products:
            best, lp = max(products, key=lambda p: p[0])
            if best <= 1:
                out.append(finding(
                    "one-element-per-program", KIND, "defect", lp.lineno,
                    f"kernel `{k.name}`: T.Parallel covers one element per block",
                ))
            elif best < 32:
                out.append(finding(
                    "tiny-tile", KIND, "defect", lp.lineno,
                    f"kernel `{k.name}`: T.Parallel covers {best} elements per block",
                ))
    out += _gemm_tiles(tlm, k, body_nodes)
    out += _casts(tlm, k, loops)
    return out


def _serial_accumulation(tlm: TileLangModule, k: TLKernel, loops: list[ast.AST]) -> Finding | None:
    """A serial loop folding one global element per iteration into an accumulator.

    Two shapes count: a thread walking a row (the serial loop sits inside
    ``T.Parallel`` and its variable indexes the last axis of a kernel
    argument), and a block-level scalar loop in a kernel that either has
    no parallel work at all or processes the same extent in parallel
    elsewhere (so the serial walk is the reduction axis). A short serial
    loop over a small axis (a split-KV combine) next to parallel work is
    left alone.
    """
    prim = k.scope[0] if k.scope else None
    globals_ = {a.arg for a in func_params(prim)} if prim is not None else set()
    par_extents = {
        ast.dump(e)
        for lp in loops
        if isinstance(lp, ast.For) and tlm.loop_kind(lp) == "parallel" and isinstance(lp.iter, ast.Call)
        for e in lp.iter.args
    }
    body_nodes = [m for st in k.with_node.body for m in [st, *walk_scope(st)]]
    scalar_kernel = not par_extents and not any(
        isinstance(c, ast.Call) and tlm.tq(c) in TL_TILE_OPS for c in body_nodes
    )
    for lp in loops:
        if not isinstance(lp, ast.For) or tlm.loop_kind(lp) != "serial":
            continue
        trip = range_trip(lp, lambda e: tlm.resolve(k, e))
        if trip is not None and trip < 32:
            continue
        var = target_names(lp.target)
        in_parallel = tlm.inside_parallel(lp, k)
        extents = [ast.dump(a) for a in lp.iter.args] if isinstance(lp.iter, ast.Call) else []
        walks_parallel_axis = bool(extents) and extents[-1] in par_extents
        derived = {  # v = X[row, j] inside the loop: v is a per-iteration element
            name
            for m in walk_scope(lp)
            if isinstance(m, ast.Assign)
            and any(_row_walk(x, var, globals_, in_parallel) for x in ast.walk(m.value))
            for t in m.targets
            for name in target_names(t)
        }
        for stmt in stmts_directly_in(lp):
            acc = accumulation(stmt)
            if acc is None:
                continue
            target, contrib = acc
            if isinstance(target, ast.Subscript) and names_in(target.slice) & var:
                continue
            tbase = target_names(target)
            if isinstance(target, ast.Name) and rebound_before(lp, stmt, tbase):
                continue
            reads = [
                m for m in ast.walk(contrib)
                if (_row_walk(m, var, globals_, in_parallel) and not (target_names(m) & tbase))
                or (isinstance(m, ast.Name) and m.id in derived and m.id not in tbase)
            ]
            if not reads:
                continue
            if not in_parallel and not (scalar_kernel or walks_parallel_axis):
                continue
            who = "each thread walks a row" if in_parallel else "the whole block walks it serially"
            return finding(
                "sequential-reduction", KIND, "defect", stmt.lineno,
                f"kernel `{k.name}`: serial loop over `{snippet(lp.target)}` accumulates `{snippet(target)}` "
                f"one element per iteration (`{snippet(reads[0])}`; {who}), no T.reduce_*/parallel reduction",
            )
    return None


def _row_walk(m: ast.AST, var: set[str], globals_: set[str], in_parallel: bool) -> bool:
    """``m`` reads a kernel argument element chosen by the serial loop variable.

    Inside ``T.Parallel`` the variable must index the last axis (a thread
    walking along a row); at block level any axis counts.
    """
    if not isinstance(m, ast.Subscript) or not isinstance(m.value, ast.Name) or m.value.id not in globals_:
        return False
    idx = m.slice.elts if isinstance(m.slice, ast.Tuple) else [m.slice]
    if in_parallel:
        return bool(names_in(idx[-1]) & var)
    return bool(names_in(m.slice) & var)


def _gemm_tiles(tlm: TileLangModule, k: TLKernel, body_nodes: list[ast.AST]) -> list[Finding]:
    shapes: dict[str, ast.AST] = {}
    for fn in k.scope[:1]:
        for m in walk_scope(fn):
            if isinstance(m, ast.Assign) and len(m.targets) == 1 and isinstance(m.targets[0], ast.Name):
                if (tlm.tq(m.value) or "").startswith("alloc_"):
                    shape = call_arg(m.value, 0, "shape")
                    if shape is not None:
                        shapes[m.targets[0].id] = shape
    for c in body_nodes:
        if not isinstance(c, ast.Call) or tlm.tq(c) not in ("gemm", "gemm_sp", "wgmma_gemm"):
            continue
        for a in c.args[:3]:
            if not isinstance(a, ast.Name) or a.id not in shapes:
                continue
            shape = shapes[a.id]
            dims = shape.elts if isinstance(shape, (ast.Tuple, ast.List)) else [shape]
            for d in dims:
                r = tlm.resolve(k, d)
                if r is not None and max(r) < 16:
                    return [finding(
                        "tiny-tile", KIND, "defect", c.lineno,
                        f"kernel `{k.name}`: T.gemm tile `{a.id}` has a dimension of {max(r)} (< 16)",
                    )]
    return []


def _casts(tlm: TileLangModule, k: TLKernel, loops: list[ast.AST]) -> list[Finding]:
    out: list[Finding] = []
    for lp in loops:
        if not isinstance(lp, ast.For) or tlm.loop_kind(lp) not in ("serial", "pipelined"):
            continue
        varying = set(target_names(lp.target))
        for m in walk_scope(lp):
            if isinstance(m, ast.Assign):
                for t in m.targets:
                    varying |= target_names(t)
            elif isinstance(m, ast.AugAssign):
                varying |= target_names(m.target)
            elif isinstance(m, ast.For) and tlm.loop_kind(m) in ("serial", "pipelined"):
                varying |= target_names(m.target)
            elif isinstance(m, ast.Call):
                t = tlm.tq(m)
                if t in TL_WRITES_ARG:
                    a = call_arg(m, TL_WRITES_ARG[t], "")
                    if a is not None:
                        varying |= target_names(a) if not isinstance(a, ast.Name) else {a.id}
                elif t is None and isinstance(m.func, ast.Name):
                    varying |= {x.id for x in m.args if isinstance(x, ast.Name)}
        for m in walk_scope(lp):
            if not isinstance(m, ast.Call) or tlm.tq(m) not in ("cast", "Cast"):
                continue
            inner = tlm.innermost_serial(m, k)
            if inner is not lp:
                continue
            if tlm.tq(m) == "Cast":  # TVM order: Cast(dtype, value)
                operand = call_arg(m, 1, "value")
            else:
                operand = call_arg(m, 0, "value")
            if operand is None:
                continue
            used = names_in(operand) - set(tlm.idx.imports.alias)
            if not used or used & varying:
                continue
            if not any(isinstance(x, ast.Subscript) for x in ast.walk(operand)):
                continue  # a pure conversion the compiler can hoist
            out.append(finding(
                "cast-in-inner-loop", KIND, "warning", m.lineno,
                f"kernel `{k.name}`: loop-invariant `{snippet(operand)}` is converted on every iteration of "
                f"the loop over `{snippet(lp.target)}`",
            ))
    return out


def _fp64(tlm: TileLangModule) -> list[Finding]:
    out: list[Finding] = []
    fns: list[FuncDef] = []
    for k in tlm.kernels:
        for fn in k.scope:
            if fn not in fns:
                fns.append(fn)
    factories = {fn.name for fn in fns}
    nodes: list[ast.AST] = []
    for fn in fns:
        nodes += [fn.args, *walk_scope(fn)]
        nodes += [m for d in fn.args.defaults + [x for x in fn.args.kw_defaults if x] for m in ast.walk(d)]
    for c in ast.walk(tlm.idx.tree):
        if isinstance(c, ast.Call) and isinstance(c.func, (ast.Name, ast.Attribute)):
            name = c.func.id if isinstance(c.func, ast.Name) else c.func.attr
            if name in factories:
                nodes += [m for a in [*c.args, *(kw.value for kw in c.keywords)] for m in ast.walk(a)]
    for n in nodes:
        hit = None
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in ("float64", "double", "fp64"):
            hit = repr(n.value)
        elif isinstance(n, ast.Attribute) and (tlm.idx.imports.qual(n) or "") in (
            TILELANG + "float64", TILELANG + "double", "tilelang.float64"
        ):
            hit = snippet(n)
        if hit and not isinstance(tlm.idx.parents.get(n), (ast.Compare, ast.Dict)):
            out.append(finding("fp64-promotion", KIND, "defect", n.lineno, f"TileLang kernel uses float64 ({hit})"))
    return out[:1]
