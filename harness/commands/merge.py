"""``kernelgate merge OUT.jsonl IN...``: combine results files into one, without duplicate records."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EPILOG = """\
Records are kept in input order (files in the order given, lines in file order); a record whose
(job_id, created_at) was already seen is dropped, so merging the same file twice, or files that
share history, gives each record once. Reruns of a job (same job_id, later created_at) are all
kept: the leaderboard uses the latest. Invalid lines are reported and skipped. OUT is written
atomically; an existing OUT is refused unless it is one of the inputs or --force is given. Do not
merge into a file a run is still appending to.

examples:
  kernelgate merge runs/all.jsonl runs/h200-a runs/h200-b/results.jsonl
  kernelgate merge runs/h200/results.jsonl runs/h200 runs/h200-resumed
"""


def merge_results(inputs: list[str | Path], out: str | Path, *, force: bool = False) -> dict:
    """Merge results files (see EPILOG); return counts {files, read, written, duplicates, invalid, out}."""
    from harness.jsonio import atomic_write_text, dumps, read_jsonl
    from harness.records import JobResult
    from harness.results.store import results_path

    out_path = results_path(out)
    in_paths = [results_path(p) for p in inputs]
    for p in in_paths:
        if not p.exists():
            raise FileNotFoundError(f"{p}: no results file")
    if out_path.exists() and not force and out_path.resolve() not in {p.resolve() for p in in_paths}:
        raise FileExistsError(f"{out_path} exists; list it as an input to merge into it, or pass --force to replace it")
    seen: set[tuple[str, str]] = set()
    lines: list[str] = []
    counts = {"files": len(in_paths), "read": 0, "written": 0, "duplicates": 0, "invalid": 0, "out": str(out_path)}

    def bad(path, lineno, msg):
        counts["invalid"] += 1
        print(f"warning: {msg}", file=sys.stderr)

    for p in in_paths:
        for lineno, d in enumerate(read_jsonl(p, on_bad_line=bad), start=1):
            counts["read"] += 1
            try:
                JobResult.from_dict(d)
            except (ValueError, KeyError, TypeError) as exc:
                bad(p, lineno, f"{p}: record {lineno} does not match the result schema ({exc}); skipped")
                continue
            key = (d["job_id"], d["created_at"])
            if key in seen:
                counts["duplicates"] += 1
                continue
            seen.add(key)
            lines.append(dumps(d))
    atomic_write_text(out_path, "".join(line + "\n" for line in lines))
    counts["written"] = len(lines)
    return counts


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
                                   "duplicate records (same job_id and created_at) and keeping order.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", metavar="OUT.jsonl", help="the merged results file (or a folder: OUT/results.jsonl)")
    p.add_argument("inputs", nargs="+", metavar="IN", help="results folders or .jsonl files, in order")
    p.add_argument("--force", action="store_true", help="replace an existing OUT that is not one of the inputs")
    p.set_defaults(func=cmd_merge)
