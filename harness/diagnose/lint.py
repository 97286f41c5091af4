"""Authoring-defect diagnosis: static rules for slow Triton / TileLang kernels.

A candidate can be correct and still leave most of the GPU idle because of
how it was written: one thread walking a whole row, a 3-kernel layernorm, a
host sync in ``forward``. These patterns are visible in the source, so this
module finds them with the ``ast`` of the candidate (never importing it) and
names the fix. The findings let screening tell an *authoring defect*
(``Verdict.AUTHORING_DEFECT``: fixable in the kernel) from a structural
residual.

Rules (ids are stable; ``lint_source`` returns findings sorted by line):

``sequential-reduction``
    A reduction done one element per loop iteration: a Triton loop adding a
    scalar ``tl.load`` (no block work in the added term); a TileLang serial
    loop (``T.serial``/``range``) folding one kernel-argument element per
    iteration into an accumulator, either per thread (inside ``T.Parallel``,
    walking a row) or for the whole block, in a kernel with no
    ``T.reduce_*``/atomic/shuffle/``T.gemm``; a TileLang kernel with
    ``threads=1`` that loops.
``fp64-promotion``
    ``float64`` in a kernel (``tl.float64``, ``"float64"``) or in the code
    ``forward`` runs (``torch.float64``, ``.double()``); dtype checks and
    dtype tables do not count.
``cast-in-inner-loop``
    Conversions repeated every loop iteration. *defect*: an accumulator kept
    in low precision and re-widened (``acc = (acc.to(f32) + x).to(f16)``), a
    round-trip chain ``x.to(a).to(b).to(a)`` inside a loop. *warning*: a
    loop-invariant block re-loaded and converted each iteration, ``tl.dot``
    operands widened to fp32 in the K loop, a redundant ``.to(a).to(a)``.
    Converting each freshly loaded block once is normal and not reported.
``one-element-per-program``
    A Triton kernel with no ``tl.arange``/block pointer whose programs each
    load and store one element (grid-of-one finalize kernels excepted), a
    launch whose blocks resolve to one element (``BLOCK=1``), a TileLang
    block that computes a single element.
``unfused-multipass``
    Kernels on one execution path of ``forward`` (or a helper) handing data
    through memory. *defect*: >= 3 launches that re-read the same input and
    pass a value between them (3-kernel layernorm / softmax), or >= 3
    launches chaining >= 2 full-size intermediates. *warning*: the two-kernel
    forms (stats pass + apply pass; GEMM + separate epilogue). Launches in
    exclusive ``if``/``else`` branches are separate paths.
``tiny-tile``
    Triton blocks whose resolved ``tl.arange`` sizes multiply to < 32
    elements, or a ``tl.dot`` dimension < 16; TileLang ``threads`` < 32,
    a ``T.gemm`` tile dimension < 16, or ``T.Parallel`` over < 32 elements.
    Only sizes that resolve to constants (defaults, launch arguments,
    autotune configs, module constants) are judged.
``host-sync-in-forward``
    ``.item()``, ``.cpu()``, ``.tolist()``, ``.numpy()``, ``.to("cpu")``,
    ``torch.cuda.synchronize()``, ``*.synchronize()`` in the code ``forward``
    runs (reading back a CPU-built tensor does not count).
``matmul-without-tensor-cores``
    A matrix product computed with CUDA-core multiply-adds. *defect*: in a
    Triton kernel with no ``tl.dot``, an accumulator (``acc += a * b``,
    ``acc = tl.fma(a, b, acc)``, ``acc += tl.sum(a[:, :, None] * b[None, :,
    :], axis=1)``) carried across a loop with a runtime or >= 16 trip count
    (``tl.static_range`` of unknown length counts as constant), adding the
    product of two ``tl.load`` s of different pointer arguments where each
    operand has an index the other lacks: ``a`` reused along ``b``'s output
    index and vice versa (a scalar weight ``w[k, c]`` times an input block
    ``x[n, c, offs]``, a rank-1 update ``a[:, None] * b[None, :]``, a 3-D
    broadcast). TileLang: the same in a kernel with no ``T.gemm``, a
    serial/pipelined loop accumulating the product of two kernel-argument
    or shared-memory buffers (fp32 shared tiles excepted: ``T.gemm`` would be
    TF32). *warning*: the Triton matrix-vector form ``tl.sum(w * x[None, :],
    axis=1)`` whose vector has no index of its own (memory-bound). Not
    reported: depthwise products (the weight's indices all appear in, or
    determine, the input's), squares of one tensor, products not carried
    across a loop, register-tiled products of local fragments. Where it
    fires, ``sequential-reduction`` is not repeated for the same statement.
``non-coalesced-access`` (warning)
    A Triton load/store whose every ``tl.arange`` term is multiplied by a
    row stride (``t.stride(0)`` of a 2-D tensor at the launch, ``t.shape[-1]``,
    or a ``*row_stride*``/``n_cols`` name when no launch is visible), i.e. no
    lane-contiguous axis: one column read down the rows.

Severities: ``defect`` (known slow pattern), ``warning`` (often slow, judge),
``info`` (could not analyse). :func:`lint_cuda_source` applies the same rule
ids to TileLang kernels lowered to CUDA C.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from harness.diagnose._astutil import (
    FuncDef,
    ModuleIndex,
    assigned_in,
    call_arg,
    decorator_quals,
    func_params,
    int_const,
    names_in,
    param_defaults,
    snippet,
    str_const,
    target_names,
    walk_scope,
)
from harness.diagnose.findings import Finding, format_findings, sort_findings

__all__ = [
    "Finding",
    "HINTS",
    "RULES",
    "detect_dsl",
    "format_findings",
    "lint_cuda_source",
    "lint_path",
    "lint_source",
]

RULES = (
    "sequential-reduction",
    "fp64-promotion",
    "cast-in-inner-loop",
    "one-element-per-program",
    "unfused-multipass",
    "tiny-tile",
    "host-sync-in-forward",
    "non-coalesced-access",
    "matmul-without-tensor-cores",
)

HINTS = {
    "sequential-reduction": "reduce a whole block at once (Triton: tl.load a tl.arange block and tl.sum/tl.max it; "
    "TileLang: T.reduce_sum/T.reduce_max over a fragment) instead of one element per iteration",
    "fp64-promotion": "compute in float32 (accumulate in fp32, not fp64); GPUs run fp64 at a small fraction of fp32 speed",
    "cast-in-inner-loop": "convert once outside the loop and keep the accumulator in float32 for the whole loop",
    "one-element-per-program": "give each program/block a tile: offs = pid * BLOCK + tl.arange(0, BLOCK) with a mask "
    "(TileLang: T.Parallel over a block of >= 128 elements)",
    "unfused-multipass": "fuse the passes into one kernel that keeps the row/tile in registers (e.g. one-pass layernorm "
    "with tl.sum for mean and variance)",
    "tiny-tile": "use tiles of >= 128 elements (>= 64x64 for tl.dot/T.gemm) and >= 128 threads per block",
    "host-sync-in-forward": "keep values on the device; compute shapes from .shape and drop .item()/.cpu()/synchronize from forward",
    "matmul-without-tensor-cores": "use tl.dot on [BLOCK_M, BLOCK_K] x [BLOCK_K, BLOCK_N] tiles (TileLang: T.gemm) so the "
    "reduction runs on tensor cores; for convolution, an implicit GEMM",
    "non-coalesced-access": "make the tl.arange axis that walks memory contiguously the fastest one (or transpose the tile "
    "so consecutive lanes read consecutive addresses)",
}

_TL = "triton.language."
_TILELANG = "tilelang.language."


def _finding(rule: str, severity: str, line: int | None, message: str) -> Finding:
    return Finding(rule=rule, severity=severity, line=line, message=message, hint=HINTS[rule])


# --------------------------------------------------------------------------
# DSL detection
# --------------------------------------------------------------------------

def _is_triton_jit(idx: ModuleIndex, fn: FuncDef) -> bool:
    for q in decorator_quals(idx.imports, fn):
        if q.startswith("triton") and q.rsplit(".", 1)[-1] == "jit":
            return True
    return False


def detect_dsl(source: str) -> str:
    """``"triton"``, ``"tilelang"`` or ``"torch"`` for a candidate source.

    Triton when it imports triton and has a ``@triton.jit`` function; else
    TileLang when it imports tilelang; else torch. A source that does not
    parse is classified from its import lines.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        if re.search(r"^\s*(import|from)\s+triton\b", source, re.M) and re.search(r"@\s*(triton\.)?jit\b", source):
            return "triton"
        if re.search(r"^\s*(import|from)\s+tilelang\b", source, re.M):
            return "tilelang"
        return "torch"
    return _detect(ModuleIndex(tree))


def _detect(idx: ModuleIndex) -> str:
    tree = idx.tree
    if idx.imports.imports_prefix("triton"):
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _is_triton_jit(idx, node):
                return "triton"
    if idx.imports.imports_prefix("tilelang"):
        return "tilelang"
    return "torch"


# --------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------

def _loops_in(node: ast.AST) -> list[ast.For | ast.While]:
    return [n for n in walk_scope(node) if isinstance(n, (ast.For, ast.While))]


def _innermost_loop(idx: ModuleIndex, node: ast.AST, stop: ast.AST) -> ast.For | ast.While | None:
    p = idx.parents.get(node)
    while p is not None and p is not stop:
        if isinstance(p, (ast.For, ast.While)):
            return p
        p = idx.parents.get(p)
    return None


def _stmts_directly_in(loop: ast.For | ast.While) -> list[ast.stmt]:
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


def _accumulation(stmt: ast.stmt) -> tuple[ast.AST, ast.AST] | None:
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


def _rebound_before(loop: ast.AST, stmt: ast.stmt, names: set[str]) -> set[str]:
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


def _range_trip(idx: ModuleIndex, loop: ast.AST, resolve) -> int | None:
    """Largest possible trip count of ``for _ in range(...)``-like loops; ``None`` if unknown."""
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


def _dtype_text(node: ast.AST | None) -> str | None:
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


