"""The module context every lint check shares: kernels, kernel handles, launches, host functions.

:class:`ModuleContext` reads a parsed candidate once: its ``@triton.jit``
kernels (as :class:`~harness.diagnose.lint.triton_kernel.TritonKernel`), its
TileLang kernels and kernel factories, where compiled TileLang kernels are
kept (a local, a global, a ``self`` attribute, a dict cache), and the host
functions ``forward`` reaches. It answers the cross-cutting questions: does
this call launch a kernel (:meth:`ModuleContext.launch_of`), what stride does
a launch pass (:meth:`ModuleContext.host_stride_kind`). :meth:`ModuleContext.run`
applies the rule modules.
"""

from __future__ import annotations

import ast

from harness.diagnose._astutil import FuncDef, ModuleIndex, decorator_quals, int_const, snippet, walk_scope
from harness.diagnose.findings import Finding
from harness.diagnose.lint import tilelang, triton
from harness.diagnose.lint.host import Flow, host_findings
from harness.diagnose.lint.tilelang_kernel import TileLangModule
from harness.diagnose.lint.triton_kernel import TritonKernel


def is_triton_jit(idx: ModuleIndex, fn: FuncDef) -> bool:
    """``fn`` is decorated with ``triton.jit`` (however it was imported or aliased)."""
    for q in decorator_quals(idx.imports, fn):
        if q.startswith("triton") and q.rsplit(".", 1)[-1] == "jit":
            return True
    return False


