"""Find problem files and index them by id.

One broken problem file never stops the others from loading: its error is
collected in :attr:`Registry.errors` and shown by the CLI. Duplicate ids are
refused (two files would otherwise silently shadow each other), and an unknown
id gets a "did you mean" suggestion.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.problems.loader import Problem, ProblemError, load_problem

BUNDLED_PROBLEMS = Path(__file__).resolve().parents[2] / "problems"


class UnknownProblem(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return self.args[0]


@dataclass
class Registry:
    problems: dict[str, Problem] = field(default_factory=dict)
    errors: list[ProblemError] = field(default_factory=list)

    def get(self, pid: str) -> Problem:
        if pid in self.problems:
            return self.problems[pid]
        close = difflib.get_close_matches(pid, list(self.problems), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise UnknownProblem(f"unknown problem '{pid}'{hint} ({len(self.problems)} problems loaded; "
                             "'kernelgate problems list' shows them)")

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


def load_registry(root: str | Path | None = None, *, overrides: dict[str, Any] | None = None) -> Registry:
    """Load every problem under ``root`` (default: the bundled suite)."""
    reg = Registry()
    origin: dict[str, Path] = {}
    for path in problem_files(Path(root) if root else BUNDLED_PROBLEMS):
        try:
            prob = load_problem(path, overrides=overrides)
        except ProblemError as exc:
            reg.errors.append(exc)
            continue
        if prob.id in reg.problems:
            reg.errors.append(ProblemError(path, "id", f"duplicate problem id '{prob.id}' (already defined by {origin[prob.id]}); "
                                           "rename the file or set KERNELGATE['id']"))
            continue
        reg.problems[prob.id] = prob
        origin[prob.id] = path
    return reg


def parse_set_options(items: list[str] | None) -> dict[str, Any]:
    """Parse ``--set NAME=VALUE`` options into typed values (int, float, else str)."""
    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise ValueError(f"--set {item!r}: expected NAME=VALUE, e.g. --set N=256")
        key, value = item.split("=", 1)
        key = key.strip()
        if not key.isidentifier():
            raise ValueError(f"--set {item!r}: '{key}' is not a Python identifier")
        for conv in (int, float):
            try:
                out[key] = conv(value)
                break
            except ValueError:
                continue
        else:
            out[key] = value
    return out
