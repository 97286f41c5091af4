"""Authoring-defect diagnosis: static rules for slow Triton / TileLang kernels.

A candidate can be correct and still leave most of the GPU idle because of
how it was written: one thread walking a whole row, a 3-kernel layernorm, a
host sync in ``forward``. These patterns are visible in the source, so the
lint finds them in the ``ast`` of the candidate (never importing it) and
names the fix. The findings let screening tell an *authoring defect*
(``Verdict.AUTHORING_DEFECT``: fixable in the kernel) from a structural
residual. The rules are advice, not a measurement: their precision and
recall on public kernels they were not tuned on are in ``docs/lint.md``.

Public API (what the pipeline, the runner and ``kernelgate lint`` use):
:func:`lint_source`, :func:`lint_cuda_source`, :func:`lint_path`,
:func:`detect_dsl`, :data:`RULES`, :data:`HINTS`, :data:`REGISTRY`.

Layout, shared pieces first:

* :mod:`.registry` -- :class:`~.registry.Rule` records and the registry
  (duplicate ids refused, unknown ids get a "did you mean");
  :mod:`.rules` -- the catalog: every rule's kinds, severities, hint,
  contract and fixtures;
* :mod:`.loops`, :mod:`.indices` -- AST helpers for loops/accumulators and
  for the index analysis of matrix products;
* :mod:`.module` -- the per-candidate context (kernels, kernel handles,
  launches, host functions) that runs the rule modules;
* :mod:`.triton_kernel` / :mod:`.triton` / :mod:`.triton_matmul` -- the
  Triton kernel model, its rules, its tensor-core rule;
* :mod:`.tilelang_kernel` / :mod:`.tilelang` / :mod:`.tilelang_matmul` --
  the same for TileLang;
* :mod:`.host` -- rules on the PyTorch side (``forward`` and its helpers);
* :mod:`.cuda` -- :func:`lint_cuda_source`, for TileLang lowered to CUDA C.

Which kernel rules run is decided by the candidate's DSL label, the one
:func:`harness.candidates.dsl.detect_dsl` gives discovery too.
"""

from __future__ import annotations

import ast
from pathlib import Path

from harness import astparse
from harness.candidates.dsl import DSLS, KERNEL_DSLS, DslScan, detect_dsl, scan_dsl
from harness.diagnose._astutil import ModuleIndex
from harness.diagnose.findings import Finding, format_findings, sort_findings
from harness.diagnose.lint.cuda import lint_cuda_source
from harness.diagnose.lint.module import ModuleContext
from harness.diagnose.lint.registry import KINDS, REGISTRY, Rule, UnknownRuleError
from harness.diagnose.lint.rules import HINTS, PARSE_ERROR, RULES

__all__ = [
    "Finding",
    "HINTS",
    "KINDS",
    "REGISTRY",
    "RULES",
    "Rule",
    "UnknownRuleError",
    "detect_dsl",
    "format_findings",
    "lint_cuda_source",
    "lint_path",
    "lint_source",
    "lint_source_kind",
]


def lint_source(source: str, *, filename: str = "<candidate>", dsl: str | None = None) -> list[Finding]:
    """All authoring-defect findings for one candidate source, sorted by line.

    ``dsl`` is the candidate's DSL label (one of
    :data:`harness.candidates.dsl.DSLS`); by default :func:`detect_dsl`'s
    answer, the label discovery gives the same file. ``triton`` /
    ``tilelang`` run that DSL's kernel rules -- and, in a file that defines
    kernels of both DSLs, both DSLs' -- ``torch`` / ``unknown`` run none.
    Host rules (``forward`` and its helpers) always run. A source that does
    not parse gives a single ``parse-error`` finding of severity ``info``.
    Raises ``ValueError`` for a ``dsl`` that is not a label.
    """
    if dsl is not None and dsl not in DSLS:
        raise ValueError(f"lint_source: dsl must be one of {', '.join(map(repr, DSLS))}, not {dsl!r}")
    tree = _parse(source, filename)
    if isinstance(tree, Finding):
        return [tree]
    scan = scan_dsl(source)
    ctx = ModuleContext(ModuleIndex(tree))
    return sort_findings(ctx.run(_kernel_rule_dsls(dsl or scan.dsl, scan)))


def lint_source_kind(source: str, kind: str, *, filename: str = "<candidate>") -> list[Finding]:
    """Findings of one kind's checks only (``triton``, ``tilelang``, ``host``, ``cuda``), whatever the DSL label.

    For tests and audits that ask which checks produce a finding (the
    registry test verifies each rule's declared kinds this way). Raises
    ``ValueError`` for a kind not in :data:`KINDS`.
    """
    if kind not in KINDS:
        raise ValueError(f"lint_source_kind: kind must be one of {KINDS}, not {kind!r}")
    if kind == "cuda":
        return lint_cuda_source(source)
    tree = _parse(source, filename)
    if isinstance(tree, Finding):
        return [tree]
    ctx = ModuleContext(ModuleIndex(tree))
    return sort_findings(ctx.run(frozenset({kind}) & frozenset(KERNEL_DSLS), host=kind == "host"))


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


def _parse(source: str, filename: str) -> ast.Module | Finding:
    """The module's ``ast``, or the ``parse-error`` finding that replaces every rule."""
    try:
        return astparse.parse(source, filename=filename)
    except (SyntaxError, ValueError) as e:  # ValueError: NUL bytes (Python < 3.12)
        msg = e.msg if isinstance(e, SyntaxError) else str(e)
        return Finding(PARSE_ERROR, "info", getattr(e, "lineno", None), f"{filename} does not parse: {msg}",
                       "fix the syntax error; no rule was checked")


def _kernel_rule_dsls(label: str, scan: DslScan) -> frozenset[str]:
    """Which DSLs' kernel rules run for a candidate labelled ``label``."""
    if label not in KERNEL_DSLS:
        return frozenset()
    if scan.kernel_dsls == frozenset(KERNEL_DSLS):  # kernels of both DSLs: check them all
        return scan.kernel_dsls
    return frozenset({label})
