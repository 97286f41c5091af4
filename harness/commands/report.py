"""``kernelgate report [--results PATH...] [--out DIR]``: HTML page and Markdown summary of results."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.commands._common import add_results_arg, default_out, load_results_or_exit, results_paths

EPILOG = """\
Writes DIR/report.html (self-contained: inline CSS, charts embedded) and DIR/report.md (charts beside it
as PNG files); DIR defaults to a 'report' folder beside the first results file. Charts need matplotlib
(pip install 'kernelgate[plot]'); without it the tables still render.

Sections: leaderboard; roofline (flagged kernels labelled, every point named on hover) and fast_p charts;
per category; per problem; a generator comparison when the results hold several generators or versions
(each version against its previous one, other generators against --baseline; the pairing, ratios and
CIs of 'kernelgate compare'); every failure with its error text; every record with its error, warnings
and static findings. Records from the CPU path are shown as correctness only.

The roofline chart draws the measured ceilings from --ceilings FILE (the JSON 'kernelgate calibrate'
caches), or else from the calibration cache of the device that produced the results, when every record
comes from one device and that cache exists on this machine. Nothing is measured here.

examples:
  kernelgate report                                  # runs/latest -> runs/latest/report
  kernelgate report --results runs/h200 --out runs/h200/report
  kernelgate report --results runs/v1 runs/v2 --baseline my-gen@1 --out reports/v1-v2
  kernelgate report --results runs/a runs/b --out reports/ab --ceilings ~/.cache/kernelgate/ceilings/ID.json
"""


def _read_ceilings(path: Path) -> dict:
    from harness.jsonio import loads

    try:
        data = loads(path.read_bytes())
    except OSError as exc:
        raise SystemExit(f"kernelgate: error: --ceilings {path}: cannot be read ({exc.strerror})")
    except ValueError as exc:
        raise SystemExit(f"kernelgate: error: --ceilings {path}: not valid JSON ({exc})")
    if not isinstance(data, dict) or not isinstance(data.get("dram_bytes_per_s"), (int, float)):
        raise SystemExit(f"kernelgate: error: --ceilings {path}: expected a JSON object with 'dram_bytes_per_s' and "
                         "'peaks_flops_per_s' (the file 'kernelgate calibrate' writes)")
    return data


def cached_ceilings(results) -> tuple[dict | None, str]:
    """(ceilings, note): the calibration cache of the results' one device, if it is on this machine."""
    from harness.jsonio import loads
    from harness.measure.calibrate import cache_dir, device_key
    from harness.report.metrics import latest_records

    records, _ = latest_records(results)
    keys = {device_key(r.env.to_dict()) for r in records}
    if len(keys) != 1:
        return None, f"the records come from {len(keys)} devices; pass --ceilings FILE to draw one device's roofs"
    path = cache_dir() / f"{keys.pop()}.json"
    if not path.exists():
        return None, (f"no cached calibration for {records[0].env.device_name} on this machine ({path}); "
                      "pass --ceilings FILE to draw the roofs")
    try:
        data = loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        return None, f"cached calibration {path} could not be read ({exc}); roofs not drawn"
    if not isinstance(data, dict) or "dram_bytes_per_s" not in data:
        return None, f"cached calibration {path} has no 'dram_bytes_per_s'; roofs not drawn"
    return data, f"ceilings from the calibration cache {path}"


def default_report_dir(results: list[str]) -> Path:
    """``report/`` beside the first results file (a folder's own ``report/``, or beside a ``.jsonl``)."""
    first = Path(results[0])
    return (first.parent if first.suffix == ".jsonl" else first) / "report"


def cmd_report(args: argparse.Namespace) -> int:
    from harness.report.html import write_report

    results = load_results_or_exit(args.results)
    paths = results_paths(args)
    if args.ceilings:
        ceilings, note = _read_ceilings(Path(args.ceilings)), f"ceilings from {args.ceilings}"
    else:
        ceilings, note = cached_ceilings(results)
    print(f"note: {note}", file=sys.stderr)
    out = Path(args.out) if args.out else default_report_dir(paths)
    try:
        html, md = write_report(results, out, ceilings=ceilings, title=args.title, source=" ".join(paths),
                                baseline=args.baseline, n_boot=args.n_boot, seed=args.seed)
    except ValueError as exc:
        raise SystemExit(f"kernelgate: error: {exc}")
    print(f"report written: {html}\n                {md}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write an HTML report and a Markdown summary",
                       description="Render results as a self-contained HTML page and a Markdown summary: leaderboard, "
                                   "roofline and fast_p charts, per-category and per-problem tables, a comparison of "
                                   "generator versions, and every failure and record with its error text, warnings "
                                   "and lint findings.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_results_arg(p)
    p.add_argument("--out", metavar="DIR", help="folder for report.html, report.md and the chart PNGs "
                   f"(default: 'report' beside the first results file, e.g. {default_out() / 'report'})")
    p.add_argument("--baseline", metavar="GEN[@VERSION]", help="generator the comparison section compares the other "
                   "generators with (default: the first-ranked generator@version)")
    p.add_argument("--n-boot", type=int, default=2000, help="bootstrap replicates of the comparison (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed of the comparison (default 0)")
    p.add_argument("--ceilings", metavar="FILE", help="measured ceilings JSON (dram_bytes_per_s, peaks_flops_per_s)")
    p.add_argument("--title", default="KernelGate report", help="page title")
    p.set_defaults(func=cmd_report)
