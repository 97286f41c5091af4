"""``kernelgate merge OUT.jsonl IN...``: combine results files into one, without duplicate records."""

from __future__ import annotations

import argparse

from harness.results.merge import merge_results

EPILOG = """\
Records are kept in input order (files in the order given, lines in file order); a record whose
generator, version, candidate, problem, workload, job_id and created_at were already seen is
dropped, so merging the same file twice, or files that share history, gives each record once.
Reruns of a job (later created_at) are all kept: the leaderboard uses the latest. Invalid lines are reported and skipped. OUT is written
atomically; an existing OUT is refused unless it is one of the inputs or --force is given. Do not
merge into a file a run is still appending to.

examples:
  kernelgate merge runs/all.jsonl runs/h200-a runs/h200-b/results.jsonl
  kernelgate merge runs/h200/results.jsonl runs/h200 runs/h200-resumed
"""


def cmd_merge(args: argparse.Namespace) -> int:
    try:
        c = merge_results(args.inputs, args.out, force=args.force)
    except (FileNotFoundError, FileExistsError) as exc:
        raise SystemExit(f"kernelgate: error: {exc}")
    print(f"{c['written']} record(s) from {c['files']} file(s) -> {c['out']}  "
          f"({c['duplicates']} duplicate(s) dropped, {c['invalid']} invalid line(s) skipped)")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("merge", help="combine results files without duplicates",
                       description="Combine results files (folders or .jsonl) into one results file, dropping "
                                   "duplicate records (same generator, version, candidate, workload, job_id and created_at) "
                                   "and keeping order.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", metavar="OUT.jsonl", help="the merged results file (or a folder: OUT/results.jsonl)")
    p.add_argument("inputs", nargs="+", metavar="IN", help="results folders or .jsonl files, in order")
    p.add_argument("--force", action="store_true", help="replace an existing OUT that is not one of the inputs")
    p.set_defaults(func=cmd_merge)
