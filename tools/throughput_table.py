"""Render the throughput tables of docs/throughput.md from committed device runs (never edit them by hand).

Usage: python tools/throughput_table.py leaderboards/h200-2026-11-30-s3

Reads every ``benchmark.json`` under the folder (as ``tools/device_bench.sh``
leaves them, next to ``<config>_results.jsonl``) and prints one Markdown table
per benchmark folder. Besides the benchmark's own columns it gives the span
from the first to the last record of each config (``created_at``, 1 s
resolution): the steady-state part of the run, without its fixed start-up
(interpreter, discovery, the first workers' start) and shutdown.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path


def _span_s(results: Path) -> float | None:
    if not results.exists():
        return None
    stamps = [datetime.fromisoformat(json.loads(line)["created_at"])
              for line in results.read_text().splitlines() if line.strip()]
    return (max(stamps) - min(stamps)).total_seconds() if stamps else None


def table(bench_json: Path, root: Path) -> str:
    rows = json.loads(bench_json.read_text())
    out = [f"`{bench_json.parent.relative_to(root.parent)}/`", "",
           "| config | jobs | GPUs | records | passed | wall s | evaluations/h | per GPU-h | first->last record s "
           "| overhead s (median / max) | start-up wait s (median) | check s (median) |",
           "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        span = _span_s(bench_json.parent / f"{r['config']}_results.jsonl")
        out.append(f"| {r['config']} | {r['jobs']} | {r['gpus']} | {r['records']} | {r['passed']} | {r['wall_s']:.1f} "
                   f"| {r['evals_per_hour']:,} | {r['evals_per_device_hour']:,} | {'-' if span is None else f'{span:.0f}'} "
                   f"| {r['overhead_s_median']:.2f} / {r['overhead_s_max']:.2f} | {r['startup_s_median']:.2f} "
                   f"| {r['check_s_median']:.2f} |")
    return "\n".join(out)


def main(folder: str) -> int:
    root = Path(folder)
    found = sorted(p for p in root.rglob("benchmark.json") if "overhead_s_max" in p.read_text())
    if not found:
        print(f"{folder}: no benchmark.json with the overhead breakdown (tools/benchmark_throughput.py) found",
              file=sys.stderr)
        return 1
    print("\n\n".join(table(p, root) for p in found))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "leaderboards/h200-2026-11-30-s3"))
