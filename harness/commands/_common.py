"""Argument helpers shared by subcommands."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.problems.registry import BUNDLED_PROBLEMS


def add_problem_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--problems", metavar="PATH", default=None,
                   help="a problem file or a folder of them, e.g. KernelBench's level1/ (default: the bundled suite)")
    p.add_argument("--set", metavar="[PROBLEM:]NAME=VALUE", action="append", dest="set_overrides", default=[],
                   help="override a size constant for this run, in every problem that has it (--set N=256) or in "
                        "one problem (--set 19_ReLU:dim=4096); derived constants follow; repeatable")
    p.add_argument("--precision", choices=("float32", "float16", "bfloat16"), default="float32",
                   help="dtype of the default workload of plain KernelBench files (their evaluator's fp32/fp16/bf16; "
                        "annotated problems declare their own workloads)")


def load_registry_from_args(args: argparse.Namespace, *, quiet: bool = False):
    from harness.problems.registry import load_registry, parse_set_options

    try:
        overrides = parse_set_options(args.set_overrides)
    except ValueError as exc:
        raise SystemExit(f"kernelgate: error: {exc}")
    try:
        reg = load_registry(args.problems or BUNDLED_PROBLEMS, overrides=overrides,
                            precision=getattr(args, "precision", "float32"))
    except FileNotFoundError as exc:
        raise SystemExit(f"kernelgate: error: {exc}")
    from harness.problems.sizes import override_mistakes

    mistakes = override_mistakes(overrides, reg)
    if mistakes:
        raise SystemExit("kernelgate: error: " + "\nkernelgate: error: ".join(mistakes))
    if not quiet:
        for err in reg.errors:
            print(f"warning: problem not loaded: {err}", file=sys.stderr)
        for note in getattr(reg, "warnings", ()):
            print(f"warning: {note}", file=sys.stderr)
    return reg


def table(rows: list[list[str]], headers: list[str], *, wrap: dict[str, int] | None = None) -> str:
    """A plain aligned text table (no dependency).

    ``wrap`` maps a header to a width: that column's cells are word-wrapped
    onto continuation lines instead of being cut (use it for error texts,
    together with :func:`error_lines`). Cells may also hold ``\\n``.
    """
    from harness.report._text import table as text_table

    widths = {headers.index(h): w for h, w in (wrap or {}).items()}
    return text_table(rows, headers, wrap_widths=widths)


def error_lines(error, width: int = 60, *, where: str = "the results file") -> str:
    """An :class:`~harness.records.ErrorInfo` for a table cell: ``Type: first line``, word-wrapped to ``width``.

    Never cut mid-word; when the message has more lines (compiler logs,
    tracebacks) a last line says where the whole text is (``where``, e.g. the
    results file or the report). Empty for ``None``.
    """
    from harness.report._text import first_line

    if error is None:
        return ""
    more = f"(more: {where})" if (len(str(error.message).strip().splitlines()) > 1 or error.traceback_tail) else ""
    return "\n".join(first_line(f"{error.type}: {error.message}", width, more))


def default_out() -> Path:
    return Path("runs") / "latest"


def add_results_arg(p: argparse.ArgumentParser) -> None:
    """``--results PATH...``: results folders (their results.jsonl) or .jsonl files; default ``runs/latest``."""
    p.add_argument("--results", nargs="+", default=None, metavar="PATH",
                   help="results folder(s) of 'kernelgate run --out' or results .jsonl file(s) "
                        f"(default: {default_out()}, where 'kernelgate run' writes unless given --out)")


def results_paths(args: argparse.Namespace) -> list[str]:
    """The ``--results`` paths of ``args``, or the default folder when none were given."""
    return list(args.results) if args.results else [str(default_out())]


def load_results_or_exit(paths: list[str] | None):
    """Every valid record of the given results files (``None``: the default ``runs/latest``).

    Exits with a message naming the path and the fix when a path or the records are missing.
    """
    from harness.results.store import load_results, results_path

    if not paths:
        default = results_path(default_out())
        if not default.exists():
            raise SystemExit(f"kernelgate: error: no results at {default} (the default): run 'kernelgate run "
                             "SUBMISSION_DIR...' first (it writes there unless given --out), or pass --results PATH")
        paths = [str(default_out())]
    try:
        results = load_results(paths)
    except FileNotFoundError as exc:
        raise SystemExit(f"kernelgate: error: {exc}")
    if not results:
        raise SystemExit(f"kernelgate: error: no result records in {', '.join(paths)}")
    return results


def did_you_mean(kind: str, name: str, known: list[str] | set[str], *, listing: str = "") -> str:
    """``unknown KIND 'NAME'; did you mean ...? (known: ...)`` for an error message.

    ``listing``: the command that lists every known name, shown instead of the
    list when there are many.
    """
    import difflib

    known = sorted(known)
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    tail = f"'{listing}' lists them" if (listing and len(known) > 12) else f"known: {', '.join(known) or 'none'}"
    return f"unknown {kind} {name!r}{hint} ({tail})"
