"""The one record both static analyzers emit, and its CLI rendering.

A :class:`Finding` is what :mod:`harness.diagnose.lint` (authoring defects)
and :mod:`harness.diagnose.anticheat` (reward-hack screening) say about one
place in a candidate's source. It is deliberately small and flat so that it
can ride inside a result record as JSON and be grepped in a terminal.

Severities, by analyzer:

* lint: ``defect`` (a known slow pattern that a fix removes), ``warning``
  (suspicious, often but not always slow), ``info`` (could not judge, e.g.
  the source does not parse);
* anticheat: ``fail`` (a clear cheat: the candidate must not be timed),
  ``warning`` (suspicious; a human should look).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

SEVERITIES = ("fail", "defect", "warning", "info")
"""All severities, most serious first (used to sort and to validate)."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One diagnosis at one place of a candidate source."""

    rule: str
    """Stable rule id, e.g. ``sequential-reduction``; never reworded."""
    severity: str
    """One of :data:`SEVERITIES`."""
    line: int | None
    """1-based source line; ``None`` when the finding has no single place."""
    message: str
    """One line naming what was found (kernel, variable, construct)."""
    hint: str
    """One line saying how to fix it."""

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"Finding: severity {self.severity!r} not in {SEVERITIES}")

    def to_dict(self) -> dict:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "line": self.line,
            "message": self.message,
            "hint": self.hint,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "Finding":
        known = {"rule", "severity", "line", "message", "hint"}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"Finding: unknown field(s) {sorted(unknown)}; known: {sorted(known)}")
        return cls(**d)


def _sort_key(f: Finding) -> tuple:
    return (f.line if f.line is not None else 0, SEVERITIES.index(f.severity), f.rule, f.message)


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Findings by line, then most serious first; duplicates (same rule, line, message) dropped."""
    seen: set[tuple] = set()
    out: list[Finding] = []
    for f in sorted(findings, key=_sort_key):
        key = (f.rule, f.line, f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def format_findings(
    findings: Iterable[Finding] | Mapping[str, Iterable[Finding]],
    path: str = "<candidate>",
) -> str:
    """Render findings one per line as ``path:line: [rule] message -- hint``.

    ``findings`` is either a list (all from ``path``) or a mapping from path to
    list, as :func:`harness.diagnose.lint.lint_path` returns. A finding without
    a line renders as ``path: [rule] ...``. Returns ``""`` when there is
    nothing to print (no trailing newline either way).
    """
    if isinstance(findings, Mapping):
        groups = [(str(p), list(fs)) for p, fs in sorted(findings.items(), key=lambda kv: str(kv[0]))]
    else:
        groups = [(path, list(findings))]
    lines: list[str] = []
    for p, fs in groups:
        for f in sort_findings(fs):
            where = f"{p}:{f.line}:" if f.line is not None else f"{p}:"
            lines.append(f"{where} [{f.rule}] {f.message} -- {f.hint}")
    return "\n".join(lines)
