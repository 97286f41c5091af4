"""Argument helpers shared by subcommands."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.problems.registry import BUNDLED_PROBLEMS


def add_problem_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--problems", metavar="PATH", default=None,
                   help="a problem file or a folder of them, e.g. KernelBench's level1/ (default: the bundled suite)")
    p.add_argument("--set", metavar="NAME=VALUE", action="append", dest="set_overrides", default=[],
                   help="override a size constant of the problem files for this run, e.g. --set N=256 (repeatable)")


def load_registry_from_args(args: argparse.Namespace, *, quiet: bool = False):
    from harness.problems.registry import load_registry, parse_set_options

    try:
        overrides = parse_set_options(args.set_overrides)
    except ValueError as exc:
        raise SystemExit(f"kernelgate: error: {exc}")
    try:
        reg = load_registry(args.problems or BUNDLED_PROBLEMS, overrides=overrides)
    except FileNotFoundError as exc:
        raise SystemExit(f"kernelgate: error: {exc}")
    if reg.errors and not quiet:
        for err in reg.errors:
            print(f"warning: problem not loaded: {err}", file=sys.stderr)
    return reg


def table(rows: list[list[str]], headers: list[str]) -> str:
    """A plain aligned text table (no dependency)."""
    widths = [len(h) for h in headers]
    for r in rows:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(str(c)))
    line = lambda cells: "  ".join(str(c).ljust(widths[i]) for i, c in enumerate(cells)).rstrip()
    out = [line(headers), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    return "\n".join(out)


def default_out() -> Path:
    return Path("runs") / "latest"


def add_results_arg(p: argparse.ArgumentParser) -> None:
    """``--results PATH...``: results folders (their results.jsonl) or .jsonl files."""
    p.add_argument("--results", nargs="+", required=True, metavar="PATH",
                   help="results folder(s) of 'kernelgate run --out' or results .jsonl file(s)")


def load_results_or_exit(paths: list[str]):
    """Every valid record of the given results files; exits with a message when a path or the records are missing."""
    from harness.results.store import load_results

    try:
        results = load_results(paths)
    except FileNotFoundError as exc:
        raise SystemExit(f"kernelgate: error: {exc}")
    if not results:
        raise SystemExit(f"kernelgate: error: no result records in {', '.join(paths)}")
    return results
