"""Triton ``matmul-without-tensor-cores``: matrix products accumulated with CUDA-core multiply-adds.

A kernel with no ``tl.dot`` that carries ``acc += a * b`` (or ``tl.fma``,
or ``tl.sum`` of a broadcast product) across a long loop, where ``a`` and
``b`` are loads of different pointer arguments each indexed by something
the other is not, computes a matrix product without tensor cores (a 1x1
convolution's scalar weight times a pixel block, a rank-1 GEMM update).
Depthwise products, squares, and products not carried across a loop are
not matrix products and stay quiet. The index analysis is
:mod:`harness.diagnose.lint.indices`, shared with TileLang.
"""

from __future__ import annotations

import ast

from harness.diagnose._astutil import assigned_in, call_arg, names_in, snippet, target_names, walk_scope
from harness.diagnose.findings import Finding
from harness.diagnose.lint.indices import free_indices, index_atoms
from harness.diagnose.lint.loops import accumulation, range_trip
from harness.diagnose.lint.rules import finding
from harness.diagnose.lint.triton_kernel import TL_REDUCTIONS, TritonKernel

KIND = "triton"


def _ptr_atoms(k: TritonKernel, ptr: ast.AST, loop_vars: set[str]) -> set[str]:
    """Index names an address is built from, following pointer variables (``x_img = x_ptr + n * CHW``)."""

    def classify(name: str) -> tuple[str, list[ast.AST]]:
        if name in k.params:
            return ("index" if name in k.vec else "skip"), []  # a helper's block argument is an index
        if name in loop_vars:
            return "index", []
        vals = k.values(name)
        if not vals:
            return "skip", []  # a global or a module alias
        return ("expand", vals) if k.is_pointerish(name) else ("index", [])

    def project(node: ast.BinOp) -> str:
        key = snippet(node, 80)
        k.synth[key] = node
        return key

    return index_atoms(ptr, classify, project)


def _closure(k: TritonKernel, e: ast.AST) -> set[str]:
    """Names ``e`` uses, directly or through the kernel's assignments."""
    out: set[str] = set()
    stack = [e]
    while stack:
        for n in ast.walk(stack.pop()):
            if isinstance(n, ast.Name) and n.id not in out:
                out.add(n.id)
                stack.extend(k.values(n.id))
    return out


def _operand_loads(k: TritonKernel, e: ast.AST) -> list[ast.Call]:
    """The ``tl.load`` s a factor's value comes from (through names and arithmetic, not reductions)."""
    out: list[ast.Call] = []
    seen: set[str] = set()
    stack: list[ast.AST] = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Call) and k.tl(n, "load"):
            out.append(n)
            continue
        if isinstance(n, ast.Call) and k.tl(n, *TL_REDUCTIONS):
            continue
        if isinstance(n, ast.Name):
            if n.id not in seen and n.id not in k.params:
                seen.add(n.id)
                stack.extend(k.values(n.id))
            continue
        stack.extend(c for c in ast.iter_child_nodes(n) if isinstance(c, ast.expr))
    return out


