"""Evaluation throughput and harness overhead (issue: throughput and scale-out).

Runs ``kernelgate run`` on the bundled submissions in several configurations
and reports, from the records' ``phase_s`` and the wall clock:

* throughput: candidate-workload evaluations per hour;
* harness overhead per candidate: session wall time minus the candidate's own
  compile (build_s, which includes the untimed precompile forward) and device
  phases (correctness_s, timing_s) -- i.e. process start-up, imports, waiting
  and bookkeeping;
* the phase breakdown (medians).

Usage on the device machine (one command; prints a table last):
    python tools/benchmark_throughput.py --configs seq:1:0 pipe:12:0 pipe2:24:0,1 --out $OUT/bench \
        --folders submissions/triton-reference --only layernorm --only gemm_square ...
Each config is NAME:JOBS:GPUS. Every config evaluates the same candidates
with the same timing protocol, so two configs on one GPU are also a
repeatability check (tools/compare_repeats.py on their result folders). On a
CPU-only machine it runs the smoke workloads (useful only to test the script).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ["submissions/triton-reference", "submissions/tilelang-reference", "submissions/defects"]


def run_config(name: str, jobs: int, gpus: str, out: Path, folders: list[str], extra: list[str]) -> dict:
    res_dir = out / name
    cmd = [sys.executable, "-m", "harness", "run", *folders, "--out", str(res_dir), "--jobs", str(jobs),
           "--yes-execute", "--no-progress", *extra]
    if gpus:
        cmd += ["--device", "cuda", "--gpus", gpus]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - t0
    rows = [json.loads(line) for line in (res_dir / "results.jsonl").read_text().splitlines() if line.strip()]
    per_cand: dict[str, dict] = {}
    for r in rows:
        ph = r.get("phase_s") or {}
        c = per_cand.setdefault(r["candidate"], {"startup_s": ph.get("startup_s", 0.0), "import_s": ph.get("import_s", 0.0),
                                                 "own_s": 0.0, "wait_s": 0.0, "workloads": 0})
        c["own_s"] += ph.get("build_s", 0.0) + ph.get("correctness_s", 0.0) + ph.get("timing_s", 0.0)
        c["wait_s"] += ph.get("wait_s", 0.0)
        c["workloads"] += 1
    overhead = [c["startup_s"] + c["import_s"] for c in per_cand.values()]
    n_dev = len(gpus.split(",")) if gpus else 1
    phases: dict[str, list[float]] = {}
    for r in rows:
        for k, v in (r.get("phase_s") or {}).items():
            phases.setdefault(k, []).append(v)
    return {
        "config": name, "jobs": jobs, "gpus": gpus or "cpu", "rc": proc.returncode, "wall_s": round(wall, 1),
        "records": len(rows), "passed": sum(r["status"] == "PASSED" for r in rows),
        "evals_per_hour": round(len(rows) / wall * 3600),
        "evals_per_device_hour": round(len(rows) / wall * 3600 / n_dev),
        "phase_s_median": {k: round(statistics.median(v), 3) for k, v in sorted(phases.items())},
        "overhead_s_median": round(statistics.median(overhead), 2) if overhead else None,
        "own_s_median": round(statistics.median(c["own_s"] for c in per_cand.values()), 2) if per_cand else None,
        "stderr_tail": proc.stderr[-500:],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", nargs="+", default=["seq:1:", "pipe:2:"], help="NAME:JOBS:GPUS (GPUS empty = CPU)")
    ap.add_argument("--out", default="runs/bench")
    ap.add_argument("--folders", nargs="+", default=FOLDERS, help="submission folders (default: all bundled)")
    ap.add_argument("--only", action="append", default=[], metavar="PROBLEM", help="only these problems (repeatable)")
    ap.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more 'kernelgate run' arguments")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for spec in args.configs:
        name, jobs, gpus = (spec.split(":") + ["", ""])[:3]
        only = [x for p in args.only for x in ("--only", p)]
        results.append(run_config(name, int(jobs), gpus, out, args.folders, [*only, *args.extra]))
        (out / "benchmark.json").write_text(json.dumps(results, indent=2))
    print(f"{'config':8s} {'jobs':>4s} {'gpus':>6s} {'wall s':>8s} {'records':>7s} {'passed':>6s} {'evals/h':>8s} "
          f"{'per dev-h':>9s} {'overhead s':>10s} {'own s':>7s}")
    for r in results:
        print(f"{r['config']:8s} {r['jobs']:4d} {r['gpus']:>6s} {r['wall_s']:8.1f} {r['records']:7d} {r['passed']:6d} "
              f"{r['evals_per_hour']:8d} {r['evals_per_device_hour']:9d} {r['overhead_s_median']!s:>10s} "
              f"{r['own_s_median']!s:>7s}")
    for r in results:
        print(r["config"], "phase medians (s):", r["phase_s_median"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
