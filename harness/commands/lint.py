"""``kernelgate lint FILE_OR_DIR``: static defect diagnosis and anti-cheat scan, no GPU needed."""

from __future__ import annotations

import argparse
from pathlib import Path


def cmd_lint(args: argparse.Namespace) -> int:
    from harness.diagnose.anticheat import scan_source
    from harness.diagnose.lint import format_findings, lint_source

    files: list[Path] = []
    for t in args.targets:
        p = Path(t)
        if p.is_dir():
            files += sorted(x for x in p.glob("*.py") if not x.name.startswith("_"))
        elif p.is_file():
            files.append(p)
        else:
            raise SystemExit(f"kernelgate: error: {p}: no such file or folder")
    n_def = n_fail = 0
    for f in files:
        src = f.read_text(encoding="utf-8", errors="replace")
        findings = lint_source(src, filename=str(f)) + (scan_source(src, filename=str(f)) if not args.no_anticheat else [])
        n_def += sum(x.severity == "defect" for x in findings)
        n_fail += sum(x.severity == "fail" for x in findings)
        if findings:
            print(format_findings(findings, path=str(f)))
        elif args.verbose:
            print(f"{f}: clean")
    print(f"\n{len(files)} file(s): {n_def} likely authoring defect(s), {n_fail} anti-cheat failure(s)")
    return 1 if (n_fail or (args.strict and n_def)) else 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lint", help="static defect diagnosis of candidate files (no GPU)",
                       description="Name likely authoring defects (sequential reductions, fp64 promotion, casts in inner "
                                   "loops, one element per program, unfused multi-pass kernels, tiny tiles) and reward-hack "
                                   "patterns in candidate sources, with a one-line fix hint each. Advice, not a measurement.")
    p.add_argument("targets", nargs="+", metavar="FILE_OR_DIR")
    p.add_argument("--strict", action="store_true", help="exit 1 when any defect is found")
    p.add_argument("--no-anticheat", action="store_true", help="skip the reward-hack scan")
    p.add_argument("-v", "--verbose", action="store_true")
    p.set_defaults(func=cmd_lint)
