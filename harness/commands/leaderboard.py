"""``kernelgate leaderboard [--results PATH...]``: rank generators from results files (default ``runs/latest``)."""

from __future__ import annotations

import argparse
import sys

from harness.commands._common import add_results_arg, load_results_or_exit, results_paths

EPILOG = """\
The leaderboard is generated from the results records only (the latest record per generator, version,
candidate and workload); it is never edited. Without --results it reads runs/latest, where
'kernelgate run' writes by default. Records from the CPU path are judged on correctness only (no E_lib,
U_roof, S or verdict: "cpu-path" in the verdicts column).
Ranking: mean speed-of-light score S over attempted workloads (failures count 0), then correctness rate,
then geomean E_lib. fast_p = fraction of attempted problems whose best candidate is correct with
E_lib > p on every timed workload. 'harness/report/leaderboard.py' documents every metric.

examples:
  kernelgate leaderboard                                  # runs/latest
  kernelgate leaderboard --results runs/h200
  kernelgate leaderboard --results runs/h200 runs/h200-v2/results.jsonl --by category
  kernelgate leaderboard --results runs/h200 --out runs/h200/leaderboard.json --markdown runs/h200/leaderboard.md
  kernelgate leaderboard --results evidence/h200-results/2026-12-03-8448562/suite_results.jsonl.gz \
      --out leaderboards/h200.json --markdown leaderboards/h200.md     # the committed leaderboard
"""


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from harness.jsonio import atomic_write_text, dumps
    from harness.report.escape import terminal
    from harness.report.leaderboard import (
        build_leaderboard, format_leaderboard, format_leaderboard_markdown, write_leaderboard,
    )

    results = load_results_or_exit(args.results)
    lb = build_leaderboard(results, source=" ".join(results_paths(args)))
    if args.json:
        print(dumps(lb, indent=True))
    else:
        print(terminal(format_leaderboard(lb, by=args.by)))
    if args.out:
        path = write_leaderboard(args.out, lb)
        print(f"leaderboard written to {path}", file=sys.stderr)
    if args.markdown:
        atomic_write_text(args.markdown, format_leaderboard_markdown(lb))
        print(f"leaderboard table written to {args.markdown}", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("leaderboard", help="rank generators from results files",
                       description="Build the leaderboard from results records: per generator@version, correctness "
                                   "rate, fast_p, geomean E_lib and U_roof, mean speed-of-light score, verdict counts; "
                                   "overall and per category.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_results_arg(p)
    p.add_argument("--by", choices=("category",), help="also show one row per category under each generator")
    p.add_argument("--out", metavar="FILE.json", help="write the leaderboard JSON here (atomic), e.g. leaderboards/h200.json")
    p.add_argument("--markdown", metavar="FILE.md", help="write the ranking table in Markdown here (atomic), with one "
                   "row per category under each generator, e.g. leaderboards/h200.md")
    p.add_argument("--json", action="store_true", help="print the leaderboard JSON instead of the table")
    p.set_defaults(func=cmd_leaderboard)
