"""``kernelgate export``: problems/results to Hugging Face parquet, or KernelBench data in as problem files."""

from __future__ import annotations

import argparse

from harness.commands._common import add_problem_args, load_registry_from_args

EPILOG = """\
export: DIR/problems.parquet (one row per problem: code, workloads, FLOPs/bytes per workload, version),
DIR/results.parquet with --results (one row per record, nested fields flattened), DIR/README.md (card).
Load them with datasets.load_dataset("DIR", "problems") or any parquet reader.

import: a local KernelBench-layout dataset (columns code, level, name, problem_id) as a .parquet,
.jsonl or .arrow file or a datasets.save_to_disk folder -> one <problem_id>_<name>.py per row (several
levels go to DIR/level<L>/). Nothing is downloaded: fetch the dataset yourself first.

examples:
  kernelgate export --format hf exports/suite
  kernelgate export --format hf exports/h200 --results runs/h200 --latest
  kernelgate export --import-kernelbench ~/data/kernelbench/level_1.parquet --out problems-kb/level1
  kernelgate run submissions/mine --problems problems-kb/level1 --yes-execute
"""


def cmd_export(args: argparse.Namespace) -> int:
    if args.import_kernelbench:
        from harness.export.hf import import_kernelbench

        if not args.out:
            raise SystemExit("kernelgate: error: --import-kernelbench needs --out DIR")
        try:
            paths = import_kernelbench(args.import_kernelbench, args.out, level=args.level)
        except (ValueError, FileNotFoundError) as exc:
            raise SystemExit(f"kernelgate: error: {exc}")
        print(f"{len(paths)} problem file(s) written to {args.out}")
        return 0
    if not args.dir:
        raise SystemExit("kernelgate: error: give the output folder: kernelgate export --format hf DIR")
    from harness.export.hf import export_hf

    reg = load_registry_from_args(args)
    results = None
    if args.results:
        from harness.commands._common import load_results_or_exit

        results = load_results_or_exit(args.results)
        if args.latest:
            from harness.report.metrics import latest_records

            results = latest_records(results)[0]
    try:
        paths = export_hf(reg, results, args.dir)
    except ValueError as exc:
        raise SystemExit(f"kernelgate: error: {exc}")
    for name, path in sorted(paths.items()):
        print(f"{name}: {path}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="export to Hugging Face parquet, or import KernelBench data",
                       description="Export the problem suite (and results) as Hugging Face datasets parquet files, or "
                                   "import a local KernelBench-layout dataset as problem files.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", nargs="?", metavar="DIR", help="output folder of the export")
    p.add_argument("--format", choices=("hf",), default="hf", help="export format (hf: datasets parquet)")
    p.add_argument("--results", nargs="+", metavar="PATH", help="also export these results folder(s)/file(s)")
    p.add_argument("--latest", action="store_true", help="export only the latest record per entry (generator, version, candidate, "
                   "problem, workload, job id), as the leaderboard counts them")
    p.add_argument("--import-kernelbench", metavar="PATH", help="import a local KernelBench dataset file or folder")
    p.add_argument("--out", metavar="DIR", help="folder for the imported problem files (with --import-kernelbench)")
    p.add_argument("--level", type=int, help="import only this KernelBench level")
    add_problem_args(p)
    p.set_defaults(func=cmd_export)
