"""Find problem files and index them by id.

One broken problem file never stops the others from loading: its error is
collected in :attr:`Registry.errors` and shown by the CLI. Duplicate ids are
refused (two files would otherwise silently shadow each other), and an unknown
id gets a "did you mean" suggestion.

``--set NAME=VALUE`` over a folder applies to the files that have the
constant; the others are skipped and :attr:`Registry.warnings` says so once
per name. ``--set PROBLEM:NAME=VALUE`` applies to one problem, and naming a
problem that is not loaded is an error.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.problems.loader import Problem, ProblemError, load_problem
from harness.problems.sizes import SizeOverrides, parse_set_items

BUNDLED_PROBLEMS = Path(__file__).resolve().parents[2] / "problems"


class UnknownProblem(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return self.args[0]


def did_you_mean(name: str, known: list[str], n: int = 3) -> list[str]:
    """Up to ``n`` known names close to ``name`` (difflib ratio >= 0.5), best first."""
    return difflib.get_close_matches(name, known, n=n, cutoff=0.5)


@dataclass
class Registry:
    problems: dict[str, Problem] = field(default_factory=dict)
    errors: list[ProblemError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    """Things worth saying once that did not stop a problem from loading (skipped ``--set`` names)."""

    def get(self, pid: str) -> Problem:
        if pid in self.problems:
            return self.problems[pid]
        close = did_you_mean(pid, list(self.problems))
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise UnknownProblem(f"unknown problem '{pid}'{hint} ({len(self.problems)} problems loaded; "
                             "'kernelgate problems list' shows them)")

    def levels(self) -> dict[str, int | None]:
        """``{problem id: KernelBench level or None}``: what candidate naming needs to map run files."""
        return {pid: p.level for pid, p in self.problems.items()}

    def __contains__(self, pid: str) -> bool:
        return pid in self.problems

    def __iter__(self):
        return iter(sorted(self.problems.values(), key=lambda p: (p.category, p.id)))

    def __len__(self) -> int:
        return len(self.problems)


def problem_files(root: Path) -> list[Path]:
    """Problem files under ``root`` (a file or a folder, searched recursively)."""
    root = Path(root)
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise FileNotFoundError(f"--problems {root}: no such file or folder")
    return sorted(p for p in root.rglob("*.py") if not p.name.startswith(("_", ".")) and "__pycache__" not in p.parts)


def load_registry(root: str | Path | None = None, *, overrides: SizeOverrides | dict[str, Any] | None = None,
                  precision: str = "float32", derive_budget: float | None = None) -> Registry:
    """Load every problem under ``root`` (default: the bundled suite).

    ``overrides`` is what :func:`parse_set_options` returns (or a plain dict
    of common overrides). ``precision`` is the dtype of the default workload
    of plain KernelBench files; ``derive_budget`` the seconds one derivation
    may take (see :func:`harness.problems.loader.load_problem`).
    """
    ov = SizeOverrides.coerce(overrides)
    reg = Registry()
    origin: dict[str, Path] = {}
    files = problem_files(Path(root) if root else BUNDLED_PROBLEMS)
    strict = len(files) == 1 and Path(root or BUNDLED_PROBLEMS).is_file()
    skipped: dict[str, list[str]] = {}
    for path in files:
        try:
            prob = load_problem(path, overrides=ov, precision=precision, strict_overrides=strict,
                                derive_budget=derive_budget)
        except ProblemError as exc:
            reg.errors.append(exc)
            continue
        if prob.id in reg.problems:
            reg.errors.append(ProblemError(path, "id", f"duplicate problem id '{prob.id}' (already defined by {origin[prob.id]}); "
                                           "rename the file or set KERNELGATE['id']"))
            continue
        reg.problems[prob.id] = prob
        origin[prob.id] = path
        for name in prob.skipped_overrides:
            skipped.setdefault(name, []).append(prob.id)
    loaded = len(reg.problems)
    for name, pids in skipped.items():
        shown = ", ".join(sorted(pids)[:5]) + (f", ... ({len(pids) - 5} more)" if len(pids) > 5 else "")
        if len(pids) == loaded:
            sizes = sorted({k for p in reg.problems.values() for k in p.workloads[0].params})
            close = did_you_mean(name, sizes)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            reg.warnings.append(f"--set {name}={ov.common[name]!r} applied to no problem: none of the {loaded} has a "
                                f"constant '{name}'{hint}")
        else:
            reg.warnings.append(f"--set {name}={ov.common[name]!r} not applied to {len(pids)} of {loaded} problems, "
                                f"which have no constant '{name}': {shown}")
    stems = {p.stem for p in files}
    for scope, values in ov.scoped.items():
        if scope not in reg.problems and scope not in stems:
            close = did_you_mean(scope, list(reg.problems))
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            for name in values:
                reg.errors.append(ProblemError("--set", f"{scope}:{name}", f"no problem '{scope}' is loaded{hint}"))
    return reg


def parse_set_options(items: list[str] | None) -> SizeOverrides:
    """Parse ``--set NAME=VALUE`` / ``--set PROBLEM:NAME=VALUE`` options (values as Python literals, else text).

    Raises ValueError naming the malformed option. The result goes to
    :func:`load_registry` as ``overrides``.
    """
    return parse_set_items(items)
