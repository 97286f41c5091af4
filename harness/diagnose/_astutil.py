"""AST plumbing shared by the linter and the anticheat scanner.

Nothing here imports or runs candidate code: everything works on the
``ast`` of its source. The central piece is :class:`ModuleIndex`, which
resolves import aliases (``tl.arange`` -> ``triton.language.arange``), so
the rules match what a name *is*, not how a candidate happened to spell it,
and which finds the host code that runs per call (``ModelNew.forward`` and
the helpers it reaches).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

FuncDef = ast.FunctionDef | ast.AsyncFunctionDef
_SCOPE_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


class Imports:
    """Local alias -> canonical dotted path, from every import in the module.

    Imports inside functions count too (candidates often import lazily).
    Relative imports are ignored: a candidate is a single file.
    """

    def __init__(self, tree: ast.AST) -> None:
        self.alias: dict[str, str] = {}
        self.modules: list[tuple[str, int]] = []
        """Every imported module or ``module.name``, canonical, with its line."""
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.modules.append((a.name, node.lineno))
                    if a.asname:
                        self.alias[a.asname] = a.name
                    else:
                        root = a.name.split(".")[0]
                        self.alias.setdefault(root, root)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                self.modules.append((node.module, node.lineno))
                for a in node.names:
                    if a.name == "*":
                        continue
                    full = f"{node.module}.{a.name}"
                    self.modules.append((full, node.lineno))
                    self.alias[a.asname or a.name] = full

    def qual(self, node: ast.AST | None) -> str | None:
        """Dotted name of a ``Name``/``Attribute`` chain, aliases resolved.

        Unknown roots are kept as spelled (``range`` -> ``"range"``,
        ``self.k`` -> ``"self.k"``); anything that is not a plain chain
        (a call, a subscript) gives ``None``. ``getattr(m, "x")`` with a
        literal name reads as ``m.x``.
        """
        parts: list[str] = []
        while True:
            if isinstance(node, ast.Attribute):
                parts.append(node.attr)
                node = node.value
            elif isinstance(node, ast.Name):
                parts.append(self.alias.get(node.id, node.id))
                break
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "getattr"
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
            ):
                parts.append(node.args[1].value)
                node = node.args[0]
            else:
                return None
        return ".".join(reversed(parts))

    def is_module_rooted(self, node: ast.AST) -> bool:
        """True when the chain's root name is an imported alias."""
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name) and node.id in self.alias

    def call_qual(self, node: ast.AST) -> str | None:
        return self.qual(node.func) if isinstance(node, ast.Call) else None

    def imports_prefix(self, prefix: str) -> bool:
        return any(m == prefix or m.startswith(prefix + ".") for m, _ in self.modules)


def parent_map(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    return parents


def walk_scope(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk`` that does not enter nested functions, lambdas or classes."""
    stack = list(ast.iter_child_nodes(node))
    while stack:
        n = stack.pop()
        yield n
        if not isinstance(n, _SCOPE_NODES):
            stack.extend(ast.iter_child_nodes(n))


def names_in(node: ast.AST | None) -> set[str]:
    if node is None:
        return set()
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def target_names(target: ast.AST) -> set[str]:
    """Names bound (or, for ``x[i] = ...``, mutated) by an assignment target."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        out: set[str] = set()
        for elt in target.elts:
            out |= target_names(elt)
        return out
    if isinstance(target, ast.Starred):
        return target_names(target.value)
    if isinstance(target, (ast.Subscript, ast.Attribute)):
        base = target.value
        while isinstance(base, (ast.Subscript, ast.Attribute)):
            base = base.value
        return {base.id} if isinstance(base, ast.Name) else set()
    return set()


def assigned_in(stmts: list[ast.stmt] | ast.AST) -> set[str]:
    """Names bound or mutated anywhere in ``stmts`` (loop targets included)."""
    roots = stmts if isinstance(stmts, list) else [stmts]
    out: set[str] = set()
    for root in roots:
        for n in [root, *walk_scope(root)]:
            if isinstance(n, ast.Assign):
                for t in n.targets:
                    out |= target_names(t)
            elif isinstance(n, (ast.AugAssign, ast.AnnAssign)) and n.target is not None:
                out |= target_names(n.target)
            elif isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)):
                out |= target_names(n.target)
            elif isinstance(n, ast.NamedExpr):
                out |= target_names(n.target)
            elif isinstance(n, ast.withitem) and n.optional_vars is not None:
                out |= target_names(n.optional_vars)
    return out