_PROJECTIONS = (ast.FloorDiv, ast.Mod, ast.Div, ast.RShift, ast.BitAnd)


def _shift_sources(e: ast.AST, values) -> set[str]:
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


def _free_indices(
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
            seen |= _shift_sources(v, values)
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


def _index_atoms(e: ast.AST, classify, project) -> set[str]:
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


# --------------------------------------------------------------------------
# Triton
# --------------------------------------------------------------------------

_TL_VECTOR_SOURCES = {
    "arange", "zeros", "full", "make_block_ptr", "advance", "make_tensor_descriptor", "rand", "randn", "randint",
    "randint4x",
}
_TL_REDUCTIONS = {"sum", "max", "min", "reduce", "argmax", "argmin", "xor_sum", "reduce_or"}


class _TritonKernel:
    """One ``@triton.jit`` function and what the rules need to know about it."""

    def __init__(self, lint: "_Linter", fn: FuncDef) -> None:
        self.lint = lint
        self.idx = lint.idx
        self.fn = fn
        self.name = fn.name
        self.nodes: list[ast.AST] = list(walk_scope(fn))
        self.params = [a.arg for a in func_params(fn)]
        q = self.idx.imports.qual
        self.constexpr = {
            a.arg for a in func_params(fn) if a.annotation is not None and (q(a.annotation) or "").endswith("constexpr")
        }
        # a kernel's arguments are scalars or pointers; a device helper's may be blocks
        self.vec: set[str] = set(self.params) - self.constexpr if fn.name in lint.triton_helpers else set()
        self._infer_vectors()
        self._cvals: dict[str, set[int] | None] = {}
        self._arange_names: set[str] | None = None
        self._blockish: set[str] | None = None
        self._config_cache: tuple[dict[str, set[int] | None], bool] | None = None
        self._overrides: dict[str, set[int] | None] | None = None
        self._assigns: dict[str, list[ast.AST]] | None = None
        self._values_map: dict[str, list[ast.AST]] | None = None
        self._plain_values: dict[str, list[ast.AST]] = {}
        self._synth: dict[str, ast.AST] = {}  # ``pid % K`` written inside an address: an index of its own
        self._ptr_params: set[str] | None = None

    # -- dataflow ----------------------------------------------------------------

    def tl(self, node: ast.AST, *names: str) -> bool:
        q = self.idx.imports.call_qual(node)
        return q is not None and q.startswith(_TL) and q[len(_TL):].split(".")[-1] in names and (
            q[len(_TL):] in names or q[len(_TL):].startswith(("math.", "extra.", "core."))
        )

    def is_vec(self, e: ast.AST | None) -> bool:
        if e is None:
            return False
        if isinstance(e, ast.Name):
            return e.id in self.vec
        if isinstance(e, ast.Call):
            if self.tl(e, *_TL_VECTOR_SOURCES):
                return True
            if self.tl(e, *_TL_REDUCTIONS):
                return False
            if isinstance(e.func, ast.Attribute):
                if e.func.attr in _TL_REDUCTIONS and not self.idx.imports.is_module_rooted(e.func):
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
            if isinstance(m, ast.Call) and (self.tl(m, *_TL_VECTOR_SOURCES, "dot") or self.is_vec(m)):
                return True
            if isinstance(m, ast.Call) and self.tl(m, *_TL_REDUCTIONS) and any(self.is_vec(a) for a in m.args):
                return True
        return False

    def has_vector_source(self) -> bool:
        return bool(self.vec) or any(isinstance(n, ast.Call) and self.tl(n, *_TL_VECTOR_SOURCES) for n in self.nodes)

    def calls(self, *names: str) -> list[ast.Call]:
        return [n for n in self.nodes if isinstance(n, ast.Call) and self.tl(n, *names)]

    def is_scalar_load(self, e: ast.AST) -> bool:
        return isinstance(e, ast.Call) and self.tl(e, "load") and not self.is_vec(call_arg(e, 0, "pointer"))

    # -- constexpr values --------------------------------------------------------

    def launches(self) -> list[ast.Call]:
        """Every ``kernel[grid](...)`` call of this kernel in the module."""
        return self.lint.subscript_calls.get(self.name, [])

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

    # -- rules ---------------------------------------------------------------------

    def check(self) -> list[Finding]:
        out: list[Finding] = []
        out += self._sequential_reduction()
        out += self._fp64()
        out += self._casts()
        out += self._block_size()
        out += self._coalescing()
        mm = self._matmul_on_cuda_cores()
        if mm:  # the tensor-core fix subsumes the reduction fix: one finding per statement
            lines = {f.line for f in mm}
            out = [f for f in out if not (f.rule == "sequential-reduction" and f.line in lines)]
        return out + mm

    def _sequential_reduction(self) -> list[Finding]:
        for loop in _loops_in(self.fn):
            trip = _range_trip(self.idx, loop, self.resolve)
            if trip is not None and trip < 16:
                continue
            varying = assigned_in(loop)
            # names holding (values computed from) a scalar load that changes per iteration
            scalar_vals: set[str] = set()

            def scalar_contrib(e: ast.AST) -> ast.AST | None:
                for n in ast.walk(e):
                    if self.is_scalar_load(n) and names_in(call_arg(n, 0, "pointer")) & (varying | scalar_vals):
                        return n
                    if isinstance(n, ast.Name) and n.id in scalar_vals:
                        return n
                return None

            assigns = [n for n in walk_scope(loop) if isinstance(n, ast.Assign)]
            for _ in range(3):
                for a in assigns:
                    if not self.has_block_work(a.value) and scalar_contrib(a.value) is not None:
                        scalar_vals |= {t for tgt in a.targets for t in target_names(tgt)}
            for stmt in _stmts_directly_in(loop):
                acc = _accumulation(stmt)
                if acc is None:
                    continue
                target, contrib = acc
                if self.has_block_work(contrib):
                    continue
                if isinstance(target, ast.Name) and _rebound_before(loop, stmt, {target.id}):
                    continue
                src = scalar_contrib(contrib)
                if src is None:
                    continue
                var = snippet(loop.target) if isinstance(loop, ast.For) else "while"
                return [_finding(
                    "sequential-reduction", "defect", stmt.lineno,
                    f"`{self.name}`: loop over `{var}` accumulates `{snippet(target)}` from a scalar "
                    f"tl.load, one element per iteration",
                )]
        return []

    # -- matrix products on CUDA cores ------------------------------------------------

    def _values(self, name: str) -> list[ast.AST]:
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
        if name in self._synth:
            return [self._synth[name]]
        return self._values_map.get(name, [])

    def _plain(self, name: str) -> list[ast.AST]:
        self._values(name)
        return self._plain_values.get(name, [])

    def _base(self, e: ast.AST | None, hops: int = 0) -> str | None:
        """The kernel parameter an address expression starts from (its leftmost additive term)."""
        if e is None or hops > 12:
            return None
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
            left = self._base(e.left, hops)
            if left is not None or isinstance(e.op, ast.Sub):
                return left
            return self._base(e.right, hops)
        if isinstance(e, ast.Subscript):
            return self._base(e.value, hops)
        if isinstance(e, ast.Call):
            if self.tl(e, "make_block_ptr", "make_tensor_descriptor"):
                return self._base(call_arg(e, 0, "base"), hops)
            if self.tl(e, "advance", "multiple_of", "max_contiguous", "max_constancy"):
                return self._base(call_arg(e, 0, "input"), hops)
            cast = self._is_cast(e)
            return self._base(cast[0], hops) if cast is not None else None
        if isinstance(e, ast.Name):
            if e.id in self.params:
                return e.id if e.id not in self.constexpr else None
            for v in self._plain(e.id):
                b = self._base(v, hops + 1)
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
                b = self._base(call_arg(c, 0, "base" if self.tl(c, "make_block_ptr", "make_tensor_descriptor")
                                        else "pointer"))
                if b is not None:
                    out.add(b)
            self._ptr_params = out
        return self._ptr_params

    def _pointerish(self, name: str) -> bool:
        return self._base(ast.Name(id=name, ctx=ast.Load())) in self.ptr_params

    def _ptr_atoms(self, ptr: ast.AST, loop_vars: set[str]) -> set[str]:
        """Index names an address is built from, following pointer variables (``x_img = x_ptr + n * CHW``)."""

        def classify(name: str) -> tuple[str, list[ast.AST]]:
            if name in self.params:
                return ("index" if name in self.vec else "skip"), []  # a helper's block argument is an index
            if name in loop_vars:
                return "index", []
            vals = self._values(name)
            if not vals:
                return "skip", []  # a global or a module alias
            return ("expand", vals) if self._pointerish(name) else ("index", [])

        def project(node: ast.BinOp) -> str:
            key = snippet(node, 80)
            self._synth[key] = node
            return key

        return _index_atoms(ptr, classify, project)

    def _closure(self, e: ast.AST) -> set[str]:
        """Names ``e`` uses, directly or through the kernel's assignments."""
        out: set[str] = set()
        stack = [e]
        while stack:
            for n in ast.walk(stack.pop()):
                if isinstance(n, ast.Name) and n.id not in out:
                    out.add(n.id)
                    stack.extend(self._values(n.id))
        return out

    def _operand_loads(self, e: ast.AST) -> list[ast.Call]:
        """The ``tl.load`` s a factor's value comes from (through names and arithmetic, not reductions)."""
        out: list[ast.Call] = []
        seen: set[str] = set()
        stack: list[ast.AST] = [e]
        while stack:
            n = stack.pop()
            if isinstance(n, ast.Call) and self.tl(n, "load"):
                out.append(n)
                continue
            if isinstance(n, ast.Call) and self.tl(n, *_TL_REDUCTIONS):
                continue
            if isinstance(n, ast.Name):
                if n.id not in seen and n.id not in self.params:
                    seen.add(n.id)
                    stack.extend(self._values(n.id))
                continue
            stack.extend(c for c in ast.iter_child_nodes(n) if isinstance(c, ast.expr))
        return out

    def _mac(self, stmt: ast.stmt) -> tuple[ast.AST, ast.AST] | None:
        """``(target, added term)`` of ``t += e``, ``t = t + e`` or ``t = tl.fma(a, b, t)``."""
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.Call):
            v = stmt.value
            if self.tl(v, "fma") and len(v.args) == 3 and snippet(v.args[2]) == snippet(stmt.targets[0]):
                return stmt.targets[0], ast.BinOp(left=v.args[0], op=ast.Mult(), right=v.args[1])
        if isinstance(stmt, ast.AugAssign) and not isinstance(stmt.op, ast.Add):
            return None
        if isinstance(stmt, ast.Assign) and not (isinstance(stmt.value, ast.BinOp) and isinstance(stmt.value.op, ast.Add)):
            return None
        return _accumulation(stmt)

    def _matmul_on_cuda_cores(self) -> list[Finding]:
        """A matrix product accumulated with multiply-adds in a kernel with no ``tl.dot`` (see the module doc)."""
        if self.calls("dot", "dot_scaled"):
            return []
        loop_vars = {name for n in self.nodes if isinstance(n, ast.For) for name in target_names(n.target)}

        block_args = self.vec & set(self.params)  # a device helper's block arguments: index sources

        def direct(a: str) -> bool:
            if a in loop_vars or a in block_args:
                return True
            return any(
                isinstance(m, ast.Call) and self.tl(m, "program_id", "arange", "load")
                for v in self._values(a) for m in ast.walk(v)
            )

        def parents(a: str) -> set[str]:
            return {
                n for v in self._values(a) for n in names_in(v)
                if n != a and n not in self.params and (n in loop_vars or self._values(n))
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
                    if isinstance(m, ast.Call) and self.tl(m, "arange"):
                        aranges.add(snippet(m))
                    elif isinstance(m, ast.Call) and self.tl(m, "program_id", "load"):
                        roots.add("<" + snippet(m.func) + ">")
                    elif isinstance(m, ast.Name) and m.id not in seen:
                        seen.add(m.id)
                        if m.id in loop_vars or m.id in block_args:
                            roots.add(m.id)
                        stack.extend(self._values(m.id))
            lane_cache[a] = (aranges, roots)
            return aranges, roots

        kw = dict(parents=parents, direct=direct, values=self._values, lanes=lanes)
        stmts = sorted((n for n in self.nodes if isinstance(n, (ast.Assign, ast.AugAssign))), key=lambda n: n.lineno)
        for stmt in stmts:
            mac = self._mac(stmt)
            if mac is None or not isinstance(mac[0], ast.Name):
                continue
            target, contrib = mac
            carried = self._carrying_loops(stmt, target.id)
            runtime = [lp for lp in carried if self._runtime_loop(lp)]
            if not runtime:
                continue
            outer = carried[-1]
            reduction = {name for lp in carried if isinstance(lp, ast.For) for name in target_names(lp.target)}
            f = self._product_finding(runtime[-1], stmt, target, contrib, assigned_in(outer), reduction, loop_vars, kw)
            if f is not None:
                return [f]
        return []

    def _carrying_loops(self, stmt: ast.stmt, target: str) -> list[ast.For | ast.While]:
        """Loops around ``stmt`` (innermost first) whose iterations all add into ``target`` (no reset inside)."""
        out: list[ast.For | ast.While] = []
        p = self.idx.parents.get(stmt)
        while p is not None and p is not self.fn:
            if isinstance(p, (ast.For, ast.While)):
                reset = any(
                    isinstance(n, ast.Assign) and self._mac(n) is None
                    and any(target in target_names(t) for t in n.targets)
                    for n in walk_scope(p)
                )
                if reset:
                    break
                out.append(p)
            p = self.idx.parents.get(p)
        return out

    def _runtime_loop(self, loop: ast.For | ast.While) -> bool:
        """A loop whose trip count is not a small constant (``tl.static_range`` counts as constant)."""
        trip = _range_trip(self.idx, loop, self.resolve)
        if trip is not None:
            return trip >= 16
        return not (isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call) and self.tl(loop.iter, "static_range"))

    def _product_finding(self, loop, stmt, target, contrib, varying, reduction, loop_vars, kw) -> Finding | None:
        summed = False
        e = contrib
        for _ in range(6):
            if isinstance(e, ast.Call) and self.tl(e, "sum"):
                summed = True
                e = call_arg(e, 0, "input")
                continue
            cast = self._is_cast(e)
            if cast is not None:
                e = cast[0]
                continue
            if isinstance(e, ast.Name) and len(self._values(e.id)) == 1:
                v = self._values(e.id)[0]
                if (isinstance(v, ast.BinOp) and isinstance(v.op, ast.Mult)) or (
                    isinstance(v, ast.Call) and (self.tl(v, "sum") or self._is_cast(v) is not None)
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
            loads = self._operand_loads(fac)
            ptrs = [call_arg(ld, 0, "pointer") for ld in loads]
            ptrs = [p for p in ptrs if p is not None]
            bases = {self._base(p) for p in ptrs} - {None}
            if not bases or not any(self._closure(p) & varying for p in ptrs):
                continue
            atoms = set().union(*(self._ptr_atoms(p, loop_vars) for p in ptrs))
            scalar = all(self.is_scalar_load(ld) for ld in loads)
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
                free_a = _free_indices(aa, ab, reduction=reduction, **kw)
                free_b = _free_indices(ab, aa, reduction=reduction, **kw)
                na, nb = "/".join(sorted(ba)), "/".join(sorted(bb))
                if free_a and free_b:
                    note = ""
                    if sa != sb:
                        sfree, bname = (free_a, nb) if sa else (free_b, na)
                        note = (f"; every `{', '.join(sorted(sfree))}` re-reads the same `{bname}` block "
                                "(one per program, no reuse)")
                    kind = "scalar x block" if sa != sb else ("scalar" if sa else "block")
                    return _finding(
                        "matmul-without-tensor-cores", "defect", stmt.lineno,
                        f"`{self.name}`: loop over `{var}` accumulates `{snippet(contrib, 50)}` into "
                        f"`{snippet(target)}` without tl.dot: a matrix product ({kind} multiply-adds; `{na}` indexed "
                        f"by `{', '.join(sorted(free_a))}`, `{nb}` by `{', '.join(sorted(free_b))}`) on CUDA cores"
                        + note,
                    )
                if summed and len(ops) == 2 and (xa or xb) and (free_a or free_b):
                    vec = nb if free_a else na
                    return _finding(
                        "matmul-without-tensor-cores", "warning", stmt.lineno,
                        f"`{self.name}`: loop over `{var}` accumulates the broadcast product `{snippet(contrib, 50)}` "
                        f"with tl.sum: a matrix-vector product on CUDA cores (`{vec}` has no index of its own); "
                        "memory-bound if it is a single vector, a matrix product if several vectors share the matrix",
                    )
        return None

    def _fp64(self) -> list[Finding]:
        for n in self.nodes:
            hit = None
            if isinstance(n, ast.Attribute) and (self.idx.imports.qual(n) or "") in (_TL + "float64", _TL + "double"):
                hit = snippet(n)
            elif isinstance(n, ast.Constant) and n.value in ("float64", "fp64"):
                hit = repr(n.value)
            if hit:
                return [_finding("fp64-promotion", "defect", n.lineno, f"`{self.name}` computes in float64 (`{hit}`)")]
        return []

    def _is_cast(self, n: ast.AST) -> tuple[ast.AST, ast.AST | None] | None:
        """``(operand, dtype)`` for ``x.to(dtype)`` / ``tl.cast(x, dtype)``."""
        if not isinstance(n, ast.Call):
            return None
        if isinstance(n.func, ast.Attribute) and n.func.attr == "to" and not self.idx.imports.is_module_rooted(n.func):
            return n.func.value, call_arg(n, 0, "dtype")
        if self.tl(n, "cast"):
            return call_arg(n, 0, "input"), call_arg(n, 1, "dtype")
        return None

    def _casts(self) -> list[Finding]:
        out: list[Finding] = []
        flagged: set[int] = set()
        for n in self.nodes:
            cast = self._is_cast(n)
            if cast is None:
                continue
            operand, dtype = cast
            loop = _innermost_loop(self.idx, n, self.fn)
            # round trip x.to(a).to(b).to(a)
            inner = self._is_cast(operand)
            if inner is not None:
                d_outer, d_mid = _dtype_text(dtype), _dtype_text(inner[1])
                inner2 = self._is_cast(inner[0])
                if inner2 is not None and _dtype_text(inner2[1]) == d_outer and d_mid != d_outer:
                    out.append(_finding(
                        "cast-in-inner-loop", "defect" if loop is not None else "warning", n.lineno,
                        f"`{self.name}`: round-trip cast `{snippet(n)}` ({d_outer} -> {d_mid} -> {d_outer})",
                    ))
                    continue
                if d_outer == d_mid and d_outer is not None:
                    out.append(_finding(
                        "cast-in-inner-loop", "warning", n.lineno, f"`{self.name}`: redundant double cast `{snippet(n)}`",
                    ))
                    continue
            if loop is None:
                continue
            varying = assigned_in(loop)
            # accumulator converted on every iteration: acc = (acc.to(fp32) + x).to(fp16)
            stmt = self.idx.enclosing(n, (ast.stmt,))
            if (
                isinstance(stmt, (ast.Assign, ast.AugAssign))
                and id(stmt) not in flagged
                and _innermost_loop(self.idx, stmt, self.fn) is loop
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
                    out.append(_finding(
                        "cast-in-inner-loop", "defect", n.lineno,
                        f"`{self.name}`: accumulator `{', '.join(sorted(tgts))}` is converted "
                        f"(`{snippet(n)}`) on every iteration",
                    ))
                    continue
            # loop-invariant conversion
            used = names_in(operand)
            if not used or used & varying:
                continue
            block_loads = [
                m for m in ast.walk(operand) if isinstance(m, ast.Call) and self.tl(m, "load") and self.is_vec(m)
            ]
            if block_loads:
                # a compiler may hoist a pure conversion, but not a load: this one repeats per iteration
                out.append(_finding(
                    "cast-in-inner-loop", "warning", n.lineno,
                    f"`{self.name}`: loop-invariant `{snippet(operand)}` is re-loaded and converted on every iteration",
                ))
        # fp16 dot operands widened to fp32 inside the K loop
        assigned_from_cast: dict[str, ast.AST] = {}
        for n in self.nodes:
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                c = self._is_cast(n.value)
                if c is not None:
                    assigned_from_cast[n.targets[0].id] = n.value
        for dot in self.calls("dot"):
            if _innermost_loop(self.idx, dot, self.fn) is None:
                continue
            for a in dot.args[:2]:
                c = self._is_cast(a)
                if c is None and isinstance(a, ast.Name) and a.id in assigned_from_cast:
                    c = self._is_cast(assigned_from_cast[a.id])
                if c is not None and _dtype_text(c[1]) in ("float32", "fp32"):
                    out.append(_finding(
                        "cast-in-inner-loop", "warning", dot.lineno,
                        f"`{self.name}`: tl.dot operand `{snippet(a)}` is widened to float32 in the K loop "
                        "(fp16/bf16 inputs lose tensor-core rate)",
                    ))
                    break
        return out

    def _single_program(self) -> bool:
        """Every launch uses a grid of one program (a scalar finalize step, not a data-parallel kernel)."""
        launches = self.launches()
        if not launches:
            return False
        for call in launches:
            grid = call.func.slice if isinstance(call.func, ast.Subscript) else None
            dims = grid.elts if isinstance(grid, (ast.Tuple, ast.List)) else [grid]
            if not dims or any(int_const(d) != 1 for d in dims):
                return False
        return True

    def _block_size(self) -> list[Finding]:
        out: list[Finding] = []
        has_pid = bool(self.calls("program_id"))
        has_mem = bool(self.calls("load", "store", "atomic_add"))
        if has_pid and has_mem and not self.has_vector_source():
            loops_load = any(
                isinstance(m, ast.Call) and self.tl(m, "load") for loop in _loops_in(self.fn) for m in ast.walk(loop)
            )
            if not loops_load and not self._single_program():
                return [_finding(
                    "one-element-per-program", "defect", self.fn.lineno,
                    f"`{self.name}` has no tl.arange: each program loads and stores a single element",
                )]
        aranges = self.calls("arange")
        if not aranges:
            return out
        sizes: dict[str, int] = {}
        for a in aranges:
            start = call_arg(a, 0, "start")
            end = call_arg(a, 1, "end")
            if end is None:
                return out
            s = self.resolve(start) if start is not None else {0}
            e = self.resolve(end)
            if s is None or e is None:
                return out
            key = end.id if isinstance(end, ast.Name) else f"@{a.lineno}:{a.col_offset}"
            sizes[key] = max(sizes.get(key, 0), max(e) - min(s))
        uses_dot = bool(self.calls("dot", "dot_scaled"))
        if uses_dot:
            small = {k: v for k, v in sizes.items() if v < 16}
            if small:
                desc = ", ".join(f"{k}={v}" for k, v in sorted(small.items()) if not k.startswith("@")) or "tl.arange"
                out.append(_finding(
                    "tiny-tile", "defect", aranges[0].lineno,
                    f"`{self.name}`: tl.dot tile dimension under 16 ({desc})",
                ))
            return out
        total = 1
        for v in sizes.values():
            total *= max(v, 1)
        desc = ", ".join(f"{k}={v}" for k, v in sorted(sizes.items()) if not k.startswith("@")) or f"{total} elements"
        if total <= 1:
            out.append(_finding(
                "one-element-per-program", "defect", aranges[0].lineno,
                f"`{self.name}` is launched with a block of one element ({desc})",
            ))
        elif total < 32:
            out.append(_finding(
                "tiny-tile", "defect", aranges[0].lineno,
                f"`{self.name}`: block of {total} elements per program ({desc}), under one warp",
            ))
        return out

    # -- coalescing ------------------------------------------------------------------

    _ROW_STRIDE_RE = re.compile(r"(row_?stride|stride_?row|^(n_?cols|num_?cols|n_?columns|ncols?)$)", re.I)

    def _stride_kind(self, e: ast.AST) -> str:
        """``outer`` (a row/batch stride), ``contig`` (stride 1) or ``unknown``."""
        if int_const(e) == 1:
            return "contig"
        if not isinstance(e, ast.Name):
            return "unknown"
        name = e.id
        if name in self.params:
            kinds = set()
            pos = self.params.index(name)
            for call in self.launches():
                arg = None
                for kw in call.keywords:
                    if kw.arg == name:
                        arg = kw.value
                if arg is None and pos < len(call.args):
                    arg = call.args[pos]
                if arg is not None:
                    kinds.add(self.lint.host_stride_kind(arg, call))
            if kinds:  # what the launch passes beats what the name suggests
                return "outer" if kinds == {"outer"} else "unknown"
        return "outer" if self._ROW_STRIDE_RE.search(name) else "unknown"

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

    def _inline(self, e: ast.AST, depth: int = 0) -> ast.AST:
        if depth > 6:
            return e
        if isinstance(e, ast.Name):
            vals = self.assigns.get(e.id, [])
            if len(vals) == 1:
                return self._inline(vals[0], depth + 1)
            return e
        if isinstance(e, ast.BinOp):
            return ast.BinOp(left=self._inline(e.left, depth + 1), op=e.op, right=self._inline(e.right, depth + 1))
        return e

    def _arange_terms(self, e: ast.AST) -> list[str]:
        """Stride kind of each additive term of a pointer expression that holds a tl.arange."""
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
            return self._arange_terms(e.left) + self._arange_terms(e.right)
        if not self._has_arange(e):
            return []
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult):
            lv, rv = self._has_arange(e.left), self._has_arange(e.right)
            if lv and not rv:
                return [self._stride_kind(e.right)]
            if rv and not lv:
                return [self._stride_kind(e.left)]
            return ["unknown"]
        if isinstance(e, (ast.BinOp, ast.Call)):
            return ["unknown"]
        if isinstance(e, ast.Name) and (
            len(self.assigns.get(e.id, [])) != 1
            or any(isinstance(n, ast.AugAssign) and target_names(n.target) == {e.id} for n in self.nodes)
        ):
            return ["unknown"]  # a pointer advanced in place: its strides are not visible here
        return ["contig"]

    def _has_arange(self, e: ast.AST) -> bool:
        for n in ast.walk(e):
            if isinstance(n, ast.Call) and self.tl(n, "arange"):
                return True
            if isinstance(n, ast.Name) and n.id in self.arange_names:
                return True
        return False

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

    def _coalescing(self) -> list[Finding]:
        out: list[Finding] = []
        for call in self.calls("load", "store"):
            ptr = call_arg(call, 0, "pointer")
            if ptr is None or self.is_vec(ptr) is False:
                continue
            terms = self._arange_terms(self._inline(ptr))
            if terms and all(t == "outer" for t in terms):
                op = "tl.load" if self.tl(call, "load") else "tl.store"
                out.append(_finding(
                    "non-coalesced-access", "warning", call.lineno,
                    f"`{self.name}`: {op}(`{snippet(ptr)}`) steps every tl.arange lane by a row stride "
                    "(no contiguous axis)",
                ))
        return out[:3]


# --------------------------------------------------------------------------
# TileLang
# --------------------------------------------------------------------------

_TL_SERIAL = {"serial", "Serial", "unroll", "Unroll"}
_TL_PIPELINED = {"Pipelined", "pipelined"}
_TL_PARALLEL = {"Parallel", "parallel", "vectorized", "Vectorized"}
_TL_TILE_OPS = {
    "copy", "gemm", "gemm_sp", "wgmma_gemm", "tcgen05_gemm", "fill", "clear", "cumsum", "async_copy", "tma_copy",
    "reduce", "reduce_sum", "reduce_max", "reduce_min", "reduce_abssum", "reduce_absmax", "reduce_bitand",
    "reduce_bitor", "reduce_bitxor", "atomic_add", "atomic_max", "atomic_min", "atomic_addx2", "atomic_addx4",
}
_TL_CROSS = {
    "reduce", "reduce_sum", "reduce_max", "reduce_min", "reduce_abssum", "reduce_absmax", "reduce_bitand",
    "reduce_bitor", "reduce_bitxor", "cumsum", "atomic_add", "atomic_max", "atomic_min", "atomic_addx2",
    "atomic_addx4", "shfl_xor", "shfl_down", "shfl_up", "shfl_sync", "warp_reduce_sum", "warp_reduce_max",
    "warp_reduce_min", "finalize_reducer", "tvm_thread_allreduce", "gemm", "gemm_sp", "wgmma_gemm", "tcgen05_gemm",
    "alloc_reducer",
}
_TL_GEMMS = {"gemm", "gemm_sp", "wgmma_gemm", "tcgen05_gemm", "gemm_v2", "gemm_py"}
_TL_THREAD = {"get_thread_binding", "get_thread_bindings", "thread_binding", "launch_thread", "get_warp_idx"}
_TL_WRITES_ARG = {"copy": 1, "gemm": 2, "fill": 0, "clear": 0, "reduce_sum": 1, "reduce_max": 1, "reduce_min": 1,
                  "reduce_abssum": 1, "reduce_absmax": 1, "cumsum": 0, "atomic_add": 0}


@dataclass
class _TLKernel:
    with_node: ast.With
    call: ast.Call
    scope: list[FuncDef]
    name: str


class _TileLang:
    def __init__(self, lint: "_Linter") -> None:
        self.lint = lint
        self.idx = lint.idx
        self.kernels: list[_TLKernel] = []
        for n in ast.walk(self.idx.tree):
            if isinstance(n, (ast.With, ast.AsyncWith)):
                for item in n.items:
                    if self.tq(item.context_expr) in ("Kernel", "ClusterKernel"):
                        scope = self.idx.enclosing_functions(n)
                        name = scope[-1].name if scope else "<module>"
                        if len(scope) >= 2:
                            name = f"{scope[-1].name}.{scope[0].name}"
                        self.kernels.append(_TLKernel(n, item.context_expr, scope, name))
                        break

    def tq(self, node: ast.AST) -> str | None:
        """TileLang short name of a call (``T.serial(...)`` -> ``serial``)."""
        q = self.idx.imports.call_qual(node)
        if q and q.startswith(_TILELANG):
            return q[len(_TILELANG):].split(".")[-1]
        if q and q.startswith("tilelang.") and q.count(".") == 1:
            return q.split(".")[-1]
        return None

    def loop_kind(self, loop: ast.AST) -> str:
        if isinstance(loop, ast.While):
            return "serial"
        it = loop.iter
        if isinstance(it, ast.Call):
            t = self.tq(it)
            if t in _TL_SERIAL or (isinstance(it.func, ast.Name) and it.func.id == "range"):
                return "serial"
            if t in _TL_PIPELINED:
                return "pipelined"
            if t in _TL_PARALLEL:
                return "parallel"
            return "other"
        return "serial"

    def resolve(self, k: _TLKernel, e: ast.AST | None) -> set[int] | None:
        return self.idx.resolve_ints(e, k.scope)

    def check(self) -> list[Finding]:
        out: list[Finding] = []
        for k in self.kernels:
            out += self._check_kernel(k)
        out += self._fp64()
        return out

    def _check_kernel(self, k: _TLKernel) -> list[Finding]:
        out: list[Finding] = []
        body_nodes = [m for s in k.with_node.body for m in [s, *walk_scope(s)]]
        calls = [m for m in body_nodes if isinstance(m, ast.Call)]
        short = [self.tq(c) for c in calls]
        loops = [m for m in body_nodes if isinstance(m, (ast.For, ast.While))]
        has_cross = any(s in _TL_CROSS for s in short)
        has_tile = any(s in _TL_TILE_OPS for s in short)
        has_thread = any(s in _TL_THREAD for s in short)
        line = k.with_node.lineno

        threads_expr = None
        for kw in k.call.keywords:
            if kw.arg == "threads":
                threads_expr = kw.value
        if threads_expr is None:
            threads = {128}
        elif isinstance(threads_expr, (ast.Tuple, ast.List)):
            parts = [self.resolve(k, e) for e in threads_expr.elts]
            threads = None if any(p is None for p in parts) else {_prod(max(p) for p in parts)}
        else:
            threads = self.resolve(k, threads_expr)
        tmax = max(threads) if threads else None

        if tmax == 1:
            if loops:
                lp = loops[0]
                var = snippet(lp.target) if isinstance(lp, ast.For) else "while"
                out.append(_finding(
                    "sequential-reduction", "defect", lp.lineno,
                    f"kernel `{k.name}` runs threads=1: a single thread walks the loop over `{var}`",
                ))
            else:
                out.append(_finding(
                    "one-element-per-program", "defect", line,
                    f"kernel `{k.name}` runs threads=1 and computes one element per block",
                ))
            return out + self._casts(k, loops)
        if tmax is not None and tmax < 32:
            out.append(_finding("tiny-tile", "defect", line, f"kernel `{k.name}`: threads={tmax}, under one warp per block"))

        mm = None
        if not any(s in _TL_GEMMS for s in short):
            mm = self._matmul(k)
            if mm is not None:
                out.append(mm)
        if not has_cross:
            f = self._serial_accumulation(k, loops)
            if f is not None and not (mm is not None and mm.line == f.line):
                out.append(f)

        if not loops and not has_tile and not has_thread:
            out.append(_finding(
                "one-element-per-program", "defect", line,
                f"kernel `{k.name}`: each block computes a single element (no T.Parallel / tile copy)",
            ))
        elif not any(s in ("gemm", "gemm_sp", "wgmma_gemm", "tcgen05_gemm") for s in short) and not has_thread:
            products = []
            for lp in loops:
                if self.loop_kind(lp) != "parallel" or not isinstance(lp.iter, ast.Call):
                    continue
                outer = self.idx.parents.get(lp)
                nested = False
                while outer is not None and outer is not k.with_node:
                    if isinstance(outer, ast.For) and self.loop_kind(outer) == "parallel":
                        nested = True
                    outer = self.idx.parents.get(outer)
                if nested:
                    continue
                ext = [self.resolve(k, a) for a in lp.iter.args]
                if not ext or any(e is None for e in ext):
                    products = None
                    break
                products.append((_prod(max(e) for e in ext), lp))
            if products:
                best, lp = max(products, key=lambda p: p[0])
                if best <= 1:
                    out.append(_finding(
                        "one-element-per-program", "defect", lp.lineno,
                        f"kernel `{k.name}`: T.Parallel covers one element per block",
                    ))
                elif best < 32:
                    out.append(_finding(
                        "tiny-tile", "defect", lp.lineno,
                        f"kernel `{k.name}`: T.Parallel covers {best} elements per block",
                    ))
        out += self._gemm_tiles(k, body_nodes)
        out += self._casts(k, loops)
        return out

    def _serial_accumulation(self, k: _TLKernel, loops: list[ast.AST]) -> Finding | None:
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
            if isinstance(lp, ast.For) and self.loop_kind(lp) == "parallel" and isinstance(lp.iter, ast.Call)
            for e in lp.iter.args
        }
        body_nodes = [m for st in k.with_node.body for m in [st, *walk_scope(st)]]
        scalar_kernel = not par_extents and not any(
            isinstance(c, ast.Call) and self.tq(c) in _TL_TILE_OPS for c in body_nodes
        )
        for lp in loops:
            if not isinstance(lp, ast.For) or self.loop_kind(lp) != "serial":
                continue
            trip = _range_trip(self.idx, lp, lambda e: self.resolve(k, e))
            if trip is not None and trip < 32:
                continue
            var = target_names(lp.target)
            in_parallel = self._inside_parallel(lp, k)
            extents = [ast.dump(a) for a in lp.iter.args] if isinstance(lp.iter, ast.Call) else []
            walks_parallel_axis = bool(extents) and extents[-1] in par_extents
            derived = {  # v = X[row, j] inside the loop: v is a per-iteration element
                name
                for m in walk_scope(lp)
                if isinstance(m, ast.Assign)
                and any(self._row_walk(x, var, globals_, in_parallel) for x in ast.walk(m.value))
                for t in m.targets
                for name in target_names(t)
            }
            for stmt in _stmts_directly_in(lp):
                acc = _accumulation(stmt)
                if acc is None:
                    continue
                target, contrib = acc
                if isinstance(target, ast.Subscript) and names_in(target.slice) & var:
                    continue
                tbase = target_names(target)
                if isinstance(target, ast.Name) and _rebound_before(lp, stmt, tbase):
                    continue
                reads = [
                    m for m in ast.walk(contrib)
                    if (self._row_walk(m, var, globals_, in_parallel) and not (target_names(m) & tbase))
                    or (isinstance(m, ast.Name) and m.id in derived and m.id not in tbase)
                ]
                if not reads:
                    continue
                if not in_parallel and not (scalar_kernel or walks_parallel_axis):
                    continue
                who = "each thread walks a row" if in_parallel else "the whole block walks it serially"
                return _finding(
                    "sequential-reduction", "defect", stmt.lineno,
                    f"kernel `{k.name}`: serial loop over `{snippet(lp.target)}` accumulates `{snippet(target)}` "
                    f"one element per iteration (`{snippet(reads[0])}`; {who}), no T.reduce_*/parallel reduction",
                )
        return None

    def _matmul(self, k: _TLKernel) -> Finding | None:
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
                and self.tq(m.value) in ("alloc_shared", "alloc_smem")
            ):
                shared[m.targets[0].id] = call_arg(m.value, 1, "dtype")

        def direct(a: str) -> bool:
            if a in bindings or a in loop_vars:
                return True
            return any(
                (isinstance(x, ast.Call) and self.tq(x) in _TL_THREAD | {"get_block_binding"})
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
                if isinstance(e, ast.Call) and self.tq(e) in ("cast", "Cast"):
                    e = call_arg(e, 1, "value") if self.tq(e) == "Cast" else call_arg(e, 0, "value")
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
                if isinstance(m, ast.Assign) and _accumulation(m) is None:
                    for t in m.targets:
                        base = t.value if isinstance(t, ast.Subscript) else t
                        if isinstance(base, ast.Name) and base.id == buf:
                            return True
                elif isinstance(m, ast.Call) and self.tq(m) in ("clear", "fill"):
                    a = call_arg(m, 0, "buffer")
                    if isinstance(a, ast.Name) and a.id == buf:
                        return True
            return False

        def runtime(lp: ast.AST) -> bool:
            trip = _range_trip(self.idx, lp, lambda e: self.resolve(k, e))
            if trip is not None:
                return trip >= 16
            unrolled = isinstance(lp, ast.For) and isinstance(lp.iter, ast.Call) and self.tq(lp.iter) in ("unroll", "Unroll")
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
            acc = _accumulation(stmt)
            if acc is None:
                continue
            target, contrib = acc
            tbase = target.value if isinstance(target, ast.Subscript) else target
            if not isinstance(tbase, ast.Name):
                continue
            carried: list[ast.AST] = []  # serial loops around stmt whose iterations all add into the target
            p = self.idx.parents.get(stmt)
            while p is not None and p is not k.with_node:
                if isinstance(p, ast.While) or (isinstance(p, ast.For) and self.loop_kind(p) in ("serial", "pipelined")):
                    if resets(p, tbase.id):
                        break
                    carried.append(p)
                p = self.idx.parents.get(p)
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
                atoms = set().union(*(_index_atoms(r.slice, classify, project) for r in rs))
                ops.append(({r.value.id for r in rs}, atoms))
            for i in range(len(ops)):
                for j in range(i + 1, len(ops)):
                    (ba, aa), (bb, ab) = ops[i], ops[j]
                    if ba & bb:
                        continue
                    free_a = _free_indices(aa, ab, reduction=reduction, **kw)
                    free_b = _free_indices(ab, aa, reduction=reduction, **kw)
                    if free_a and free_b and not all(
                        b in shared and self._dtype_str(k, shared[b]) in ("float32", "float") for b in ba | bb
                    ):  # fp32 shared tiles: T.gemm would be TF32, CUDA-core FMA can be the exact choice
                        na, nb = "/".join(sorted(ba)), "/".join(sorted(bb))
                        lp = long[-1]
                        var = snippet(lp.target) if isinstance(lp, ast.For) else "while"
                        return _finding(
                            "matmul-without-tensor-cores", "defect", stmt.lineno,
                            f"kernel `{k.name}`: loop over `{var}` accumulates `{snippet(contrib, 50)}` into "
                            f"`{snippet(target)}` without T.gemm: a matrix product (`{na}` indexed by "
                            f"`{', '.join(sorted(free_a))}`, `{nb}` by `{', '.join(sorted(free_b))}`) as scalar "
                            "multiply-adds on CUDA cores",
                        )
        return None

    def _dtype_str(self, k: _TLKernel, e: ast.AST | None) -> str | None:
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

    @staticmethod
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

    def _inside_parallel(self, node: ast.AST, k: _TLKernel) -> bool:
        p = self.idx.parents.get(node)
        while p is not None and p is not k.with_node:
            if isinstance(p, ast.For) and self.loop_kind(p) == "parallel":
                return True
            p = self.idx.parents.get(p)
        return False

    def _gemm_tiles(self, k: _TLKernel, body_nodes: list[ast.AST]) -> list[Finding]:
        shapes: dict[str, ast.AST] = {}
        for fn in k.scope[:1]:
            for m in walk_scope(fn):
                if isinstance(m, ast.Assign) and len(m.targets) == 1 and isinstance(m.targets[0], ast.Name):
                    if (self.tq(m.value) or "").startswith("alloc_"):
                        shape = call_arg(m.value, 0, "shape")
                        if shape is not None:
                            shapes[m.targets[0].id] = shape
        for c in body_nodes:
            if not isinstance(c, ast.Call) or self.tq(c) not in ("gemm", "gemm_sp", "wgmma_gemm"):
                continue
            for a in c.args[:3]:
                if not isinstance(a, ast.Name) or a.id not in shapes:
                    continue
                shape = shapes[a.id]
                dims = shape.elts if isinstance(shape, (ast.Tuple, ast.List)) else [shape]
                for d in dims:
                    r = self.resolve(k, d)
                    if r is not None and max(r) < 16:
                        return [_finding(
                            "tiny-tile", "defect", c.lineno,
                            f"kernel `{k.name}`: T.gemm tile `{a.id}` has a dimension of {max(r)} (< 16)",
                        )]
        return []

    def _casts(self, k: _TLKernel, loops: list[ast.AST]) -> list[Finding]:
        out: list[Finding] = []
        for lp in loops:
            if not isinstance(lp, ast.For) or self.loop_kind(lp) not in ("serial", "pipelined"):
                continue
            varying = set(target_names(lp.target))
            for m in walk_scope(lp):
                if isinstance(m, ast.Assign):
                    for t in m.targets:
                        varying |= target_names(t)
                elif isinstance(m, ast.AugAssign):
                    varying |= target_names(m.target)
                elif isinstance(m, ast.For) and self.loop_kind(m) in ("serial", "pipelined"):
                    varying |= target_names(m.target)
                elif isinstance(m, ast.Call):
                    t = self.tq(m)
                    if t in _TL_WRITES_ARG:
                        a = call_arg(m, _TL_WRITES_ARG[t], "")
                        if a is not None:
                            varying |= target_names(a) if not isinstance(a, ast.Name) else {a.id}
                    elif t is None and isinstance(m.func, ast.Name):
                        varying |= {x.id for x in m.args if isinstance(x, ast.Name)}
            for m in walk_scope(lp):
                if not isinstance(m, ast.Call) or self.tq(m) not in ("cast", "Cast"):
                    continue
                inner = self._innermost_serial(m, k)
                if inner is not lp:
                    continue
                if self.tq(m) == "Cast":  # TVM order: Cast(dtype, value)
                    operand = call_arg(m, 1, "value")
                else:
                    operand = call_arg(m, 0, "value")
                if operand is None:
                    continue
                used = names_in(operand) - set(self.idx.imports.alias)
                if not used or used & varying:
                    continue
                if not any(isinstance(x, ast.Subscript) for x in ast.walk(operand)):
                    continue  # a pure conversion the compiler can hoist
                out.append(_finding(
                    "cast-in-inner-loop", "warning", m.lineno,
                    f"kernel `{k.name}`: loop-invariant `{snippet(operand)}` is converted on every iteration of "
                    f"the loop over `{snippet(lp.target)}`",
                ))
        return out

    def _innermost_serial(self, node: ast.AST, k: _TLKernel) -> ast.AST | None:
        p = self.idx.parents.get(node)
        while p is not None and p is not k.with_node:
            if isinstance(p, ast.For) and self.loop_kind(p) in ("serial", "pipelined"):
                return p
            p = self.idx.parents.get(p)
        return None

    def _fp64(self) -> list[Finding]:
        out: list[Finding] = []
        fns: list[FuncDef] = []
        for k in self.kernels:
            for fn in k.scope:
                if fn not in fns:
                    fns.append(fn)
        factories = {fn.name for fn in fns}
        nodes: list[ast.AST] = []
        for fn in fns:
            nodes += [fn.args, *walk_scope(fn)]
            nodes += [m for d in fn.args.defaults + [x for x in fn.args.kw_defaults if x] for m in ast.walk(d)]
        for c in ast.walk(self.idx.tree):
            if isinstance(c, ast.Call) and isinstance(c.func, (ast.Name, ast.Attribute)):
                name = c.func.id if isinstance(c.func, ast.Name) else c.func.attr
                if name in factories:
                    nodes += [m for a in [*c.args, *(kw.value for kw in c.keywords)] for m in ast.walk(a)]
        for n in nodes:
            hit = None
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in ("float64", "double", "fp64"):
                hit = repr(n.value)
            elif isinstance(n, ast.Attribute) and (self.idx.imports.qual(n) or "") in (
                _TILELANG + "float64", _TILELANG + "double", "tilelang.float64"
            ):
                hit = snippet(n)
            if hit and not isinstance(self.idx.parents.get(n), (ast.Compare, ast.Dict)):
                out.append(_finding("fp64-promotion", "defect", n.lineno, f"TileLang kernel uses float64 ({hit})"))
        return out[:1]


def _prod(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


# --------------------------------------------------------------------------
# Host code (forward and its helpers)
# --------------------------------------------------------------------------

_ALLOC_LIKE = {"empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like", "clone"}
_ALLOC = {"empty", "zeros", "ones", "full", "empty_strided", "rand", "randn"}
_ALLOC_METHODS = {"new_empty", "new_zeros", "new_ones", "new_full", "new_tensor"}
_ALIAS_METHODS = {
    "view", "reshape", "contiguous", "flatten", "unsqueeze", "squeeze", "t", "transpose", "permute", "expand",
    "expand_as", "view_as", "as_strided", "narrow", "select", "to", "float", "half", "bfloat16", "detach",
    "unflatten", "movedim", "reshape_as", "cuda",
}
_SYNC_METHODS = {"item", "cpu", "tolist", "numpy"}


@dataclass
class _Event:
    line: int
    label: str
    count: int
    reads: set[int] = field(default_factory=set)
    produced: int | None = None


class _Linter:
    """Whole-module context: kernels, kernel handles, host functions."""

    def __init__(self, idx: ModuleIndex) -> None:
        self.idx = idx
        self.subscript_calls: dict[str, list[ast.Call]] = {}  # name -> calls of name[...](...)
        for n in ast.walk(idx.tree):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript):
                v = n.func.value
                name = v.id if isinstance(v, ast.Name) else v.attr if isinstance(v, ast.Attribute) else None
                if name:
                    self.subscript_calls.setdefault(name, []).append(n)
        self.triton: dict[str, _TritonKernel] = {}
        self.tl_direct: set[str] = set()
        self.tl_factories: set[str] = set()
        jit_fns = [
            n for n in ast.walk(idx.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and _is_triton_jit(idx, n)
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
            self.triton[fn.name] = _TritonKernel(self, fn)
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
        self.tilelang = _TileLang(self)
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
        flow = _Flow(self, fn, owner)
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

    # -- rules ------------------------------------------------------------------------------

    def host_findings(self) -> list[Finding]:
        out: list[Finding] = []
        for fn, owner in self.hosts:
            out += self._host_sync(fn)
            out += self._host_fp64(fn)
            out += self._multipass(fn, owner)
        return out

    def _host_sync(self, fn: FuncDef) -> list[Finding]:
        out = []
        q = self.idx.imports.qual
        for n in walk_scope(fn):
            if not isinstance(n, ast.Call):
                continue
            what = None
            cq = q(n.func) or ""
            if cq in ("torch.cuda.synchronize", "torch.cuda.current_stream.synchronize", "torch.synchronize"):
                what = "torch.cuda.synchronize()"
            elif isinstance(n.func, ast.Attribute):
                a = n.func.attr
                if a in _SYNC_METHODS and not n.args and not self.idx.imports.is_module_rooted(n.func):
                    if not self._host_tensor(n.func.value):
                        what = f".{a}()"
                elif a == "synchronize":
                    what = f"{snippet(n.func, 40)}()"
                elif a == "to" and not self.idx.imports.is_module_rooted(n.func):
                    dev = call_arg(n, 0, "device")
                    if str_const(dev) == "cpu" or (
                        isinstance(dev, ast.Call) and str_const(dev.args[0] if dev.args else None) == "cpu"
                    ):
                        what = ".to('cpu')"
            if what:
                out.append(_finding(
                    "host-sync-in-forward", "defect", n.lineno,
                    f"`{fn.name}` calls {what} (`{snippet(n, 50)}`), which waits for the GPU on every call",
                ))
        return out

    def _host_tensor(self, e: ast.AST) -> bool:
        """``e`` is built on the CPU (``torch.tensor(shape).prod()``): reading it back does not sync."""
        while True:
            if isinstance(e, ast.Call):
                q = self.idx.imports.qual(e.func) or ""
                if q.startswith("torch.") and q.count(".") == 1:
                    dev = next((k.value for k in e.keywords if k.arg == "device"), None)
                    return dev is None or str_const(dev) == "cpu"
                if isinstance(e.func, ast.Attribute) and not self.idx.imports.is_module_rooted(e.func):
                    e = e.func.value
                    continue
                return False
            if isinstance(e, (ast.Subscript, ast.Attribute)):
                e = e.value
                continue
            return False

    def _host_fp64(self, fn: FuncDef) -> list[Finding]:
        q = self.idx.imports.qual
        for n in walk_scope(fn):
            hit = None
            if isinstance(n, ast.Attribute) and (q(n) or "") in ("torch.float64", "torch.double", "numpy.float64"):
                hit = snippet(n)
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "double" and not n.args:
                hit = snippet(n, 40)
            elif isinstance(n, ast.Constant) and n.value in ("float64", "fp64"):
                hit = repr(n.value)
            if hit and not isinstance(self.idx.parents.get(n), (ast.Compare, ast.Dict)) and not isinstance(
                self.idx.parents.get(self.idx.parents.get(n)), ast.Compare
            ):
                return [_finding("fp64-promotion", "defect", n.lineno, f"`{fn.name}` promotes to float64 (`{hit}`)")]
        return []

    def _multipass(self, fn: FuncDef, owner: ast.ClassDef | None) -> list[Finding]:
        """Several kernels on one path handing data through memory.

        Per execution path: *defect* when >= 3 kernels run and either the
        same input is re-read by >= 2 of them with a value passed between
        them (a multi-pass norm/softmax), or >= 2 full-size intermediates
        chain through memory (an unfused elementwise tail); *warning* for
        the two-kernel versions (a stats pass + apply pass, a GEMM and a
        separate epilogue), which are sometimes the right split.
        """
        flow = _Flow(self, fn, owner)
        flow.run()
        best: tuple[int, Finding] | None = None
        for path in flow.paths:
            f = self._judge_path(fn, flow, path.events)
            if f is not None:
                rank = 2 if f.severity == "defect" else 1
                if best is None or rank > best[0]:
                    best = (rank, f)
        return [best[1]] if best else []

    @staticmethod
    def _judge_path(fn: FuncDef, flow: "_Flow", events: list[_Event]) -> Finding | None:
        total = sum(e.count for e in events)
        if total < 2 or len(events) < 2:
            return None
        flows: list[tuple[int, int, int]] = []  # (value, producer event, consumer event)
        for j, ej in enumerate(events):
            for v in ej.reads:
                if flow.kind.get(v) == "input":
                    continue
                for i in range(j):
                    if v in events[i].reads or events[i].produced == v:
                        flows.append((v, i, j))
                        break
        readers: dict[int, int] = {}
        for e in events:
            for v in e.reads:
                if flow.kind.get(v) == "input":
                    readers[v] = readers.get(v, 0) + 1
        multi = [v for v, c in readers.items() if c >= 2]
        full = [f for f in flows if flow.kind.get(f[0]) == "full"]
        full_values = {f[0] for f in full}
        labels = ", ".join(e.label for e in events[:4]) + (", ..." if len(events) > 4 else "")
        if flows and multi:
            return _finding(
                "unfused-multipass", "defect" if total >= 3 else "warning", events[0].line,
                f"`{fn.name}` launches {total} kernels ({labels}) that each re-read `{flow.label[multi[0]]}` and "
                f"pass `{flow.label[flows[0][0]]}` between them",
            )
        if full:
            v, i, j = full[0]
            return _finding(
                "unfused-multipass", "defect" if total >= 3 and len(full_values) >= 2 else "warning", events[0].line,
                f"`{fn.name}` launches {total} kernels ({labels}); full-size intermediate `{flow.label[v]}` goes "
                f"from `{events[i].label}` to `{events[j].label}` through memory",
            )
        return None

    def run(self, dsl: str) -> list[Finding]:
        out: list[Finding] = []
        if dsl in ("triton", "any"):
            for k in self.triton.values():
                out += k.check()
        if dsl in ("tilelang", "any"):
            out += self.tilelang.check()
        out += self.host_findings()
        return out


@dataclass
class _Path:
    """One execution path through a host function (``if``/``else`` fork paths)."""

    env: dict[str, int] = field(default_factory=dict)
    events: list[_Event] = field(default_factory=list)
    returns: list[int | None] = field(default_factory=list)
    done: bool = False  # returned
    aborted: bool = False  # raised: not a path a timed call takes

    def fork(self) -> "_Path":
        return _Path(dict(self.env), list(self.events), list(self.returns), self.done, self.aborted)


_MAX_PATHS = 32


class _Flow:
    """Abstract walk of one host function: which tensors each kernel launch touches.

    Values are numbered; aliases (``x.view(...)``, ``x.contiguous()``) keep
    the number, allocations get a kind: ``full`` (``empty_like``, a 2-D+
    shape), ``small`` (1-D, e.g. per-row statistics), ``input`` (a parameter).
    ``if``/``else`` branches fork the walk, so launches in exclusive branches
    (a fast path and a fallback) never count as one sequence; loops run once.
    """

    def __init__(self, lint: _Linter, fn: FuncDef, owner: ast.ClassDef | None) -> None:
        self.lint = lint
        self.fn = fn
        self.owner = owner
        self.kind: dict[int, str] = {}
        self.label: dict[int, str] = {}
        self.paths: list[_Path] = []

    def new(self, kind: str, label: str) -> int:
        v = len(self.kind)
        self.kind[v] = kind
        self.label[v] = label
        return v

    def run(self) -> None:
        start = _Path()
        for prm in func_params(self.fn):
            if prm.arg not in ("self", "ctx", "cls"):
                start.env[prm.arg] = self.new("input", prm.arg)
        self.paths = [p for p in self.block(self.fn.body, [start]) if not p.aborted]

    # -- statements ------------------------------------------------------------------

    def block(self, stmts: list[ast.stmt], paths: list[_Path]) -> list[_Path]:
        for st in stmts:
            live = [p for p in paths if not p.done]
            if not live:
                break
            paths = [p for p in paths if p.done] + self.stmt(st, live)
        return paths[:_MAX_PATHS]

    def stmt(self, s: ast.stmt, paths: list[_Path]) -> list[_Path]:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return paths
        if isinstance(s, ast.If):
            for p in paths:
                self.expr(s.test, p)
            taken = self.block(s.body, [p.fork() for p in paths])
            other = self.block(s.orelse, [p.fork() for p in paths]) if s.orelse else paths
            return (taken + other)[:_MAX_PATHS]
        if isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
            for p in paths:
                self.expr(s.iter if isinstance(s, (ast.For, ast.AsyncFor)) else s.test, p)
            return self.block(s.body + s.orelse, paths)
        if isinstance(s, (ast.With, ast.AsyncWith)):
            for p in paths:
                for item in s.items:
                    self.expr(item.context_expr, p)
            return self.block(s.body, paths)
        if isinstance(s, ast.Try):
            return self.block(s.body + s.orelse + s.finalbody, paths)
        if isinstance(s, ast.Return):
            for p in paths:
                p.returns.append(self.expr(s.value, p) if s.value is not None else None)
                p.done = True
            return paths
        if isinstance(s, ast.Raise):
            for p in paths:
                p.done = p.aborted = True
            return paths
        for p in paths:
            if isinstance(s, ast.Assign):
                v = self.expr(s.value, p)
                for t in s.targets:
                    self.bind(t, v, p)
            elif isinstance(s, ast.AnnAssign):
                if s.value is not None:
                    self.bind(s.target, self.expr(s.value, p), p)
            else:
                for child in ast.iter_child_nodes(s):
                    if isinstance(child, ast.expr):
                        self.expr(child, p)
        return paths

    def bind(self, target: ast.AST, v: int | None, p: _Path) -> None:
        if isinstance(target, ast.Name):
            if v is None:
                p.env.pop(target.id, None)
            else:
                p.env[target.id] = v
                if self.label.get(v, "").startswith("<"):
                    self.label[v] = target.id
        elif isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self.bind(t, None, p)

    # -- expressions -----------------------------------------------------------------

    def expr(self, e: ast.AST | None, p: _Path) -> int | None:
        if e is None:
            return None
        if isinstance(e, ast.Name):
            return p.env.get(e.id)
        if isinstance(e, ast.Subscript):
            v = self.expr(e.value, p)
            self.expr(e.slice, p)
            return v
        if isinstance(e, ast.Starred):
            return self.expr(e.value, p)
        if isinstance(e, ast.Call):
            return self.call(e, p)
        if isinstance(e, (ast.Lambda, ast.IfExp)):
            return None
        for c in ast.iter_child_nodes(e):
            if isinstance(c, ast.expr):
                self.expr(c, p)
        return None

    def call(self, c: ast.Call, p: _Path) -> int | None:
        recv = None
        if isinstance(c.func, ast.Attribute):
            recv = self.expr(c.func.value, p)
        elif not isinstance(c.func, ast.Name):
            self.expr(c.func, p)
        arg_vals = [self.expr(a, p) for a in c.args]
        kw_vals = [self.expr(k.value, p) for k in c.keywords]
        launch = self.lint.launch_of(c, self.fn, self.owner)
        if launch is not None:
            label, count, full = launch
            ev = _Event(line=c.lineno, label=label, count=count, reads={v for v in arg_vals + kw_vals if v is not None})
            p.events.append(ev)
            if full:
                ev.produced = self.new("full", f"<{label} output>")
                return ev.produced
            return None
        q = self.lint.idx.imports.qual(c.func) or ""
        short = q.rsplit(".", 1)[-1]
        if q.startswith("torch.") and short in _ALLOC_LIKE:
            src = arg_vals[0] if arg_vals else None
            return self.new("small" if src is not None and self.kind.get(src) == "small" else "full", "<alloc>")
        if q.startswith("torch.") and short in _ALLOC:
            return self.new(_shape_kind(c), "<alloc>")
        if isinstance(c.func, ast.Attribute) and not self.lint.idx.imports.is_module_rooted(c.func):
            a = c.func.attr
            if a in _ALLOC_METHODS:
                return self.new(_shape_kind(c), "<alloc>")
            if a == "clone" and recv is not None:
                return self.new("full", "<alloc>")
            if a in _ALIAS_METHODS and recv is not None:
                return recv
        if q.startswith("torch.") and short in _ALIAS_METHODS and arg_vals and arg_vals[0] is not None:
            return arg_vals[0]
        return None


def _shape_kind(c: ast.Call) -> str:
    """``full`` when an allocation looks input-sized (2-D+ or ``x.shape``), else ``small``."""
    dims = [a for a in c.args if not isinstance(a, ast.Constant) or isinstance(a.value, int)]
    size = call_arg(c, 0, "size")
    if size is None:
        return "small"
    if isinstance(size, ast.Starred):
        return "full"
    if isinstance(size, (ast.Tuple, ast.List)):
        return "full" if len(size.elts) >= 2 or any(isinstance(x, ast.Starred) for x in size.elts) else "small"
    if isinstance(size, ast.Attribute) and size.attr == "shape":
        return "full"
    if isinstance(size, ast.Call) and isinstance(size.func, ast.Attribute) and size.func.attr == "size" and not size.args:
        return "full"
    if len([d for d in dims if not isinstance(d, (ast.Tuple, ast.List))]) >= 2:
        return "full"
    if isinstance(size, ast.BinOp) and isinstance(size.op, ast.Mult):
        return "full"
    return "small"


# --------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------

def lint_source(source: str, *, filename: str = "<candidate>", dsl: str | None = None) -> list[Finding]:
    """All authoring-defect findings for one candidate source, sorted by line.

    ``dsl`` (``"triton"``, ``"tilelang"``, ``"torch"``) selects which kernel
    rules run; by default it is :func:`detect_dsl`'s answer. Host rules
    (``forward`` and its helpers) always run. A source that does not parse
    gives a single ``parse-error`` finding of severity ``info``.
    """
    if dsl is not None and dsl not in ("triton", "tilelang", "torch"):
        raise ValueError(f"lint_source: dsl must be 'triton', 'tilelang' or 'torch', not {dsl!r}")
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as e:
        return [Finding(
            "parse-error", "info", e.lineno, f"{filename} does not parse: {e.msg}",
            "fix the syntax error; no rule was checked",
        )]
    idx = ModuleIndex(tree)
    return sort_findings(_Linter(idx).run(dsl or _detect(idx)))


# -- lowered CUDA C ------------------------------------------------------------------------

_CU_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_CU_KERNEL = re.compile(
    r"__global__\s+void\s+(?:__launch_bounds__\(\s*(\d+)[^)]*\)\s*)?(\w+)\s*\(([^)]*)\)\s*\{"
)
_CU_FOR = re.compile(
    r"for\s*\(\s*(?:const\s+)?(?:unsigned\s+)?(?:int|long|int64_t|int32_t|uint32_t|size_t|long\s+long)\s+(\w+)\s*=\s*([^;]+);"
    r"\s*\1\s*<\s*([^;]+);[^)]*\)\s*\{"
)
_CU_CROSS = re.compile(r"AllReduce|__shfl|shfl_|atomic|warp_reduce|cub::|__reduce_|tl::gemm|wgmma|mma|cutlass", re.I)


def _match_brace(text: str, open_idx: int) -> int:
    depth = 0
    for i in range(open_idx, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return len(text)


def _cu_int(s: str) -> int | None:
    s = s.strip().strip("()")
    return int(s) if re.fullmatch(r"-?\d+", s) else None


def lint_cuda_source(cuda_src: str) -> list[Finding]:
    """Findings for CUDA C lowered from a TileLang kernel (``sm_*`` target).

    Rules: ``sequential-reduction`` (a loop of >= 64 or unknown trips folding
    a global-memory element into an accumulator per iteration, in a kernel
    with no warp shuffle / ``AllReduce`` / atomic / MMA), ``fp64-promotion``
    (``double`` in a kernel whose tensors are not fp64), ``tiny-tile``
    (blocks under 32 threads, one thread per block with loops, or a single
    warp walking a long loop). Lines are lines of ``cuda_src``.
    """
    text = _CU_COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), cuda_src)
    out: list[Finding] = []

    def line_of(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    for km in _CU_KERNEL.finditer(text):
        bounds, name, params = km.group(1), km.group(2), km.group(3)
        start = km.end() - 1
        end = _match_brace(text, start)
        body = text[start:end + 1]
        base = start
        ptrs = set(re.findall(r"\*\s*(?:__restrict__\s+)?(\w+)\s*(?:,|$)", params))
        threads = int(bounds) if bounds else (None if "threadIdx" in body else 1)
        cross = bool(_CU_CROSS.search(body))
        loops = []
        for lm in _CU_FOR.finditer(body):
            var, lo, hi = lm.group(1), lm.group(2), lm.group(3)
            lo_i, hi_i = _cu_int(lo), _cu_int(hi)
            trip = hi_i - lo_i if lo_i is not None and hi_i is not None else None
            bstart = lm.end() - 1
            bend = _match_brace(body, bstart)
            loops.append((var, trip, hi.strip(), body[bstart:bend + 1], base + lm.start()))
        seq = False
        if not cross:
            for var, trip, hi, lbody, pos in loops:
                if trip is not None and trip < 64:
                    continue
                loaded: dict[str, str] = {}  # local = X[... j ...]: the element read this iteration
                for dm in re.finditer(r"\b[A-Za-z_][\w:]*\s+(\w+)\s*=\s*([^;]+);", lbody):
                    rhs = dm.group(2)
                    if re.search(rf"\b{re.escape(var)}\b", rhs):
                        ptr = next((p for p in ptrs if re.search(rf"\b{re.escape(p)}\s*(\[|\+)", rhs)), None)
                        if ptr is not None:
                            loaded[dm.group(1)] = ptr
                for st in re.finditer(r"([\w.]+(?:\[[^\]=;]*\])?)\s*(=|\+=|-=)\s*([^;]+);", lbody):
                    tgt, op, rhs = st.group(1), st.group(2), st.group(3)
                    if re.search(rf"\b{re.escape(var)}\b", tgt):
                        continue
                    t = re.escape(tgt)
                    folds = (
                        rf"^\(*\s*{t}\s*[-+]"  # acc = (acc + x)
                        rf"|(max|min|fmaxf|fminf|fmax|fmin)\(\s*{t}\s*,"  # acc = max(acc, x)
                        rf"|[-+]\s*{t}\s*\)*$"  # acc = (x + acc)
                    )
                    if op == "=" and not re.search(folds, rhs.strip()):
                        continue
                    src = None
                    if re.search(rf"\b{re.escape(var)}\b", rhs):
                        src = next((p for p in ptrs if re.search(rf"\b{re.escape(p)}\s*(\[|\+)", rhs)), None)
                    if src is None:
                        src = next((loaded[n] for n in loaded if re.search(rf"\b{re.escape(n)}\b", rhs)), None)
                    if src is None:
                        continue
                    who = f"a block of {threads} thread{'s' if threads != 1 else ''}" if threads else "each thread"
                    out.append(_finding(
                        "sequential-reduction", "defect", line_of(pos),
                        f"CUDA kernel `{name}`: `for ({var} < {hi})` folds global `{src}` into `{tgt}` one element per "
                        f"iteration ({who}, no shuffle/AllReduce)",
                    ))
                    seq = True
                    break
                if seq:
                    break
        big = [lp for lp in loops if lp[1] is None or lp[1] >= 32]
        if not seq and threads is not None:
            if threads == 1 and big:
                out.append(_finding(
                    "tiny-tile", "defect", line_of(big[0][4]),
                    f"CUDA kernel `{name}` runs one thread per block over a loop of `{big[0][2]}`",
                ))
            elif 1 < threads < 32:
                out.append(_finding(
                    "tiny-tile", "defect", line_of(km.start()),
                    f"CUDA kernel `{name}`: __launch_bounds__({threads}) is under one warp",
                ))
            elif threads <= 32 and not cross and any(lp[1] is None or lp[1] >= 256 for lp in loops):
                out.append(_finding(
                    "tiny-tile", "warning", line_of(km.start()),
                    f"CUDA kernel `{name}`: {threads} threads per block walk a long serial loop",
                ))
        if not re.search(r"\bdouble\s*\*", params):
            dm = re.search(r"\bdouble\b", body)
            if dm:
                n = len(re.findall(r"\bdouble\b", body))
                out.append(_finding(
                    "fp64-promotion", "defect", line_of(base + dm.start()),
                    f"CUDA kernel `{name}` has {n} double-precision operation{'s' if n != 1 else ''} on non-fp64 data",
                ))
    return sort_findings(out)


# -- files ----------------------------------------------------------------------------------

def lint_path(path: str | Path) -> dict[str, list[Finding]]:
    """Lint a file or every ``.py`` (and lowered ``.cu``) file under a folder.

    Returns ``{path: findings}`` with paths as given (joined for folders),
    sorted; hidden folders and ``__pycache__`` are skipped.
    """
    p = Path(path)
    if p.is_dir():
        files = sorted(
            f for f in p.rglob("*")
            if f.is_file()
            and f.suffix in (".py", ".cu")
            and not any(part.startswith(".") or part == "__pycache__" for part in f.relative_to(p).parts)
        )
    else:
        files = [p]
    out: dict[str, list[Finding]] = {}
    for f in files:
        text = f.read_text(encoding="utf-8", errors="replace")
        out[str(f)] = lint_cuda_source(text) if f.suffix == ".cu" else lint_source(text, filename=str(f))
    return out
