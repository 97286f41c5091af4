"""``kernelgate`` command line: a thin layer over the pipeline stages.

Each subcommand lives in ``harness/commands/<name>.py`` and exposes
``register(subparsers)``, which adds its parser and sets ``func``. Modules are
imported only to build the parser; heavy imports (torch, tilelang, datasets)
happen inside the command functions.
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = ("problems", "env", "run", "calibrate", "lint", "leaderboard", "compare", "report", "prompt", "export", "merge",
            "serve")

DESCRIPTION = """\
KernelGate evaluates Triton and TileLang kernels against the library ops they
replace: each candidate runs in an isolated subprocess, is checked for
correctness on fresh inputs, timed against the library in the same session,
screened by library-relative efficiency and roofline utilization, diagnosed,
and ranked on a JSON leaderboard.

typical session ('kernelgate COMMAND --help' has examples for each command):
  kernelgate problems list
  kernelgate run submissions/triton-reference --yes-execute   # writes runs/latest
  kernelgate leaderboard                                      # reads runs/latest
  kernelgate report                                           # writes runs/latest/report
"""


class Parser(argparse.ArgumentParser):
    """argparse with a "did you mean" for a mistyped choice (subcommand, action, ``--by``, ``--device``, ...).

    Subparsers are of this class too (argparse creates them with the parent's
    class). The error still exits with status 2, argparse's usage error.
    """

    def _check_value(self, action: argparse.Action, value: object) -> None:
        choices = action.choices
        if choices is None or value in choices:
            return
        import difflib

        names = [str(c) for c in choices]
        close = difflib.get_close_matches(str(value), names, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise argparse.ArgumentError(action, f"invalid choice: {value!r}{hint} (choose from {', '.join(names)})")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="kernelgate", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    from harness.version import __version__

    parser.add_argument("--version", action="version", version=f"kernelgate {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"harness.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"harness.commands.{name}":
                continue
            raise
        mod.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted; results written so far are kept (use --resume to continue)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
