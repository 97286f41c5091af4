"""``kernelgate lint FILE_OR_DIR``: static defect diagnosis and anti-cheat scan, no GPU needed."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from harness import astparse

EPILOG = """\
A file that is an LLM's Markdown reply is linted as 'kernelgate run' executes it: the code of its
```python fence (a note says which fence; lines point into the reply), or an error saying why no fence
could be taken. Exit status: 1 when a file does not parse (reported as FILE:LINE:COL: SyntaxError: ...,
the way 'kernelgate run' would fail it as COMPILE_ERROR), when the anti-cheat scan fails a file, or with
--strict when a likely authoring defect is found; else 0. Nothing is imported or executed.

examples:
  kernelgate lint submissions/defects
  kernelgate lint my_kernel.py --strict        # non-zero exit on any likely defect (CI)
  kernelgate lint my_llm_samples/ -v           # also list clean files
"""


def syntax_error(source: str, filename: str) -> str | None:
    """``FILE:LINE:COL: SyntaxError: message`` (with the offending line) when ``source`` does not parse, else None."""
    try:
        astparse.parse(source, filename=filename)
    except SyntaxError as e:
        where = f"{filename}:{e.lineno or '?'}:{e.offset or '?'}"
        text = f"{where}: {type(e).__name__}: {e.msg}"
        if e.text:
            line = e.text.rstrip("\n")
            text += f"\n    {line}"
            if e.offset and e.offset > 0:
                text += "\n    " + " " * (min(e.offset, len(line) + 1) - 1) + "^"
        return text
    except ValueError as e:  # source with NUL bytes
        return f"{filename}:1:1: ValueError: {e}"
    return None


def cmd_lint(args: argparse.Namespace) -> int:
    from harness.candidates.fences import extract_source
    from harness.diagnose.anticheat import scan_source
    from harness.diagnose.lint import format_findings, lint_source
    from harness.report.escape import terminal

    files: list[Path] = []
    for t in args.targets:
        p = Path(t)
        if p.is_dir():
            found = sorted(x for x in p.glob("*.py") if not x.name.startswith("_"))
            if not found:
                raise SystemExit(f"kernelgate: error: {p}: no candidate .py files in this folder")
            files += found
        elif p.is_file():
            files.append(p)
        else:
            raise SystemExit(f"kernelgate: error: {p}: no such file or folder")
    n_def = n_fail = n_syntax = 0
    for f in files:
        src, offset = f.read_text(encoding="utf-8", errors="replace"), 0
        bad_syntax = syntax_error(src, str(f))
        if bad_syntax:
            # an LLM's Markdown reply: lint the code 'kernelgate run' would take out of its fence
            ext = extract_source(src)
            if ext.error is None:
                print(terminal(f"{f}: {ext.note}"))
                src, offset, bad_syntax = ext.source, ext.first_line - 1, None
            elif not ext.error.startswith("not valid Python"):
                bad_syntax = f"{f}: {ext.error}"
        if bad_syntax:
            n_syntax += 1
            print(terminal(bad_syntax))
            # the anti-cheat scan still reads such a file line by line; the linter has nothing to parse
            findings = [x for x in (scan_source(src, filename=str(f)) if not args.no_anticheat else [])
                        if x.rule != "parse-error"]
        else:
            findings = lint_source(src, filename=str(f)) + (scan_source(src, filename=str(f)) if not args.no_anticheat else [])
        if offset:  # point into the reply, not into the fence's code
            findings = [dataclasses.replace(x, line=x.line + offset) if x.line is not None else x for x in findings]
        n_def += sum(x.severity == "defect" for x in findings)
        n_fail += sum(x.severity == "fail" for x in findings)
        if findings:
            print(terminal(format_findings(findings, path=str(f))))
        elif args.verbose and not bad_syntax:
            print(terminal(f"{f}: clean"))
    print(f"\n{len(files)} file(s): {n_syntax} that do not parse, {n_def} likely authoring defect(s), "
          f"{n_fail} anti-cheat failure(s)")
    return 1 if (n_syntax or n_fail or (args.strict and n_def)) else 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lint", help="static defect diagnosis of candidate files (no GPU)",
                       description="Name likely authoring defects (sequential reductions, fp64 promotion, casts in inner "
                                   "loops, one element per program, unfused multi-pass kernels, tiny tiles) and reward-hack "
                                   "patterns in candidate sources, with a one-line fix hint each. Advice, not a measurement.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("targets", nargs="+", metavar="FILE_OR_DIR")
    p.add_argument("--strict", action="store_true", help="exit 1 when any defect is found")
    p.add_argument("--no-anticheat", action="store_true", help="skip the reward-hack scan")
    p.add_argument("-v", "--verbose", action="store_true")
    p.set_defaults(func=cmd_lint)
