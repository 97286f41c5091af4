"""Index analysis for matrix-product detection, shared by the Triton and TileLang rules.

``matmul-without-tensor-cores`` asks of a multiply-add ``acc += a * b``
whether each operand is indexed by something the other is not (``a``
reused along ``b``'s output index and vice versa): the shape of a matrix
product, as opposed to an elementwise, depthwise or reduction product.
These functions answer that from the names an address is built from,
whatever DSL spelled the address.
"""

from __future__ import annotations

import ast

_PROJECTIONS = (ast.FloorDiv, ast.Mod, ast.Div, ast.RShift, ast.BitAnd)


def shift_sources(e: ast.AST, values) -> set[str]:
    """Names ``e`` is built from by shifts and scalings (``ih = oh + r - 1``), not through ``//``/``%``.

    ``n = nk // K`` and ``k = nk % K`` each keep only part of ``nk``: an
    operand indexed by ``n`` does not follow ``k``. Followed through the
    names' assignments (``values(name)``).
    """
    out: set[str] = set()
    stack = [e]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.BinOp) and isinstance(node.op, _PROJECTIONS):
            continue
        if isinstance(node, ast.Compare):
            continue
        if isinstance(node, ast.Name):
            if node.id not in out:
                out.add(node.id)
                stack.extend(values(node.id))
            continue
        stack.extend(ast.iter_child_nodes(node))
    return out


def _pure_lane(info: tuple[set[str], set[str]], reduction: set[str], other_lanes: set[str]) -> bool:
    aranges, roots = info
    return bool(aranges) and aranges <= other_lanes and roots <= reduction


def free_indices(
    mine: set[str], other: set[str], *, parents, direct, values, reduction: set[str], lanes=None
) -> set[str]:
    """Indices of one operand of a product that the other operand does not follow.

    ``mine`` / ``other``: the index names each operand's address is built
    from (a ``//``/``%`` sub-expression of an address counts as one index,
    spelled as written). An index of ``mine`` is *followed* by the other
    operand when the other uses it or is computed from it (``c_in = oc //
    cpg`` follows ``oc``; a gather ``emb[idx[b, i]]`` follows ``b``), when
    it is a variable of a loop the product is summed over, or, recursively,
    when it is computed only from followed indices or is a shift of one
    (``ih = oh + r``; ``c = plane % C`` follows ``plane``). The recursion
    does not use "computed from": ``n = nk // K`` does not follow
    ``k = nk % K``. Sources (program ids, ``tl.arange``, kernel-grid
    bindings, loaded values, loop variables) are otherwise free, except a
    lane index built only from ``tl.arange`` s and summed-loop variables
    whose aranges the other operand also uses (a prefetched ``k`` tile):
    ``lanes(name)`` gives ``(arange spellings, other sources)`` for that
    test. An operand with a free index is reused along it by the other: both
    operands having one makes a matrix product.
    """
    other_lanes: set[str] = set()
    if lanes is not None:
        for b in other:
            other_lanes |= lanes(b)[0]
    seen = set(other) | reduction
    derived_from: set[str] = set()  # names some index of ``other`` is computed from
    for b in other:
        stack = list(values(b))
        while stack:
            for n in ast.walk(stack.pop()):
                if isinstance(n, ast.Name) and n.id not in derived_from:
                    derived_from.add(n.id)
                    stack.extend(values(n.id))
        for v in values(b):
            seen |= shift_sources(v, values)
    memo: dict[str, bool] = {}

    def followed(a: str, stack: frozenset) -> bool:
        if a in memo:
            return memo[a]
        if a in seen:
            r = True
        elif lanes is not None and _pure_lane(lanes(a), reduction, other_lanes):
            r = True
        elif a in stack or direct(a):
            r = False
        else:  # a value with no index parents is uniform across programs
            r = all(followed(p, stack | {a}) for p in parents(a))
        memo[a] = r
        return r

    return {a for a in mine if not (a in derived_from or followed(a, frozenset()))}


def index_atoms(e: ast.AST, classify, project) -> set[str]:
    """Index names in an address expression, a ``//``/``%`` sub-expression counting as one.

    ``classify(name)`` returns ``(kind, values)``: ``"index"`` keeps the
    name, ``"expand"`` looks through ``values`` (a pointer variable such as
    ``x_img = x_ptr + n * CHW``), ``"skip"`` drops it (sizes, strides,
    globals). ``project(node)`` registers a projection sub-expression and
    returns the name it is known by.
    """
    out: set[str] = set()
    seen: set[str] = set()
    stack: list[ast.AST] = [e]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.FloorDiv, ast.Mod)) and any(
            isinstance(m, ast.Name) and classify(m.id)[0] != "skip" for m in ast.walk(node)
        ):
            out.add(project(node))
            continue
        if isinstance(node, ast.Name):
            if node.id in seen:
                continue
            seen.add(node.id)
            kind, vals = classify(node.id)
            if kind == "index":
                out.add(node.id)
            elif kind == "expand":
                stack.extend(vals)
            continue
        stack.extend(c for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr))
    return out