def int_const(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = int_const(node.operand)
        return -v if v is not None else None
    return None


def str_const(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def call_arg(call: ast.Call, index: int, name: str) -> ast.AST | None:
    """The argument at ``index`` or passed as ``name=``; ``None`` if absent."""
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    if index < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[: index + 1]):
        return call.args[index]
    return None


def func_params(fn: FuncDef) -> list[ast.arg]:
    a = fn.args
    return [*a.posonlyargs, *a.args, *a.kwonlyargs]


def param_defaults(fn: FuncDef) -> dict[str, ast.AST]:
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    out: dict[str, ast.AST] = {}
    for arg, default in zip(positional[len(positional) - len(a.defaults):], a.defaults):
        out[arg.arg] = default
    for arg, default in zip(a.kwonlyargs, a.kw_defaults):
        if default is not None:
            out[arg.arg] = default
    return out


def decorator_quals(imports: Imports, fn: FuncDef | ast.ClassDef) -> list[str]:
    out = []
    for d in fn.decorator_list:
        q = imports.qual(d.func if isinstance(d, ast.Call) else d)
        if q:
            out.append(q)
    return out


def snippet(node: ast.AST, limit: int = 60) -> str:
    """Short source text of ``node`` for a one-line message."""
    try:
        text = ast.unparse(node)
    except Exception:  # pragma: no cover - unparse handles every parsed node
        return "<expr>"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ModuleIndex:
    """A parsed candidate: imports, top-level defs, and its per-call host code."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.imports = Imports(tree)
        self.parents = parent_map(tree)
        self.functions: dict[str, FuncDef] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        self.module_assigns: dict[str, list[ast.AST]] = {}
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[node.name] = node
            elif isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        self.module_assigns.setdefault(t.id, []).append(node.value)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                self.module_assigns.setdefault(node.target.id, []).append(node.value)
        self.model_class = self._find_model_class()
        self._calls_by_name: dict[str, list[ast.Call]] | None = None
        self._fn_assigns: dict[int, dict[str, list[ast.AST]]] = {}

    # -- structure -----------------------------------------------------------

    def _find_model_class(self) -> ast.ClassDef | None:
        if "ModelNew" in self.classes:
            return self.classes["ModelNew"]
        for cls in self.classes.values():
            if cls.name != "Model" and self.method(cls, "forward") is not None:
                bases = {self.imports.qual(b) or "" for b in cls.bases}
                if any(b.endswith("Module") for b in bases):
                    return cls
        return None

    @staticmethod
    def method(cls: ast.ClassDef, name: str) -> FuncDef | None:
        for node in cls.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                return node
        return None

    def enclosing(self, node: ast.AST, kinds: tuple[type, ...]) -> ast.AST | None:
        p = self.parents.get(node)
        while p is not None and not isinstance(p, kinds):
            p = self.parents.get(p)
        return p

    def enclosing_functions(self, node: ast.AST) -> list[FuncDef]:
        """Enclosing function defs, innermost first."""
        out = []
        p = self.parents.get(node)
        while p is not None:
            if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append(p)
            p = self.parents.get(p)
        return out

    def enclosing_class(self, node: ast.AST) -> ast.ClassDef | None:
        c = self.enclosing(node, (ast.ClassDef,))
        return c if isinstance(c, ast.ClassDef) else None

    def host_functions(self, skip: set[str] | None = None) -> list[tuple[FuncDef, ast.ClassDef | None]]:
        """``ModelNew.forward`` and every helper it reaches, in discovery order.

        Reached: module-level functions called by name, ``self.method(...)``
        of the same class, and ``Fn.apply(...)`` of an ``autograd.Function``
        defined in the module. ``skip`` names functions never to enter
        (kernels, kernel factories).
        """
        skip = skip or set()
        cls = self.model_class
        if cls is None:
            return []
        fwd = self.method(cls, "forward")
        if fwd is None:
            return []
        out: list[tuple[FuncDef, ast.ClassDef | None]] = []
        seen: set[int] = set()
        stack: list[tuple[FuncDef, ast.ClassDef | None, int]] = [(fwd, cls, 0)]
        while stack:
            fn, owner, depth = stack.pop(0)
            if id(fn) in seen:
                continue
            seen.add(id(fn))
            out.append((fn, owner))
            if depth >= 6:
                continue
            for node in walk_scope(fn):
                if not isinstance(node, ast.Call):
                    continue
                f = node.func
                if isinstance(f, ast.Name) and f.id in self.functions and f.id not in skip:
                    stack.append((self.functions[f.id], None, depth + 1))
                elif isinstance(f, ast.Attribute):
                    if isinstance(f.value, ast.Name) and f.value.id == "self" and owner is not None:
                        m = self.method(owner, f.attr)
                        if m is not None:
                            stack.append((m, owner, depth + 1))
                    elif (
                        f.attr == "apply"
                        and isinstance(f.value, ast.Name)
                        and f.value.id in self.classes
                    ):
                        c = self.classes[f.value.id]
                        m = self.method(c, "forward")
                        if m is not None:
                            stack.append((m, c, depth + 1))
        return out

    # -- constant resolution ---------------------------------------------------

    def resolve_ints(
        self,
        expr: ast.AST | None,
        scope: list[FuncDef] | None = None,
        depth: int = 0,
        overrides: dict[str, set[int] | None] | None = None,
    ) -> set[int] | None:
        """Possible integer values of ``expr``; ``None`` when any is unknown.

        ``scope`` lists the enclosing functions, innermost first; a name is
        looked up in their assignments, then their parameters (default and
        every call site's argument), then module-level assignments.
        """
        if expr is None or depth > 8:
            return None
        scope = scope or []
        c = int_const(expr)
        if c is not None:
            return {c}
        if isinstance(expr, ast.Constant) and isinstance(expr.value, float) and expr.value.is_integer():
            return {int(expr.value)}
        if isinstance(expr, ast.BinOp):
            left = self.resolve_ints(expr.left, scope, depth + 1, overrides)
            right = self.resolve_ints(expr.right, scope, depth + 1, overrides)
            if left is None or right is None or len(left) * len(right) > 64:
                return None
            out: set[int] = set()
            for a in left:
                for b in right:
                    try:
                        if isinstance(expr.op, ast.Add):
                            out.add(a + b)
                        elif isinstance(expr.op, ast.Sub):
                            out.add(a - b)
                        elif isinstance(expr.op, ast.Mult):
                            out.add(a * b)
                        elif isinstance(expr.op, ast.FloorDiv):
                            out.add(a // b)
                        elif isinstance(expr.op, ast.LShift):
                            out.add(a << b)
                        elif isinstance(expr.op, ast.Pow):
                            out.add(a**b)
                        else:
                            return None
                    except (ZeroDivisionError, ValueError, OverflowError):
                        return None
            return out
        if isinstance(expr, ast.IfExp):
            a = self.resolve_ints(expr.body, scope, depth + 1, overrides)
            b = self.resolve_ints(expr.orelse, scope, depth + 1, overrides)
            return None if a is None or b is None else a | b
        if isinstance(expr, ast.Name):
            if overrides is not None and expr.id in overrides:
                return overrides[expr.id]
            return self._resolve_name(expr.id, scope, depth, overrides)
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in ("min", "max") and expr.args:
            parts = [self.resolve_ints(a, scope, depth + 1, overrides) for a in expr.args]
            if any(p is None for p in parts) or len(parts) > 4:
                return None
            pick = min if expr.func.id == "min" else max
            out = set()
            for combo in _product(parts):
                out.add(pick(combo))
            return out
        return None

    def _resolve_name(
        self, name: str, scope: list[FuncDef], depth: int, overrides: dict[str, set[int] | None] | None
    ) -> set[int] | None:
        for i, fn in enumerate(scope):
            values = self.fn_assigns(fn).get(name)
            if values:
                out: set[int] = set()
                for v in values:
                    r = self.resolve_ints(v, scope[i:], depth + 1, overrides)
                    if r is None:
                        return None
                    out |= r
                return out
            params = [p.arg for p in func_params(fn)]
            if name in params:
                return self.param_values(fn, name, depth + 1)
        if name in self.module_assigns:
            out = set()
            for v in self.module_assigns[name]:
                r = self.resolve_ints(v, [], depth + 1)
                if r is None:
                    return None
                out |= r
            return out
        return None

    def fn_assigns(self, fn: FuncDef) -> dict[str, list[ast.AST]]:
        """Name -> values of ``name = value`` statements in ``fn`` (not nested defs); cached."""
        got = self._fn_assigns.get(id(fn))
        if got is None:
            got = {}
            for n in walk_scope(fn):
                if isinstance(n, ast.Assign):
                    for t in n.targets:
                        if isinstance(t, ast.Name):
                            got.setdefault(t.id, []).append(n.value)
            self._fn_assigns[id(fn)] = got
        return got

    def call_sites(self, fn_name: str) -> list[ast.Call]:
        """Calls ``fn_name(...)`` and ``self.fn_name(...)`` anywhere in the module."""
        if self._calls_by_name is None:
            self._calls_by_name = {}
            for node in ast.walk(self.tree):
                if isinstance(node, ast.Call):
                    f = node.func
                    if isinstance(f, ast.Name):
                        self._calls_by_name.setdefault(f.id, []).append(node)
                    elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
                        self._calls_by_name.setdefault(f.attr, []).append(node)
        return self._calls_by_name.get(fn_name, [])

    def param_values(self, fn: FuncDef, name: str, depth: int = 0) -> set[int] | None:
        """Values parameter ``name`` of ``fn`` takes: its default plus each call site's argument."""
        params = [p.arg for p in [*fn.args.posonlyargs, *fn.args.args]]
        defaults = param_defaults(fn)
        out: set[int] = set()
        sites = self.call_sites(fn.name)
        if params and params[0] == "self":
            params = params[1:]
        for call in sites:
            if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
                return None
            arg = None
            for kw in call.keywords:
                if kw.arg == name:
                    arg = kw.value
            if arg is None and name in params and params.index(name) < len(call.args):
                arg = call.args[params.index(name)]
            if arg is None:
                if name not in defaults:
                    return None
                continue  # the default applies; counted below
            r = self.resolve_ints(arg, self.enclosing_functions(call), depth + 1)
            if r is None:
                return None
            out |= r
        if name in defaults and (not sites or any(_omits(c, name, params) for c in sites)):
            r = self.resolve_ints(defaults[name], self.enclosing_functions(fn), depth + 1)
            if r is None:
                return None
            out |= r
        return out or None


def _omits(call: ast.Call, name: str, params: list[str]) -> bool:
    if any(k.arg == name for k in call.keywords):
        return False
    return not (name in params and params.index(name) < len(call.args))


def _product(parts: list[set[int]]) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = [()]
    for p in parts:
        out = [o + (v,) for o in out for v in sorted(p)][:256]
    return out