class ModuleContext:
    """Whole-module context: the kernels of both DSLs, where compiled kernels live, the host functions.

    Built once per :func:`~harness.diagnose.lint.lint_source` call; the DSL
    models and the host rules ask it which calls launch kernels and what a
    launch passes.
    """

    def __init__(self, idx: ModuleIndex) -> None:
        self.idx = idx
        self.subscript_calls: dict[str, list[ast.Call]] = {}  # name -> calls of name[...](...)
        for n in ast.walk(idx.tree):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript):
                v = n.func.value
                name = v.id if isinstance(v, ast.Name) else v.attr if isinstance(v, ast.Attribute) else None
                if name:
                    self.subscript_calls.setdefault(name, []).append(n)
        self.triton: dict[str, TritonKernel] = {}
        self.tl_direct: set[str] = set()
        self.tl_factories: set[str] = set()
        jit_fns = [
            n for n in ast.walk(idx.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and is_triton_jit(idx, n)
        ]
        jit_names = {fn.name for fn in jit_fns}
        # @triton.jit functions called from other jit functions are device helpers: their arguments may be blocks
        self.triton_helpers = {
            c.func.id
            for fn in jit_fns
            for c in walk_scope(fn)
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in jit_names
        }
        for fn in jit_fns:
            self.triton[fn.name] = TritonKernel(self, fn)
        for n in ast.walk(idx.tree):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if n.name in self.triton and self.triton[n.name].fn is n:
                    continue
                quals = decorator_quals(idx.imports, n)
                if any(q.startswith("tilelang") and q.rsplit(".", 1)[-1] in ("jit", "autotune", "lazy_jit") for q in quals):
                    nested_prim = any(
                        isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m is not n for m in ast.walk(n)
                    )
                    (self.tl_factories if nested_prim else self.tl_direct).add(n.name)
                elif any(
                    isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and m is not n
                    and any(q.endswith("prim_func") for q in decorator_quals(idx.imports, m))
                    for m in ast.walk(n)
                ):
                    self.tl_factories.add(n.name)  # returns a PrimFunc; tilelang.compile(...) makes the handle
        self.tilelang = TileLangModule(self)
        self._handles()
        self.hosts = idx.host_functions(skip=set(self.triton) | self.tl_factories | self.tl_direct)
        self._summaries: dict[int, tuple[int, bool]] = {}

    # -- kernel handles ---------------------------------------------------------------

    def _handles(self) -> None:
        """Find where compiled TileLang kernels live, so calling them reads as a launch.

        A handle is the result of a ``@tilelang.jit`` factory call or of
        ``tilelang.compile``; it may be kept in a local, a module global, a
        ``self`` attribute, a dict cache, or returned by a helper.
        """
        self.handle_names: set[str] = set()  # module-level names holding a compiled kernel
        self.handle_attrs: set[str] = set()  # self.<attr> holding one
        self.handle_dicts: set[str] = set()  # dict names / self attrs caching them
        self.handle_funcs: set[str] = set()  # functions returning one
        self._local_handles: dict[int, set[str]] = {}
        self._fn_nodes: dict[int, list[ast.AST]] = {}
        if not self.tl_factories and not self.idx.imports.imports_prefix("tilelang"):
            return
        kernel_fns = {id(k.scope[0]) for k in self.tilelang.kernels if k.scope}
        fns = [
            n for n in ast.walk(self.idx.tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and id(n) not in kernel_fns and n.name not in self.triton
        ]
        scopes: list[tuple[FuncDef | None, list[ast.AST]]] = [(None, list(walk_scope(self.idx.tree)))]
        for fn in fns:
            self._fn_nodes[id(fn)] = list(walk_scope(fn))
            scopes.append((fn, self._fn_nodes[id(fn)]))
        for _ in range(3):
            for fn, nodes in scopes:
                local = self.local_handles(fn, fresh=True) if fn is not None else set()
                for n in nodes:
                    if fn is not None and isinstance(n, ast.Return) and n.value is not None and self.is_handle(n.value, local):
                        self.handle_funcs.add(fn.name)
                    if not isinstance(n, ast.Assign) or not self.is_handle(n.value, local):
                        continue
                    for t in n.targets:
                        if isinstance(t, ast.Name) and fn is None:
                            self.handle_names.add(t.id)
                        elif isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                            self.handle_attrs.add(t.attr)
                        elif isinstance(t, ast.Subscript):
                            base = t.value
                            if isinstance(base, ast.Name):
                                self.handle_dicts.add(base.id)
                            elif isinstance(base, ast.Attribute):
                                self.handle_dicts.add(base.attr)

    def local_handles(self, fn: FuncDef, fresh: bool = False) -> set[str]:
        if not fresh and id(fn) in self._local_handles:
            return self._local_handles[id(fn)]
        nodes = self._fn_nodes.get(id(fn))
        if nodes is None:
            nodes = self._fn_nodes[id(fn)] = list(walk_scope(fn))
        local: set[str] = set()
        if self.tl_factories or self.handle_funcs or self.handle_names or self.handle_dicts or self.handle_attrs or fresh:
            for _ in range(2):
                for n in nodes:
                    if isinstance(n, ast.Assign) and self.is_handle(n.value, local):
                        for t in n.targets:
                            if isinstance(t, ast.Name):
                                local.add(t.id)
        self._local_handles[id(fn)] = local
        return local

    def is_handle(self, e: ast.AST, local: set[str]) -> bool:
        """True when ``e`` evaluates to a compiled TileLang kernel (calling it launches)."""
        if isinstance(e, ast.Call):
            q = self.idx.imports.qual(e.func) or ""
            f = e.func
            if isinstance(f, ast.Name) and (f.id in self.tl_factories or f.id in self.handle_funcs):
                return True
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
                if f.attr in self.handle_funcs:
                    return True
            if q in ("tilelang.compile", "tilelang.jit.compile"):
                return True
            if (  # kernel = matmul.compile(M=..., block_M=...) on a @tilelang.jit function
                isinstance(f, ast.Attribute)
                and f.attr in ("compile", "get_kernel")
                and isinstance(f.value, ast.Name)
                and f.value.id in (self.tl_direct | self.tl_factories)
            ):
                return True
            if isinstance(f, ast.Attribute) and f.attr in ("get", "setdefault") and self._is_handle_dict(f.value):
                return True
            return False
        if isinstance(e, ast.Name):
            return e.id in local or e.id in self.handle_names
        if isinstance(e, ast.Attribute):
            return isinstance(e.value, ast.Name) and e.value.id == "self" and e.attr in self.handle_attrs
        if isinstance(e, ast.Subscript):
            return self._is_handle_dict(e.value)
        return False

    def _is_handle_dict(self, e: ast.AST) -> bool:
        if isinstance(e, ast.Name):
            return e.id in self.handle_dicts
        if isinstance(e, ast.Attribute):
            return e.attr in self.handle_dicts
        return False

    # -- launches -----------------------------------------------------------------------

    def launch_of(self, call: ast.Call, fn: FuncDef, owner: ast.ClassDef | None) -> tuple[str, int, bool] | None:
        """``(label, kernel count, returns_full)`` when ``call`` launches kernels."""
        f = call.func
        if isinstance(f, ast.Subscript):
            v = f.value
            name = v.id if isinstance(v, ast.Name) else v.attr if isinstance(v, ast.Attribute) else None
            if name in self.triton:
                return name, 1, False
        if isinstance(f, ast.Name) and f.id in self.tl_direct:
            return f.id, 1, True
        if self.is_handle(f, self.local_handles(fn)):
            return snippet(f, 30), 1, True
        helper = self._helper(call, owner)
        if helper is not None:
            count, full = self.summary(helper[0], helper[1])
            if count:
                return helper[0].name, count, full
        return None

    def _helper(self, call: ast.Call, owner: ast.ClassDef | None) -> tuple[FuncDef, ast.ClassDef | None] | None:
        f = call.func
        if isinstance(f, ast.Name) and f.id in self.idx.functions and f.id not in self.triton:
            return self.idx.functions[f.id], None
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            if f.value.id == "self" and owner is not None:
                m = self.idx.method(owner, f.attr)
                return (m, owner) if m is not None else None
            if f.attr == "apply" and f.value.id in self.idx.classes:
                c = self.idx.classes[f.value.id]
                m = self.idx.method(c, "forward")
                return (m, c) if m is not None else None
        return None

    def summary(self, fn: FuncDef, owner: ast.ClassDef | None) -> tuple[int, bool]:
        """``(kernels launched on the longest path, returns a full-size kernel output)`` of a helper."""
        key = id(fn)
        if key in self._summaries:
            return self._summaries[key]
        self._summaries[key] = (0, False)  # recursion guard
        flow = Flow(self, fn, owner)
        flow.run()
        count = max((sum(e.count for e in p.events) for p in flow.paths), default=0)
        full = any(v is not None and flow.kind.get(v) == "full" for p in flow.paths for v in p.returns)
        self._summaries[key] = (count, full)
        return count, full

    # -- host-side stride classification for coalescing ---------------------------------

    def host_stride_kind(self, arg: ast.AST, call: ast.Call) -> str:
        """``outer`` for ``t.stride(0)``/``t.shape[-1]``-like launch arguments, ``contig`` for ``stride(-1)``."""
        if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr == "stride":
            d = int_const(arg.args[0]) if arg.args else None
            if d is None:
                return "unknown"
            if d < -1:
                return "outer"
            if d == 0:  # the row stride only if the tensor has a second dimension
                return "outer" if self._rank_at_least_2(arg.func.value, call) else "unknown"
            return "contig" if d == -1 else "unknown"
        if isinstance(arg, ast.Subscript) and isinstance(arg.value, ast.Attribute) and arg.value.attr == "shape":
            return "outer" if int_const(arg.slice) == -1 else "unknown"
        if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr == "size":
            return "outer" if arg.args and int_const(arg.args[0]) == -1 else "unknown"
        if isinstance(arg, ast.Name):
            fns = self.idx.enclosing_functions(call)
            if fns:
                for n in walk_scope(fns[0]):
                    if isinstance(n, ast.Assign) and len(n.targets) == 1:
                        t = n.targets[0]
                        if isinstance(t, ast.Name) and t.id == arg.id:
                            return self.host_stride_kind(n.value, call) if not isinstance(n.value, ast.Name) else "unknown"
                        if (
                            isinstance(t, ast.Tuple)
                            and isinstance(n.value, ast.Attribute)
                            and n.value.attr == "shape"
                            and t.elts
                            and isinstance(t.elts[-1], ast.Name)
                            and t.elts[-1].id == arg.id
                        ):
                            return "outer"
        return "unknown"

    def _rank_at_least_2(self, tensor: ast.AST, call: ast.Call) -> bool:
        """Host-side evidence that ``tensor`` has >= 2 dimensions (so ``stride(0)`` is a row stride)."""
        key = ast.dump(tensor)
        fns = self.idx.enclosing_functions(call)
        scope = walk_scope(fns[0]) if fns else ast.walk(self.idx.tree)
        for n in scope:
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("stride", "size"):
                if ast.dump(n.func.value) == key and n.args and int_const(n.args[0]) not in (None, 0, -1):
                    return True
            if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Attribute) and n.value.attr == "shape":
                if ast.dump(n.value.value) == key and int_const(n.slice) not in (None, 0, -1):
                    return True
            if (
                isinstance(n, ast.Assign)
                and isinstance(n.targets[0], ast.Tuple)
                and len(n.targets[0].elts) >= 2
                and isinstance(n.value, ast.Attribute)
                and n.value.attr == "shape"
                and ast.dump(n.value.value) == key
            ):
                return True
        return False

    # -- running the rules ------------------------------------------------------------------

    def run(self, kernel_dsls: frozenset[str] | set[str], host: bool = True) -> list[Finding]:
        """Findings of the kernel rules of ``kernel_dsls`` (``triton``, ``tilelang``) and, if ``host``, host rules."""
        out: list[Finding] = []
        if "triton" in kernel_dsls:
            for k in self.triton.values():
                out += triton.check(k)
        if "tilelang" in kernel_dsls:
            out += tilelang.check(self.tilelang)
        if host:
            out += host_findings(self)
        return out
