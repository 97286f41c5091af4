"""The model of one ``@triton.jit`` kernel that the Triton rules query.

:class:`TritonKernel` answers dataflow questions about a kernel's ``ast``:
which names hold blocks (vectors) rather than scalars, what values a
``tl.constexpr`` takes (default, launch arguments, autotune configs), which
kernel parameter an address starts from, which names carry ``tl.arange``
offsets. The rules live in :mod:`harness.diagnose.lint.triton` and
:mod:`harness.diagnose.lint.triton_matmul`; this module judges nothing.
Answers are cached per kernel: one instance per kernel per lint call.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from harness.diagnose._astutil import (
    FuncDef,
    call_arg,
    func_params,
    param_defaults,
    str_const,
    target_names,
    walk_scope,
)

if TYPE_CHECKING:
    from harness.diagnose.lint.module import ModuleContext

TL = "triton.language."
"""Canonical prefix of ``triton.language`` names (``tl.arange`` -> ``triton.language.arange``)."""

TL_VECTOR_SOURCES = {
    "arange", "zeros", "full", "make_block_ptr", "advance", "make_tensor_descriptor", "rand", "randn", "randint",
    "randint4x",
}
TL_REDUCTIONS = {"sum", "max", "min", "reduce", "argmax", "argmin", "xor_sum", "reduce_or"}


class TritonKernel:
    """One ``@triton.jit`` function and what the rules need to know about it."""

    def __init__(self, ctx: "ModuleContext", fn: FuncDef) -> None:
        self.ctx = ctx
        self.idx = ctx.idx
        self.fn = fn
        self.name = fn.name
        self.nodes: list[ast.AST] = list(walk_scope(fn))
        self.params = [a.arg for a in func_params(fn)]
        q = self.idx.imports.qual
        self.constexpr = {
            a.arg for a in func_params(fn) if a.annotation is not None and (q(a.annotation) or "").endswith("constexpr")
        }
        # a kernel's arguments are scalars or pointers; a device helper's may be blocks
        self.vec: set[str] = set(self.params) - self.constexpr if fn.name in ctx.triton_helpers else set()
        self._infer_vectors()
        self._cvals: dict[str, set[int] | None] = {}
        self._arange_names: set[str] | None = None
        self._blockish: set[str] | None = None
        self._config_cache: tuple[dict[str, set[int] | None], bool] | None = None
        self._overrides: dict[str, set[int] | None] | None = None
        self._assigns: dict[str, list[ast.AST]] | None = None
        self._values_map: dict[str, list[ast.AST]] | None = None
        self._plain_values: dict[str, list[ast.AST]] = {}
        self.synth: dict[str, ast.AST] = {}  # ``pid % K`` written inside an address: an index of its own
        self._ptr_params: set[str] | None = None
        self.derived: dict[str, set[str]] = {}
        """Per-kernel caches of rule modules' derived name sets (e.g. slow-varying lane indices)."""

    # -- dataflow ----------------------------------------------------------------

    def tl(self, node: ast.AST, *names: str) -> bool:
        q = self.idx.imports.call_qual(node)
        return q is not None and q.startswith(TL) and q[len(TL):].split(".")[-1] in names and (
            q[len(TL):] in names or q[len(TL):].startswith(("math.", "extra.", "core."))
        )

    def is_vec(self, e: ast.AST | None) -> bool:
        if e is None:
            return False
        if isinstance(e, ast.Name):
            return e.id in self.vec
        if isinstance(e, ast.Call):
            if self.tl(e, *TL_VECTOR_SOURCES):
                return True
            if self.tl(e, *TL_REDUCTIONS):
                return False
            if isinstance(e.func, ast.Attribute):
                if e.func.attr in TL_REDUCTIONS and not self.idx.imports.is_module_rooted(e.func):
                    return False
                if e.func.attr == "load" and not self.idx.imports.is_module_rooted(e.func):
                    return True  # tensor-descriptor load: a block
            if self.tl(e, "load"):
                return self.is_vec(call_arg(e, 0, "pointer"))
            parts = list(e.args) + [k.value for k in e.keywords]
            if isinstance(e.func, ast.Attribute) and not self.idx.imports.is_module_rooted(e.func):
                parts.append(e.func.value)
            return any(self.is_vec(p) for p in parts)
        if isinstance(e, (ast.Subscript, ast.Attribute, ast.Starred)):
            return self.is_vec(e.value)
        return any(self.is_vec(c) for c in ast.iter_child_nodes(e) if isinstance(c, ast.expr))

    def _infer_vectors(self) -> None:
        pairs: list[tuple[ast.AST, ast.AST]] = []
        for n in self.nodes:
            if isinstance(n, ast.Assign):
                pairs.extend((t, n.value) for t in n.targets)
            elif isinstance(n, (ast.AugAssign, ast.AnnAssign)) and n.value is not None:
                pairs.append((n.target, n.value))
        changed = True
        while changed:
            changed = False
            for t, v in pairs:
                if self.is_vec(v):
                    for name in target_names(t) - self.vec:
                        self.vec.add(name)
                        changed = True

    @property
    def blockish(self) -> set[str]:
        """Names whose value involves block work (a vector, or a tl.sum/tl.max of one)."""
        if self._blockish is None:
            names = set(self.vec)
            pairs = [
                (t, n.value) for n in self.nodes
                if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and n.value is not None
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            ]
            changed = True
            while changed:
                changed = False
                for t, v in pairs:
                    if self.has_block_work(v, names):
                        for name in target_names(t) - names:
                            names.add(name)
                            changed = True
            self._blockish = names
        return self._blockish

    def has_block_work(self, e: ast.AST, names: set[str] | None = None) -> bool:
        names = self.blockish if names is None else names
        for m in ast.walk(e):
            if isinstance(m, ast.Name) and m.id in names:
                return True
            if isinstance(m, ast.Call) and (self.tl(m, *TL_VECTOR_SOURCES, "dot") or self.is_vec(m)):
                return True
            if isinstance(m, ast.Call) and self.tl(m, *TL_REDUCTIONS) and any(self.is_vec(a) for a in m.args):
                return True
        return False

    def has_vector_source(self) -> bool:
        return bool(self.vec) or any(isinstance(n, ast.Call) and self.tl(n, *TL_VECTOR_SOURCES) for n in self.nodes)

    def calls(self, *names: str) -> list[ast.Call]:
        return [n for n in self.nodes if isinstance(n, ast.Call) and self.tl(n, *names)]

    def is_scalar_load(self, e: ast.AST) -> bool:
        return isinstance(e, ast.Call) and self.tl(e, "load") and not self.is_vec(call_arg(e, 0, "pointer"))

    # -- constexpr values --------------------------------------------------------

    def launches(self) -> list[ast.Call]:
        """Every ``kernel[grid](...)`` call of this kernel in the module."""
        return self.ctx.subscript_calls.get(self.name, [])

    def _configs(self) -> tuple[dict[str, set[int] | None], bool]:
        """Constexpr values from ``@triton.autotune`` configs / ``@triton.heuristics``.

        Returns ``(values, opaque)``; ``opaque`` is True when a decorator
        supplies constexprs we cannot read (computed config lists).
        """
        values: dict[str, set[int] | None] = {}
        opaque = False
        for d in self.fn.decorator_list:
            if not isinstance(d, ast.Call):
                continue
            q = self.idx.imports.qual(d.func) or ""
            if q.endswith("heuristics"):
                arg = d.args[0] if d.args else None
                if isinstance(arg, ast.Dict):
                    for k in arg.keys:
                        if str_const(k):
                            values[str_const(k)] = None
                else:
                    opaque = True
            elif q.endswith("autotune"):
                cfgs = call_arg(d, 0, "configs")
                if isinstance(cfgs, ast.Name) and len(self.idx.module_assigns.get(cfgs.id, [])) == 1:
                    cfgs = self.idx.module_assigns[cfgs.id][0]
                if not isinstance(cfgs, (ast.List, ast.Tuple)):
                    opaque = True
                    continue
                for c in cfgs.elts:
                    kw = call_arg(c, 0, "kwargs") if isinstance(c, ast.Call) else None
                    if not isinstance(kw, ast.Dict):
                        opaque = True
                        continue
                    for k, v in zip(kw.keys, kw.values):
                        name = str_const(k)
                        if name is None:
                            continue
                        r = self.idx.resolve_ints(v, [])
                        if r is None or values.get(name, set()) is None:
                            values[name] = None
                        else:
                            values[name] = values.get(name, set()) | r
        return values, opaque

    def constexpr_values(self, name: str) -> set[int] | None:
        """Every value constexpr ``name`` is given (default, launches, configs); ``None`` if any is unknown."""
        if name in self._cvals:
            return self._cvals[name]
        self._cvals[name] = None  # recursion guard
        out: set[int] = set()
        unknown = False
        if self._config_cache is None:
            self._config_cache = self._configs()
        configs, opaque = self._config_cache
        default = param_defaults(self.fn).get(name)
        supplied_by_decorator = name in configs
        if supplied_by_decorator:
            if configs[name] is None:
                unknown = True
            else:
                out |= configs[name]
        pos = self.params.index(name) if name in self.params else None
        launches = self.launches()
        for call in launches:
            arg = None
            for kw in call.keywords:
                if kw.arg == name:
                    arg = kw.value
            starred = any(isinstance(a, ast.Starred) for a in call.args)
            if arg is None and pos is not None and pos < len(call.args) and not starred:
                arg = call.args[pos]
            if arg is None:
                if any(k.arg is None for k in call.keywords):
                    unknown = True
                elif not supplied_by_decorator:
                    if default is None:
                        unknown = True  # supplied by an unreadable decorator, or missing
                    else:
                        r = self.idx.resolve_ints(default, [])
                        unknown |= r is None
                        out |= r or set()
                continue
            r = self.idx.resolve_ints(arg, self.idx.enclosing_functions(call))
            if r is None:
                unknown = True
            else:
                out |= r
        if not launches and not supplied_by_decorator and default is not None:
            r = self.idx.resolve_ints(default, [])
            unknown |= r is None
            out |= r or set()
        value = None if unknown or not out else out
        self._cvals[name] = value
        return value

    def resolve(self, e: ast.AST) -> set[int] | None:
        if self._overrides is None:
            self._overrides = {p: (self.constexpr_values(p) if p in self.constexpr else None) for p in self.params}
        return self.idx.resolve_ints(e, [self.fn], overrides=self._overrides)

    # -- assignments and pointer bases -----------------------------------------

    def values(self, name: str) -> list[ast.AST]:
        """Every value assigned to ``name`` in the kernel, in source order (plain, augmented, annotated)."""
        if self._values_map is None:
            m: dict[str, list[ast.AST]] = {}
            plain: dict[str, list[ast.AST]] = {}
            stmts = sorted(
                (n for n in self.nodes if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))),
                key=lambda n: (n.lineno, n.col_offset),
            )
            for n in stmts:
                if n.value is None:
                    continue
                for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                    for name_ in target_names(t):
                        m.setdefault(name_, []).append(n.value)
                        if not isinstance(n, ast.AugAssign):  # ``p += step`` keeps p's base
                            plain.setdefault(name_, []).append(n.value)
            self._values_map = m
            self._plain_values = plain
        if name in self.synth:
            return [self.synth[name]]
        return self._values_map.get(name, [])

    def plain_values(self, name: str) -> list[ast.AST]:
        """Values of ``name``'s plain (not augmented) assignments: ``p += step`` keeps ``p``'s base."""
        self.values(name)
        return self._plain_values.get(name, [])

    def base(self, e: ast.AST | None, hops: int = 0) -> str | None:
        """The kernel parameter an address expression starts from (its leftmost additive term)."""
        if e is None or hops > 12:
            return None
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
            left = self.base(e.left, hops)
            if left is not None or isinstance(e.op, ast.Sub):
                return left
            return self.base(e.right, hops)
        if isinstance(e, ast.Subscript):
            return self.base(e.value, hops)
        if isinstance(e, ast.Call):
            if self.tl(e, "make_block_ptr", "make_tensor_descriptor"):
                return self.base(call_arg(e, 0, "base"), hops)
            if self.tl(e, "advance", "multiple_of", "max_contiguous", "max_constancy"):
                return self.base(call_arg(e, 0, "input"), hops)
            cast = self.cast_of(e)
            return self.base(cast[0], hops) if cast is not None else None
        if isinstance(e, ast.Name):
            if e.id in self.params:
                return e.id if e.id not in self.constexpr else None
            for v in self.plain_values(e.id):
                b = self.base(v, hops + 1)
                if b is not None:
                    return b
        return None

    @property
    def ptr_params(self) -> set[str]:
        """Parameters that loads and stores address from (``x_ptr`` in ``tl.load(x_ptr + offs)``)."""
        if self._ptr_params is None:
            out = {p for p in self.params if "ptr" in p.lower() and p not in self.constexpr}
            for c in self.calls("load", "store", "atomic_add", "atomic_max", "atomic_min", "atomic_xchg",
                                "atomic_cas", "make_block_ptr", "make_tensor_descriptor"):
                b = self.base(call_arg(c, 0, "base" if self.tl(c, "make_block_ptr", "make_tensor_descriptor")
                                        else "pointer"))
                if b is not None:
                    out.add(b)
            self._ptr_params = out
        return self._ptr_params

    def is_pointerish(self, name: str) -> bool:
        return self.base(ast.Name(id=name, ctx=ast.Load())) in self.ptr_params

    def cast_of(self, n: ast.AST) -> tuple[ast.AST, ast.AST | None] | None:
        """``(operand, dtype)`` for ``x.to(dtype)`` / ``tl.cast(x, dtype)``."""
        if not isinstance(n, ast.Call):
            return None
        if isinstance(n.func, ast.Attribute) and n.func.attr == "to" and not self.idx.imports.is_module_rooted(n.func):
            return n.func.value, call_arg(n, 0, "dtype")
        if self.tl(n, "cast"):
            return call_arg(n, 0, "input"), call_arg(n, 1, "dtype")
        return None

    # -- offsets ------------------------------------------------------------------

    @property
    def assigns(self) -> dict[str, list[ast.AST]]:
        """Name -> values of its plain ``name = value`` assignments in the kernel."""
        if self._assigns is None:
            self._assigns = {}
            for n in self.nodes:
                if isinstance(n, ast.Assign):
                    for t in n.targets:
                        if isinstance(t, ast.Name):
                            self._assigns.setdefault(t.id, []).append(n.value)
        return self._assigns

    @property
    def arange_names(self) -> set[str]:
        """Names whose value is built from ``tl.arange`` (offsets, index vectors), not from loads."""
        if self._arange_names is None:
            names: set[str] = set()
            pairs = [
                (t, n.value) for n in self.nodes if isinstance(n, ast.Assign) for t in n.targets
            ] + [(n.target, n.value) for n in self.nodes if isinstance(n, ast.AugAssign)]
            changed = True
            while changed:
                changed = False
                for t, v in pairs:
                    if any(isinstance(m, ast.Call) and self.tl(m, "load") for m in ast.walk(v)):
                        continue
                    if any(
                        (isinstance(m, ast.Call) and self.tl(m, "arange")) or (isinstance(m, ast.Name) and m.id in names)
                        for m in ast.walk(v)
                    ):
                        for name in target_names(t) - names:
                            names.add(name)
                            changed = True
            self._arange_names = names
        return self._arange_names

