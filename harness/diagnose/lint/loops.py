"""Loop and accumulation helpers shared by the Triton, TileLang and host checks.

Pure functions of the ``ast`` of a candidate: which loops enclose a node,
which statements a loop runs directly, whether a statement folds a value
into a loop-carried accumulator, how many times a ``range`` loop can run.
They decide nothing on their own; the rule modules combine them.
"""

from __future__ import annotations

import ast

from harness.diagnose._astutil import ModuleIndex, snippet, str_const, walk_scope


def loops_in(node: ast.AST) -> list[ast.For | ast.While]:
    return [n for n in walk_scope(node) if isinstance(n, (ast.For, ast.While))]


def innermost_loop(idx: ModuleIndex, node: ast.AST, stop: ast.AST) -> ast.For | ast.While | None:
    p = idx.parents.get(node)
    while p is not None and p is not stop:
        if isinstance(p, (ast.For, ast.While)):
            return p
        p = idx.parents.get(p)
    return None


def stmts_directly_in(loop: ast.For | ast.While) -> list[ast.stmt]:
    """Statements whose innermost enclosing loop is ``loop`` (through ifs/withs)."""
    out: list[ast.stmt] = []
    stack: list[ast.stmt] = list(loop.body)
    while stack:
        s = stack.pop(0)
        if isinstance(s, (ast.For, ast.While, ast.AsyncFor, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        out.append(s)
        for attr in ("body", "orelse", "finalbody"):
            stack.extend(getattr(s, attr, []) or [])
        for h in getattr(s, "handlers", []) or []:
            stack.extend(h.body)
    return out


def accumulation(stmt: ast.stmt) -> tuple[ast.AST, ast.AST] | None:
    """``(target, contribution)`` when ``stmt`` folds a value into a loop-carried target.

    Recognised: ``t += e`` / ``t -= e``, ``t = t + e`` / ``t = e + t`` and
    ``t = max(t, e)`` / ``tl.maximum`` / ``T.max`` and the min forms. A
    rescale (``t *= s``) is not a reduction step and is not matched.
    """
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, (ast.Add, ast.Sub)):
        return stmt.target, stmt.value
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        t = stmt.targets[0]
        if not isinstance(t, (ast.Name, ast.Subscript)):
            return None
        key = ast.dump(t, annotate_fields=False).replace("Store()", "Load()")
        v = stmt.value

        def is_t(e: ast.AST) -> bool:
            return ast.dump(e, annotate_fields=False) == key

        if isinstance(v, ast.BinOp) and isinstance(v.op, (ast.Add, ast.Sub)) and (is_t(v.left) or is_t(v.right)):
            return t, (v.right if is_t(v.left) else v.left)
        if isinstance(v, ast.Call):
            fname = v.func.attr if isinstance(v.func, ast.Attribute) else getattr(v.func, "id", "")
            if fname in ("max", "min", "maximum", "minimum", "fmax", "fmin") and len(v.args) == 2:
                if is_t(v.args[0]):
                    return t, v.args[1]
                if is_t(v.args[1]):
                    return t, v.args[0]
    return None


def rebound_before(loop: ast.AST, stmt: ast.stmt, names: set[str]) -> set[str]:
    """Those of ``names`` that a plain assignment earlier in ``loop``'s body rebinds.

    ``loss = lse - x; loss = w * loss`` rescales a fresh per-iteration value:
    it is not a loop-carried accumulator, so it is no reduction.
    """
    out: set[str] = set()
    for m in walk_scope(loop):
        if isinstance(m, ast.Assign) and m is not stmt and m.lineno < stmt.lineno:
            for t in m.targets:
                if isinstance(t, ast.Name) and t.id in names:
                    out.add(t.id)
    return out


def range_trip(loop: ast.AST, resolve) -> int | None:
    """Largest possible trip count of ``for _ in range(...)``-like loops; ``None`` if unknown.

    ``resolve(expr)`` gives the possible integer values of an argument (``None``
    if unknown): the kernel's constexpr / launch-argument resolution.
    """
    if not isinstance(loop, ast.For) or not isinstance(loop.iter, ast.Call):
        return None
    args = [a for a in loop.iter.args if not isinstance(a, ast.Starred)]
    if not args or len(args) > 3:
        return None
    vals = [resolve(a) for a in args]
    if any(v is None for v in vals):
        return None
    if len(vals) == 1:
        return max(vals[0])
    start, stop = min(vals[0]), max(vals[1])
    step = min(vals[2]) if len(vals) == 3 else 1
    if step <= 0:
        return None
    return max(0, -(-(stop - start) // step))


def dtype_text(node: ast.AST | None) -> str | None:
    """Spelling of a dtype argument: ``tl.float16`` -> ``float16``, ``"float32"`` -> ``float32``."""
    if node is None:
        return None
    s = str_const(node)
    if s is not None:
        return s
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return snippet(node, 40)



def prod(values) -> int:
    """Product of integers (1 for none)."""
    out = 1
    for v in values:
        out *= v
    return out
