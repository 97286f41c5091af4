"""The model of a module's TileLang kernels that the TileLang rules query.

A TileLang kernel is a ``with T.Kernel(...)`` block inside a
``@T.prim_func`` (usually built by a ``@tilelang.jit`` factory).
:class:`TileLangModule` finds every such block and answers the questions the
rules ask: what a call is in TileLang's namespace (``T.serial`` ->
``serial``), whether a loop is serial, pipelined or parallel, what integer
values an extent takes in the kernel's scope. The rules live in
:mod:`harness.diagnose.lint.tilelang` and
:mod:`harness.diagnose.lint.tilelang_matmul`; this module judges nothing.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.diagnose._astutil import FuncDef, param_defaults, str_const, walk_scope

if TYPE_CHECKING:
    from harness.diagnose.lint.module import ModuleContext

TILELANG = "tilelang.language."
"""Canonical prefix of ``tilelang.language`` names (``T.serial`` -> ``tilelang.language.serial``)."""

TL_SERIAL = {"serial", "Serial", "unroll", "Unroll"}
TL_PIPELINED = {"Pipelined", "pipelined"}
TL_PARALLEL = {"Parallel", "parallel", "vectorized", "Vectorized"}
TL_TILE_OPS = {
    "copy", "gemm", "gemm_sp", "wgmma_gemm", "tcgen05_gemm", "fill", "clear", "cumsum", "async_copy", "tma_copy",
    "reduce", "reduce_sum", "reduce_max", "reduce_min", "reduce_abssum", "reduce_absmax", "reduce_bitand",
    "reduce_bitor", "reduce_bitxor", "atomic_add", "atomic_max", "atomic_min", "atomic_addx2", "atomic_addx4",
}
TL_CROSS = {
    "reduce", "reduce_sum", "reduce_max", "reduce_min", "reduce_abssum", "reduce_absmax", "reduce_bitand",
    "reduce_bitor", "reduce_bitxor", "cumsum", "atomic_add", "atomic_max", "atomic_min", "atomic_addx2",
    "atomic_addx4", "shfl_xor", "shfl_down", "shfl_up", "shfl_sync", "warp_reduce_sum", "warp_reduce_max",
    "warp_reduce_min", "finalize_reducer", "tvm_thread_allreduce", "gemm", "gemm_sp", "wgmma_gemm", "tcgen05_gemm",
    "alloc_reducer",
}
TL_GEMMS = {"gemm", "gemm_sp", "wgmma_gemm", "tcgen05_gemm", "gemm_v2", "gemm_py"}
TL_THREAD = {"get_thread_binding", "get_thread_bindings", "thread_binding", "launch_thread", "get_warp_idx"}
TL_WRITES_ARG = {"copy": 1, "gemm": 2, "fill": 0, "clear": 0, "reduce_sum": 1, "reduce_max": 1, "reduce_min": 1,
                  "reduce_abssum": 1, "reduce_absmax": 1, "cumsum": 0, "atomic_add": 0}


@dataclass
class TLKernel:
    """One ``with T.Kernel(...)`` block: the ``with`` node, the ``T.Kernel`` call, its enclosing functions."""

    with_node: ast.With
    call: ast.Call
    scope: list[FuncDef]
    name: str


class TileLangModule:
    """The TileLang kernels of one module (``with T.Kernel(...)`` blocks) and the questions rules ask of them."""

    def __init__(self, ctx: "ModuleContext") -> None:
        self.ctx = ctx
        self.idx = ctx.idx
        self.kernels: list[TLKernel] = []
        for n in ast.walk(self.idx.tree):
            if isinstance(n, (ast.With, ast.AsyncWith)):
                for item in n.items:
                    if self.tq(item.context_expr) in ("Kernel", "ClusterKernel"):
                        scope = self.idx.enclosing_functions(n)
                        name = scope[-1].name if scope else "<module>"
                        if len(scope) >= 2:
                            name = f"{scope[-1].name}.{scope[0].name}"
                        self.kernels.append(TLKernel(n, item.context_expr, scope, name))
                        break


    def tq(self, node: ast.AST) -> str | None:
        """TileLang short name of a call (``T.serial(...)`` -> ``serial``)."""
        q = self.idx.imports.call_qual(node)
        if q and q.startswith(TILELANG):
            return q[len(TILELANG):].split(".")[-1]
        if q and q.startswith("tilelang.") and q.count(".") == 1:
            return q.split(".")[-1]
        return None

    def loop_kind(self, loop: ast.AST) -> str:
        if isinstance(loop, ast.While):
            return "serial"
        it = loop.iter
        if isinstance(it, ast.Call):
            t = self.tq(it)
            if t in TL_SERIAL or (isinstance(it.func, ast.Name) and it.func.id == "range"):
                return "serial"
            if t in TL_PIPELINED:
                return "pipelined"
            if t in TL_PARALLEL:
                return "parallel"
            return "other"
        return "serial"

    def resolve(self, k: TLKernel, e: ast.AST | None) -> set[int] | None:
        return self.idx.resolve_ints(e, k.scope)

    def dtype_str(self, k: TLKernel, e: ast.AST | None) -> str | None:
        """A dtype argument spelled as a string, directly or through one assignment / default in scope."""
        if e is None:
            return None
        if isinstance(e, ast.Attribute):
            return e.attr
        if str_const(e) is not None:
            return str_const(e)
        if isinstance(e, ast.Name):
            for fn in k.scope:
                vals = [
                    m.value for m in walk_scope(fn)
                    if isinstance(m, ast.Assign) and any(isinstance(t, ast.Name) and t.id == e.id for t in m.targets)
                ]
                if len(vals) == 1:
                    return str_const(vals[0]) or (vals[0].attr if isinstance(vals[0], ast.Attribute) else None)
                if e.id in param_defaults(fn):
                    return str_const(param_defaults(fn)[e.id])
        return None

    def inside_parallel(self, node: ast.AST, k: TLKernel) -> bool:
        p = self.idx.parents.get(node)
        while p is not None and p is not k.with_node:
            if isinstance(p, ast.For) and self.loop_kind(p) == "parallel":
                return True
            p = self.idx.parents.get(p)
        return False

    def innermost_serial(self, node: ast.AST, k: TLKernel) -> ast.AST | None:
        p = self.idx.parents.get(node)
        while p is not None and p is not k.with_node:
            if isinstance(p, ast.For) and self.loop_kind(p) in ("serial", "pipelined"):
                return p
            p = self.idx.parents.get(p)
        return None
