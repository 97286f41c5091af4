"""Host-code rules: what ``ModelNew.forward`` and the helpers it reaches do per call.

``host-sync-in-forward`` (a device-to-host read or synchronize per call),
``fp64-promotion`` on the host side (``.double()``, ``torch.float64``),
``unfused-multipass`` (kernels on one execution path handing full-size data
through memory). The last needs a walk of the host function:
:class:`Flow` follows tensors abstractly (aliases keep their number,
allocations get a size class) through each ``if``/``else`` path and records
which values each kernel launch reads and produces. Which calls are launches
is the module context's answer (:meth:`ModuleContext.launch_of`).

Why here and not in the DSL modules: the host side is the same PyTorch code
whichever DSL the kernels are written in.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.diagnose._astutil import FuncDef, call_arg, func_params, snippet, str_const, walk_scope
from harness.diagnose.findings import Finding
from harness.diagnose.lint.rules import finding

if TYPE_CHECKING:
    from harness.diagnose.lint.module import ModuleContext

KIND = "host"

_ALLOC_LIKE = {"empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like", "clone"}
_ALLOC = {"empty", "zeros", "ones", "full", "empty_strided", "rand", "randn"}
_ALLOC_METHODS = {"new_empty", "new_zeros", "new_ones", "new_full", "new_tensor"}
_ALIAS_METHODS = {
    "view", "reshape", "contiguous", "flatten", "unsqueeze", "squeeze", "t", "transpose", "permute", "expand",
    "expand_as", "view_as", "as_strided", "narrow", "select", "to", "float", "half", "bfloat16", "detach",
    "unflatten", "movedim", "reshape_as", "cuda",
}
_SYNC_METHODS = {"item", "cpu", "tolist", "numpy"}


def host_findings(ctx: ModuleContext) -> list[Finding]:
    """Every host rule on ``forward`` and each helper it reaches."""
    out: list[Finding] = []
    for fn, owner in ctx.hosts:
        out += _host_sync(ctx, fn)
        out += _host_fp64(ctx, fn)
        out += _multipass(ctx, fn, owner)
    return out


def _host_sync(ctx: ModuleContext, fn: FuncDef) -> list[Finding]:
    out = []
    q = ctx.idx.imports.qual
    for n in walk_scope(fn):
        if not isinstance(n, ast.Call):
            continue
        what = None
        cq = q(n.func) or ""
        if cq in ("torch.cuda.synchronize", "torch.cuda.current_stream.synchronize", "torch.synchronize"):
            what = "torch.cuda.synchronize()"
        elif isinstance(n.func, ast.Attribute):
            a = n.func.attr
            if a in _SYNC_METHODS and not n.args and not ctx.idx.imports.is_module_rooted(n.func):
                if not _host_tensor(ctx, n.func.value):
                    what = f".{a}()"
            elif a == "synchronize":
                what = f"{snippet(n.func, 40)}()"
            elif a == "to" and not ctx.idx.imports.is_module_rooted(n.func):
                dev = call_arg(n, 0, "device")
                if str_const(dev) == "cpu" or (
                    isinstance(dev, ast.Call) and str_const(dev.args[0] if dev.args else None) == "cpu"
                ):
                    what = ".to('cpu')"
        if what:
            out.append(finding(
                "host-sync-in-forward", KIND, "defect", n.lineno,
                f"`{fn.name}` calls {what} (`{snippet(n, 50)}`), which waits for the GPU on every call",
            ))
    return out


def _host_tensor(ctx: ModuleContext, e: ast.AST) -> bool:
    """``e`` is built on the CPU (``torch.tensor(shape).prod()``): reading it back does not sync."""
    while True:
        if isinstance(e, ast.Call):
            q = ctx.idx.imports.qual(e.func) or ""
            if q.startswith("torch.") and q.count(".") == 1:
                dev = next((k.value for k in e.keywords if k.arg == "device"), None)
                return dev is None or str_const(dev) == "cpu"
            if isinstance(e.func, ast.Attribute) and not ctx.idx.imports.is_module_rooted(e.func):
                e = e.func.value
                continue
            return False
        if isinstance(e, (ast.Subscript, ast.Attribute)):
            e = e.value
            continue
        return False


def _host_fp64(ctx: ModuleContext, fn: FuncDef) -> list[Finding]:
    q = ctx.idx.imports.qual
    for n in walk_scope(fn):
        hit = None
        if isinstance(n, ast.Attribute) and (q(n) or "") in ("torch.float64", "torch.double", "numpy.float64"):
            hit = snippet(n)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "double" and not n.args:
            hit = snippet(n, 40)
        elif isinstance(n, ast.Constant) and n.value in ("float64", "fp64"):
            hit = repr(n.value)
        if hit and not isinstance(ctx.idx.parents.get(n), (ast.Compare, ast.Dict)) and not isinstance(
            ctx.idx.parents.get(ctx.idx.parents.get(n)), ast.Compare
        ):
            return [finding("fp64-promotion", KIND, "defect", n.lineno, f"`{fn.name}` promotes to float64 (`{hit}`)")]
    return []


def _multipass(ctx: ModuleContext, fn: FuncDef, owner: ast.ClassDef | None) -> list[Finding]:
    """Several kernels on one path handing data through memory.

    Per execution path: *defect* when >= 3 kernels run and either the
    same input is re-read by >= 2 of them with a value passed between
    them (a multi-pass norm/softmax), or >= 2 full-size intermediates
    chain through memory (an unfused elementwise tail); *warning* for
    the two-kernel versions (a stats pass + apply pass, a GEMM and a
    separate epilogue), which are sometimes the right split.
    """
    flow = Flow(ctx, fn, owner)
    flow.run()
    best: tuple[int, Finding] | None = None
    for path in flow.paths:
        f = _judge_path(fn, flow, path.events)
        if f is not None:
            rank = 2 if f.severity == "defect" else 1
            if best is None or rank > best[0]:
                best = (rank, f)
    return [best[1]] if best else []


def _judge_path(fn: FuncDef, flow: "Flow", events: list[Event]) -> Finding | None:
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
        return finding(
            "unfused-multipass", KIND, "defect" if total >= 3 else "warning", events[0].line,
            f"`{fn.name}` launches {total} kernels ({labels}) that each re-read `{flow.label[multi[0]]}` and "
            f"pass `{flow.label[flows[0][0]]}` between them",
        )
    if full:
        v, i, j = full[0]
        return finding(
            "unfused-multipass", KIND, "defect" if total >= 3 and len(full_values) >= 2 else "warning", events[0].line,
            f"`{fn.name}` launches {total} kernels ({labels}); full-size intermediate `{flow.label[v]}` goes "
            f"from `{events[i].label}` to `{events[j].label}` through memory",
        )
    return None


# -- the abstract walk of a host function ------------------------------------

@dataclass
class Event:
    """One kernel launch (or helper call that launches) on a path: where, how many kernels, what it touches."""

    line: int
    label: str
    count: int
    reads: set[int] = field(default_factory=set)
    produced: int | None = None


@dataclass
class Path:
    """One execution path through a host function (``if``/``else`` fork paths)."""

    env: dict[str, int] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    returns: list[int | None] = field(default_factory=list)
    done: bool = False  # returned
    aborted: bool = False  # raised: not a path a timed call takes

    def fork(self) -> "Path":
        return Path(dict(self.env), list(self.events), list(self.returns), self.done, self.aborted)


MAX_PATHS = 32


class Flow:
    """Abstract walk of one host function: which tensors each kernel launch touches.

    Values are numbered; aliases (``x.view(...)``, ``x.contiguous()``) keep
    the number, allocations get a kind: ``full`` (``empty_like``, a 2-D+
    shape), ``small`` (1-D, e.g. per-row statistics), ``input`` (a parameter).
    ``if``/``else`` branches fork the walk, so launches in exclusive branches
    (a fast path and a fallback) never count as one sequence; loops run once.
    """

    def __init__(self, ctx: ModuleContext, fn: FuncDef, owner: ast.ClassDef | None) -> None:
        self.ctx = ctx
        self.fn = fn
        self.owner = owner
        self.kind: dict[int, str] = {}
        self.label: dict[int, str] = {}
        self.paths: list[Path] = []

    def new(self, kind: str, label: str) -> int:
        v = len(self.kind)
        self.kind[v] = kind
        self.label[v] = label
        return v

    def run(self) -> None:
        start = Path()
        for prm in func_params(self.fn):
            if prm.arg not in ("self", "ctx", "cls"):
                start.env[prm.arg] = self.new("input", prm.arg)
        self.paths = [p for p in self.block(self.fn.body, [start]) if not p.aborted]

    # -- statements ------------------------------------------------------------------

    def block(self, stmts: list[ast.stmt], paths: list[Path]) -> list[Path]:
        for st in stmts:
            live = [p for p in paths if not p.done]
            if not live:
                break
            paths = [p for p in paths if p.done] + self.stmt(st, live)
        return paths[:MAX_PATHS]

    def stmt(self, s: ast.stmt, paths: list[Path]) -> list[Path]:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return paths
        if isinstance(s, ast.If):
            for p in paths:
                self.expr(s.test, p)
            taken = self.block(s.body, [p.fork() for p in paths])
            other = self.block(s.orelse, [p.fork() for p in paths]) if s.orelse else paths
            return (taken + other)[:MAX_PATHS]
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

    def bind(self, target: ast.AST, v: int | None, p: Path) -> None:
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

    def expr(self, e: ast.AST | None, p: Path) -> int | None:
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

    def call(self, c: ast.Call, p: Path) -> int | None:
        recv = None
        if isinstance(c.func, ast.Attribute):
            recv = self.expr(c.func.value, p)
        elif not isinstance(c.func, ast.Name):
            self.expr(c.func, p)
        arg_vals = [self.expr(a, p) for a in c.args]
        kw_vals = [self.expr(k.value, p) for k in c.keywords]
        launch = self.ctx.launch_of(c, self.fn, self.owner)
        if launch is not None:
            label, count, full = launch
            ev = Event(line=c.lineno, label=label, count=count, reads={v for v in arg_vals + kw_vals if v is not None})
            p.events.append(ev)
            if full:
                ev.produced = self.new("full", f"<{label} output>")
                return ev.produced
            return None
        q = self.ctx.idx.imports.qual(c.func) or ""
        short = q.rsplit(".", 1)[-1]
        if q.startswith("torch.") and short in _ALLOC_LIKE:
            src = arg_vals[0] if arg_vals else None
            return self.new("small" if src is not None and self.kind.get(src) == "small" else "full", "<alloc>")
        if q.startswith("torch.") and short in _ALLOC:
            return self.new(_shape_kind(c), "<alloc>")
        if isinstance(c.func, ast.Attribute) and not self.ctx.idx.imports.is_module_rooted(c.func):
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
