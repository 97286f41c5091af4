"""Render the throughput tables of docs/throughput.md from committed device runs (never edit them by hand).

Usage: python tools/throughput_table.py FOLDER...
       e.g. python tools/throughput_table.py evidence/h200-results/2026-12-03-8448562 evidence/throughput/2026-12-03-6becf33

Reads every ``*benchmark.json`` under each folder (as ``tools/benchmark_throughput.py`` writes them:
``suite_benchmark.json``, ``bench_benchmark.json``, ...) and prints one Markdown table per file. Besides the
benchmark's own columns it gives the span from the first to the last record of each config (``created_at``,
1 s resolution): the steady-state part of the run, without its fixed start-up (interpreter, discovery, the first
workers' start) and shutdown. A config's records are the results file beside the benchmark file:
``<prefix>_<config>_results.jsonl[.gz]``, or ``<prefix>_results.jsonl[.gz]`` for a file of one config.
"""

from __future__ import annotations

import gzip
import json
import sys
from datetime import datetime
from pathlib import Path


def _records_file(bench_json: Path, config: str, n_configs: int) -> Path | None:
    prefix = bench_json.name[: -len("benchmark.json")]
    names = [f"{prefix}{config}_results", f"{config}_results"] + ([f"{prefix}results"] if n_configs == 1 else [])
    for name in names:
        for suffix in (".jsonl", ".jsonl.gz"):
            p = bench_json.parent / (name + suffix)
            if p.exists():
                return p
    return None


def _span_s(results: Path | None) -> float | None:
    if results is None:
        return None
    text = gzip.decompress(results.read_bytes()).decode() if results.suffix == ".gz" else results.read_text()
    stamps = [datetime.fromisoformat(json.loads(line)["created_at"]) for line in text.splitlines() if line.strip()]
    return (max(stamps) - min(stamps)).total_seconds() if stamps else None


def table(bench_json: Path) -> str:
    rows = json.loads(bench_json.read_text())
    out = [f"`{bench_json.as_posix()}`", "",
           "| config | jobs | GPUs | records | passed | wall s | evaluations/h | per GPU-h | first->last record s "
           "| overhead s (median / max) | start-up wait s (median) | check s (median) |",
           "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        span = _span_s(_records_file(bench_json, r["config"], len(rows)))
        out.append(f"| {r['config']} | {r['jobs']} | {r['gpus']} | {r['records']} | {r['passed']} | {r['wall_s']:.1f} "
                   f"| {r['evals_per_hour']:,} | {r['evals_per_device_hour']:,} | {'-' if span is None else f'{span:.0f}'} "
                   f"| {r['overhead_s_median']:.2f} / {r['overhead_s_max']:.2f} | {r['startup_s_median']:.2f} "
                   f"| {r['check_s_median']:.2f} |")
    return "\n".join(out)


def main(folders: list[str]) -> int:
    found = [p for f in folders for p in sorted(Path(f).rglob("*benchmark.json")) if "overhead_s_max" in p.read_text()]
    if not found:
        print(f"{' '.join(folders)}: no benchmark file with the overhead breakdown (tools/benchmark_throughput.py) "
              "found", file=sys.stderr)
        return 1
    print("\n\n".join(table(p) for p in found))
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1:]))