def _mac(k: TritonKernel, stmt: ast.stmt) -> tuple[ast.AST, ast.AST] | None:
    """``(target, added term)`` of ``t += e``, ``t = t + e`` or ``t = tl.fma(a, b, t)``."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.Call):
        v = stmt.value
        if k.tl(v, "fma") and len(v.args) == 3 and snippet(v.args[2]) == snippet(stmt.targets[0]):
            return stmt.targets[0], ast.BinOp(left=v.args[0], op=ast.Mult(), right=v.args[1])
    if isinstance(stmt, ast.AugAssign) and not isinstance(stmt.op, ast.Add):
        return None
    if isinstance(stmt, ast.Assign) and not (isinstance(stmt.value, ast.BinOp) and isinstance(stmt.value.op, ast.Add)):
        return None
    return accumulation(stmt)


def matmul_on_cuda_cores(k: TritonKernel) -> list[Finding]:
    """A matrix product accumulated with multiply-adds in a kernel with no ``tl.dot`` (see the module doc)."""
    if k.calls("dot", "dot_scaled"):
        return []
    loop_vars = {name for n in k.nodes if isinstance(n, ast.For) for name in target_names(n.target)}

    block_args = k.vec & set(k.params)  # a device helper's block arguments: index sources

    def direct(a: str) -> bool:
        if a in loop_vars or a in block_args:
            return True
        return any(
            isinstance(m, ast.Call) and k.tl(m, "program_id", "arange", "load")
            for v in k.values(a) for m in ast.walk(v)
        )

    def parents(a: str) -> set[str]:
        return {
            n for v in k.values(a) for n in names_in(v)
            if n != a and n not in k.params and (n in loop_vars or k.values(n))
        }

    lane_cache: dict[str, tuple[set[str], set[str]]] = {}

    def lanes(a: str) -> tuple[set[str], set[str]]:
        """``tl.arange`` spellings ``a`` is built from, and its other index sources (loop vars, ``pid``, ``load``)."""
        if a in lane_cache:
            return lane_cache[a]
        aranges: set[str] = set()
        roots: set[str] = set()
        seen: set[str] = set()
        stack: list[ast.AST] = [ast.Name(id=a, ctx=ast.Load())]
        while stack:
            for m in ast.walk(stack.pop()):
                if isinstance(m, ast.Call) and k.tl(m, "arange"):
                    aranges.add(snippet(m))
                elif isinstance(m, ast.Call) and k.tl(m, "program_id", "load"):
                    roots.add("<" + snippet(m.func) + ">")
                elif isinstance(m, ast.Name) and m.id not in seen:
                    seen.add(m.id)
                    if m.id in loop_vars or m.id in block_args:
                        roots.add(m.id)
                    stack.extend(k.values(m.id))
        lane_cache[a] = (aranges, roots)
        return aranges, roots

    kw = dict(parents=parents, direct=direct, values=k.values, lanes=lanes)
    stmts = sorted((n for n in k.nodes if isinstance(n, (ast.Assign, ast.AugAssign))), key=lambda n: n.lineno)
    for stmt in stmts:
        mac = _mac(k, stmt)
        if mac is None or not isinstance(mac[0], ast.Name):
            continue
        target, contrib = mac
        carried = _carrying_loops(k, stmt, target.id)
        runtime = [lp for lp in carried if _runtime_loop(k, lp)]
        if not runtime:
            continue
        outer = carried[-1]
        reduction = {name for lp in carried if isinstance(lp, ast.For) for name in target_names(lp.target)}
        f = _product_finding(k, runtime[-1], stmt, target, contrib, assigned_in(outer), reduction, loop_vars, kw)
        if f is not None:
            return [f]
    return []


def _carrying_loops(k: TritonKernel, stmt: ast.stmt, target: str) -> list[ast.For | ast.While]:
    """Loops around ``stmt`` (innermost first) whose iterations all add into ``target`` (no reset inside)."""
    out: list[ast.For | ast.While] = []
    p = k.idx.parents.get(stmt)
    while p is not None and p is not k.fn:
        if isinstance(p, (ast.For, ast.While)):
            reset = any(
                isinstance(n, ast.Assign) and _mac(k, n) is None
                and any(target in target_names(t) for t in n.targets)
                for n in walk_scope(p)
            )
            if reset:
                break
            out.append(p)
        p = k.idx.parents.get(p)
    return out


def _runtime_loop(k: TritonKernel, loop: ast.For | ast.While) -> bool:
    """A loop whose trip count is not a small constant (``tl.static_range`` counts as constant)."""
    trip = range_trip(loop, k.resolve)
    if trip is not None:
        return trip >= 16
    return not (isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call) and k.tl(loop.iter, "static_range"))


def _product_finding(k: TritonKernel, loop, stmt, target, contrib, varying, reduction, loop_vars, kw) -> Finding | None:
    summed = False
    e = contrib
    for _ in range(6):
        if isinstance(e, ast.Call) and k.tl(e, "sum"):
            summed = True
            e = call_arg(e, 0, "input")
            continue
        cast = k.cast_of(e)
        if cast is not None:
            e = cast[0]
            continue
        if isinstance(e, ast.Name) and len(k.values(e.id)) == 1:
            v = k.values(e.id)[0]
            if (isinstance(v, ast.BinOp) and isinstance(v.op, ast.Mult)) or (
                isinstance(v, ast.Call) and (k.tl(v, "sum") or k.cast_of(v) is not None)
            ):
                e = v
                continue
        break
    if e is None:
        return None
    factors: list[ast.AST] = []

    def flatten(x: ast.AST) -> None:
        if isinstance(x, ast.BinOp) and isinstance(x.op, ast.Mult):
            flatten(x.left)
            flatten(x.right)
        else:
            factors.append(x)

    flatten(e)
    if len(factors) < 2:
        return None
    ops = []
    for fac in factors:
        loads = _operand_loads(k, fac)
        ptrs = [call_arg(ld, 0, "pointer") for ld in loads]
        ptrs = [p for p in ptrs if p is not None]
        bases = {k.base(p) for p in ptrs} - {None}
        if not bases or not any(_closure(k, p) & varying for p in ptrs):
            continue
        atoms = set().union(*(_ptr_atoms(k, p, loop_vars) for p in ptrs))
        scalar = all(k.is_scalar_load(ld) for ld in loads)
        bcast = any(
            isinstance(m, ast.Subscript) and any(
                isinstance(x, ast.Constant) and x.value is None
                for x in (m.slice.elts if isinstance(m.slice, ast.Tuple) else [m.slice])
            )
            for m in ast.walk(fac)
        )
        ops.append((fac, bases, atoms, scalar, bcast))
    var = snippet(loop.target) if isinstance(loop, ast.For) else "while"
    for i in range(len(ops)):
        for j in range(i + 1, len(ops)):
            (_, ba, aa, sa, xa), (_, bb, ab, sb, xb) = ops[i], ops[j]
            if ba & bb:
                continue
            free_a = free_indices(aa, ab, reduction=reduction, **kw)
            free_b = free_indices(ab, aa, reduction=reduction, **kw)
            na, nb = "/".join(sorted(ba)), "/".join(sorted(bb))
            if free_a and free_b:
                note = ""
                if sa != sb:
                    sfree, bname = (free_a, nb) if sa else (free_b, na)
                    note = (f"; every `{', '.join(sorted(sfree))}` re-reads the same `{bname}` block "
                            "(one per program, no reuse)")
                kind = "scalar x block" if sa != sb else ("scalar" if sa else "block")
                return finding(
                    "matmul-without-tensor-cores", KIND, "defect", stmt.lineno,
                    f"`{k.name}`: loop over `{var}` accumulates `{snippet(contrib, 50)}` into "
                    f"`{snippet(target)}` without tl.dot: a matrix product ({kind} multiply-adds; `{na}` indexed "
                    f"by `{', '.join(sorted(free_a))}`, `{nb}` by `{', '.join(sorted(free_b))}`) on CUDA cores"
                    + note,
                )
            if summed and len(ops) == 2 and (xa or xb) and (free_a or free_b):
                vec = nb if free_a else na
                return finding(
                    "matmul-without-tensor-cores", KIND, "warning", stmt.lineno,
                    f"`{k.name}`: loop over `{var}` accumulates the broadcast product `{snippet(contrib, 50)}` "
                    f"with tl.sum: a matrix-vector product on CUDA cores (`{vec}` has no index of its own); "
                    "memory-bound if it is a single vector, a matrix product if several vectors share the matrix",
                )
    return None
