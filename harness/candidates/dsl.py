"""Which DSL a candidate is written in: the one answer discovery, the runner and the lint share.

``kernelgate run`` labels each candidate with a DSL (it picks the execution
path: the Triton interpreter or TileLang lowering on a CPU machine, the
launch counter's expectation), and ``kernelgate lint`` picks which kernel
rules to run by the same label; both call :func:`detect_dsl` (through
:func:`scan_dsl`), so one file cannot be classified two ways.

The decision, in order:

1. **Header.** A line ``# kernelgate: dsl=NAME`` anywhere in the file, with
   ``NAME`` one of :data:`DSLS`, wins: the author said so. A header naming
   anything else is ignored (the rules below decide).
2. **Kernels.** Otherwise, what the file *defines*: a function decorated
   with ``triton.jit`` is a Triton kernel; a ``@tilelang.jit`` /
   ``@tilelang.autotune`` / ``@tilelang.lazy_jit`` function, a
   ``@T.prim_func`` function or a ``with T.Kernel(...)`` block is a TileLang
   kernel (import aliases resolved: ``from triton import jit``, ``import
   tilelang.language as T``). A file defining kernels of one DSL is that
   DSL, whatever else it imports (a TileLang candidate that imports triton
   for ``triton.cdiv`` is TileLang).
3. **Both.** A file defining kernels of both DSLs is ``tilelang``: on a
   machine without a GPU its TileLang kernels need the lowering path (the
   Triton interpreter cannot run them), and on a GPU both run either way.
   The lint checks the kernels of both DSLs in such a file
   (:attr:`DslScan.kernel_dsls` says which), so nothing goes unchecked.
4. **Imports.** A file defining no kernel the rules above recognise is
   classified by its imports: ``tilelang``, else ``triton``, else ``torch``
   (PyTorch only: no DSL kernel at all, so the lint runs only its host
   rules), else ``unknown``. A file that does not parse is classified the
   same way from its ``import``/``from`` lines.

Nothing here imports or runs candidate code: it reads the text and its
``ast``. Importing this module does no work.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from harness import astparse

DSLS = ("triton", "tilelang", "torch", "unknown")
"""Every label :func:`detect_dsl` can return (and a manifest or header may declare)."""

KERNEL_DSLS = ("triton", "tilelang")
"""The labels whose candidates define GPU kernels the lint has rules for."""

DSL_HEADER = re.compile(r"^#\s*kernelgate:\s*dsl\s*=\s*(\w+)", re.M)
"""The ``# kernelgate: dsl=NAME`` header line (group 1: ``NAME``)."""

_IMPORT_LINE = {
    name: re.compile(rf"^\s*(?:import|from)\s+{name}\b", re.M) for name in ("tilelang", "triton", "torch")
}
_TILELANG_DECORATORS = ("jit", "autotune", "lazy_jit", "prim_func")
_TILELANG_KERNEL_CONTEXTS = ("Kernel", "ClusterKernel")


@dataclass(frozen=True, slots=True)
class DslScan:
    """What :func:`scan_dsl` found in one source, and the label it decided on."""

    dsl: str
    """The label, one of :data:`DSLS`."""
    reason: str
    """Which rule decided: ``header``, ``kernels``, ``kernels-both`` (kernels of both DSLs),
    ``imports``, ``imports-unparsable`` (the source does not parse), ``none`` (nothing to go on)."""
    kernel_dsls: frozenset[str]
    """DSLs of :data:`KERNEL_DSLS` whose kernels the file defines (empty when it does not parse)."""
    imported: frozenset[str]
    """Which of ``triton``, ``tilelang``, ``torch`` the file imports (at any depth)."""

    def to_dict(self) -> dict:
        return {"dsl": self.dsl, "reason": self.reason, "kernel_dsls": sorted(self.kernel_dsls),
                "imported": sorted(self.imported)}

    @classmethod
    def from_dict(cls, d: dict) -> "DslScan":
        known = {"dsl", "reason", "kernel_dsls", "imported"}
        if set(d) != known:
            raise ValueError(f"DslScan: fields {sorted(d)} do not match {sorted(known)}")
        if d["dsl"] not in DSLS:
            raise ValueError(f"DslScan: field 'dsl' is {d['dsl']!r}; expected one of {DSLS}")
        return cls(d["dsl"], d["reason"], frozenset(d["kernel_dsls"]), frozenset(d["imported"]))


def header_dsl(source: str) -> str | None:
    """The DSL a ``# kernelgate: dsl=NAME`` header declares, if ``NAME`` is one of :data:`DSLS`."""
    m = DSL_HEADER.search(source)
    return m.group(1) if m and m.group(1) in DSLS else None


def detect_dsl(source: str) -> str:
    """The candidate's DSL label (one of :data:`DSLS`); the rules are in the module docstring."""
    return scan_dsl(source).dsl


def scan_dsl(source: str) -> DslScan:
    """Classify ``source`` (see the module docstring for the order of the rules); never raises on bad input."""
    header = header_dsl(source)
    try:
        tree = astparse.parse(source)
    except (SyntaxError, ValueError):  # ValueError: NUL bytes in the source
        imported = frozenset(n for n, rx in _IMPORT_LINE.items() if rx.search(source))
        if header:
            return DslScan(header, "header", frozenset(), imported)
        return DslScan(_by_imports(imported), "imports-unparsable" if imported else "none", frozenset(), imported)
    aliases, roots = _imports(tree)
    imported = roots & {"triton", "tilelang", "torch"}
    kernels = _kernel_dsls(tree, aliases)
    if header:
        return DslScan(header, "header", kernels, imported)
    if kernels == frozenset(KERNEL_DSLS):
        return DslScan("tilelang", "kernels-both", kernels, imported)
    if kernels:
        return DslScan(next(iter(kernels)), "kernels", kernels, imported)
    return DslScan(_by_imports(imported), "imports" if imported else "none", kernels, imported)


def _by_imports(imported: frozenset[str]) -> str:
    for name in ("tilelang", "triton", "torch"):
        if name in imported:
            return name
    return "unknown"


def _imports(tree: ast.AST) -> tuple[dict[str, str], frozenset[str]]:
    """``(local name -> dotted path it stands for, top-level modules imported)`` from every import.

    Imports inside functions count too: candidates often import lazily.
    """
    aliases: dict[str, str] = {}
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                root = a.name.split(".")[0]
                roots.add(root)
                if a.asname:
                    aliases[a.asname] = a.name
                else:
                    aliases.setdefault(root, root)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            roots.add(node.module.split(".")[0])
            for a in node.names:
                if a.name != "*":
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    return aliases, frozenset(roots)


def _qual(node: ast.AST, aliases: dict[str, str]) -> str:
    """Dotted name of a ``Name``/``Attribute`` chain (the callee for a call), aliases resolved; ``""`` otherwise."""
    if isinstance(node, ast.Call):
        node = node.func
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    parts.append(aliases.get(node.id, node.id))
    return ".".join(reversed(parts))


def _kernel_dsls(tree: ast.AST, aliases: dict[str, str]) -> frozenset[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in node.decorator_list:
                q = _qual(d, aliases)
                last = q.rsplit(".", 1)[-1]
                if q.startswith("triton.") and last == "jit":
                    found.add("triton")
                elif q.startswith("tilelang.") and last in _TILELANG_DECORATORS:
                    found.add("tilelang")
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                q = _qual(item.context_expr, aliases)
                if q.startswith("tilelang.") and q.rsplit(".", 1)[-1] in _TILELANG_KERNEL_CONTEXTS:
                    found.add("tilelang")
    return frozenset(found)
