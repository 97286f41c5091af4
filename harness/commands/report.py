"""``kernelgate report --results PATH... --out DIR``: HTML page and Markdown summary of results."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.commands._common import add_results_arg, load_results_or_exit

EPILOG = """\
Writes DIR/report.html (self-contained: inline CSS, charts embedded) and DIR/report.md (charts beside it
as PNG files). Charts need matplotlib (pip install 'kernelgate[plot]'); without it the tables still render.

The roofline chart draws the measured ceilings from --ceilings FILE (the JSON 'kernelgate calibrate'
caches), or else from the calibration cache of the device that produced the results, when every record
comes from one device and that cache exists on this machine. Nothing is measured here.

examples:
  kernelgate report --results runs/h200 --out runs/h200/report
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


def cmd_report(args: argparse.Namespace) -> int:
    from harness.report.html import write_report

    results = load_results_or_exit(args.results)
    if args.ceilings:
        ceilings, note = _read_ceilings(Path(args.ceilings)), f"ceilings from {args.ceilings}"
    else:
        ceilings, note = cached_ceilings(results)
    print(f"note: {note}", file=sys.stderr)
    html, md = write_report(results, args.out, ceilings=ceilings, title=args.title, source=" ".join(args.results))
    print(f"report written: {html}\n                {md}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write an HTML report and a Markdown summary",
                       description="Render results as a self-contained HTML page and a Markdown summary: leaderboard, "
                                   "per-category and per-problem tables, roofline chart and fast_p curve.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_results_arg(p)
    p.add_argument("--out", required=True, metavar="DIR", help="folder for report.html, report.md and the chart PNGs")
    p.add_argument("--ceilings", metavar="FILE", help="measured ceilings JSON (dram_bytes_per_s, peaks_flops_per_s)")
    p.add_argument("--title", default="KernelGate report", help="page title")
    p.set_defaults(func=cmd_report)
