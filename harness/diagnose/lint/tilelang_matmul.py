"""TileLang ``matmul-without-tensor-cores``: a matrix product as scalar multiply-adds, no ``T.gemm``.

A serial or pipelined loop that accumulates the product of two
kernel-argument or shared-memory buffers, each indexed by something the
other is not, is a matrix product on CUDA cores (a naive GEMM, a 1x1
convolution looping over channels). Products of register fragments (a
hand-tiled SGEMM) and of fp32 shared tiles (``T.gemm`` on fp32 would be
TF32) are deliberately not judged. The index analysis is
:mod:`harness.diagnose.lint.indices`, shared with Triton.
"""

from __future__ import annotations

import ast

from harness.diagnose._astutil import assigned_in, call_arg, func_params, names_in, snippet, target_names, walk_scope
from harness.diagnose.findings import Finding
from harness.diagnose.lint.indices import free_indices, index_atoms
from harness.diagnose.lint.loops import accumulation, range_trip
from harness.diagnose.lint.rules import finding
from harness.diagnose.lint.tilelang_kernel import TL_THREAD, TileLangModule, TLKernel

KIND = "tilelang"


def matmul_without_gemm(tlm: TileLangModule, k: TLKernel) -> Finding | None:
    """A serial/pipelined loop accumulating ``A[.., i, kk] * B[kk, j, ..]`` in a kernel without ``T.gemm``.

    Both operands must be kernel-argument or shared-memory buffers read
    directly (or through plain names), vary with the loop, and each have
    an index the other lacks (the shape of a matrix product: ``A`` reused
    along ``j``, ``B`` along ``i``). Products of register fragments (a
    hand-tiled fp32 SGEMM) and of fp32 shared tiles (``T.gemm`` would be
    TF32) are not judged.
    """
    prim = k.scope[0] if k.scope else None
    globals_ = {a.arg for a in func_params(prim)} if prim is not None else set()
    body = [m for st in k.with_node.body for m in [st, *walk_scope(st)]]
    bindings: set[str] = set()
    for item in k.with_node.items:
        if item.context_expr is k.call and item.optional_vars is not None:
            bindings |= target_names(item.optional_vars)
    loop_vars = {name for m in body if isinstance(m, ast.For) for name in target_names(m.target)}
    values: dict[str, list[ast.AST]] = {}
    for m in body:
        if isinstance(m, ast.Assign):
            for t in m.targets:
                if isinstance(t, ast.Name):
                    values.setdefault(t.id, []).append(m.value)
    index_like = bindings | loop_vars | set(values)
    shared: dict[str, ast.AST | None] = {}  # shared-memory tile -> its dtype expression
    for m in body:
        if (
            isinstance(m, ast.Assign) and len(m.targets) == 1 and isinstance(m.targets[0], ast.Name)
            and tlm.tq(m.value) in ("alloc_shared", "alloc_smem")
        ):
            shared[m.targets[0].id] = call_arg(m.value, 1, "dtype")

    def direct(a: str) -> bool:
        if a in bindings or a in loop_vars:
            return True
        return any(
            (isinstance(x, ast.Call) and tlm.tq(x) in TL_THREAD | {"get_block_binding"})
            or (isinstance(x, ast.Subscript) and isinstance(x.value, ast.Name))
            for v in values.get(a, []) for x in ast.walk(v)
        )

    def parents(a: str) -> set[str]:
        return {n for v in values.get(a, []) for n in names_in(v) if n != a and n in index_like}

    def ancestors(a: str) -> set[str]:
        out: set[str] = set()
        stack = list(values.get(a, []))
        while stack:
            for n in ast.walk(stack.pop()):
                if isinstance(n, ast.Name) and n.id not in out:
                    out.add(n.id)
                    stack.extend(values.get(n.id, []))
        return out

    def reads(e: ast.AST) -> list[ast.Subscript]:
        out: list[ast.Subscript] = []
        seen: set[str] = set()
        stack = [e]
        while stack:
            n = stack.pop()
            if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name):
                if n.value.id in globals_ or n.value.id in shared:
                    out.append(n)
                continue  # a register buffer (a hand-tiled kernel's operand): not followed
            if isinstance(n, ast.Name):
                if n.id not in seen and n.id in values:
                    seen.add(n.id)
                    stack.extend(values[n.id])
                continue
            stack.extend(c for c in ast.iter_child_nodes(n) if isinstance(c, ast.expr))
        return out

    def unwrap(e: ast.AST) -> ast.AST:
        for _ in range(4):
            if isinstance(e, ast.Call) and tlm.tq(e) in ("cast", "Cast"):
                e = call_arg(e, 1, "value") if tlm.tq(e) == "Cast" else call_arg(e, 0, "value")
            elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "astype":
                e = e.func.value
            else:
                break
        return e

    def classify(name: str) -> tuple[str, list[ast.AST]]:
        return ("index" if name in index_like else "skip"), []

    def project(node: ast.BinOp) -> str:
        key = snippet(node, 80)
        values[key] = [node]
        index_like.add(key)
        return key

    def resets(lp: ast.AST, buf: str) -> bool:
        for m in walk_scope(lp):
            if isinstance(m, ast.Assign) and accumulation(m) is None:
                for t in m.targets:
                    base = t.value if isinstance(t, ast.Subscript) else t
                    if isinstance(base, ast.Name) and base.id == buf:
                        return True
            elif isinstance(m, ast.Call) and tlm.tq(m) in ("clear", "fill"):
                a = call_arg(m, 0, "buffer")
                if isinstance(a, ast.Name) and a.id == buf:
                    return True
        return False

    def runtime(lp: ast.AST) -> bool:
        trip = range_trip(lp, lambda e: tlm.resolve(k, e))
        if trip is not None:
            return trip >= 16
        unrolled = isinstance(lp, ast.For) and isinstance(lp.iter, ast.Call) and tlm.tq(lp.iter) in ("unroll", "Unroll")
        return not unrolled

    kw = dict(parents=parents, direct=direct, values=lambda n: values.get(n, []))
    stmts = sorted((m for m in body if isinstance(m, (ast.Assign, ast.AugAssign))), key=lambda m: m.lineno)
    for stmt in stmts:
        if isinstance(stmt, ast.AugAssign) and not isinstance(stmt.op, ast.Add):
            continue
        if isinstance(stmt, ast.Assign) and not (
            isinstance(stmt.value, ast.BinOp) and isinstance(stmt.value.op, ast.Add)
        ):
            continue
        acc = accumulation(stmt)
        if acc is None:
            continue
        target, contrib = acc
        tbase = target.value if isinstance(target, ast.Subscript) else target
        if not isinstance(tbase, ast.Name):
            continue
        carried: list[ast.AST] = []  # serial loops around stmt whose iterations all add into the target
        p = tlm.idx.parents.get(stmt)
        while p is not None and p is not k.with_node:
            if isinstance(p, ast.While) or (isinstance(p, ast.For) and tlm.loop_kind(p) in ("serial", "pipelined")):
                if resets(p, tbase.id):
                    break
                carried.append(p)
            p = tlm.idx.parents.get(p)
        long = [lp for lp in carried if runtime(lp)]
        if not long:
            continue
        varying = assigned_in(carried[-1])
        reduction = {name for lp in carried if isinstance(lp, ast.For) for name in target_names(lp.target)}
        factors: list[ast.AST] = []

        def flatten(x: ast.AST) -> None:
            x = unwrap(x)
            if isinstance(x, ast.BinOp) and isinstance(x.op, ast.Mult):
                flatten(x.left)
                flatten(x.right)
            else:
                factors.append(x)

        flatten(contrib)
        ops = []
        for fac in factors:
            rs = reads(fac)
            if not rs:
                continue
            idx_names = set().union(*(names_in(r.slice) for r in rs))
            closure = idx_names | set().union(*(ancestors(n) for n in idx_names))
            if not closure & varying:
                continue
            atoms = set().union(*(index_atoms(r.slice, classify, project) for r in rs))
            ops.append(({r.value.id for r in rs}, atoms))
        for i in range(len(ops)):
            for j in range(i + 1, len(ops)):
                (ba, aa), (bb, ab) = ops[i], ops[j]
                if ba & bb:
                    continue
                free_a = free_indices(aa, ab, reduction=reduction, **kw)
                free_b = free_indices(ab, aa, reduction=reduction, **kw)
                if free_a and free_b and not all(
                    b in shared and tlm.dtype_str(k, shared[b]) in ("float32", "float") for b in ba | bb
                ):  # fp32 shared tiles: T.gemm would be TF32, CUDA-core FMA can be the exact choice
                    na, nb = "/".join(sorted(ba)), "/".join(sorted(bb))
                    lp = long[-1]
                    var = snippet(lp.target) if isinstance(lp, ast.For) else "while"
                    return finding(
                        "matmul-without-tensor-cores", KIND, "defect", stmt.lineno,
                        f"kernel `{k.name}`: loop over `{var}` accumulates `{snippet(contrib, 50)}` into "
                        f"`{snippet(target)}` without T.gemm: a matrix product (`{na}` indexed by "
                        f"`{', '.join(sorted(free_a))}`, `{nb}` by `{', '.join(sorted(free_b))}`) as scalar "
                        "multiply-adds on CUDA cores",
                    )
    return None
