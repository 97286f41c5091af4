"""Evaluation throughput and harness overhead (issue: throughput and scale-out).

Runs ``kernelgate run`` on the bundled submissions in several configurations
and reports, from the records' ``phase_s`` and the wall clock:

* throughput: candidate-workload evaluations per hour;
* harness overhead per candidate: the harness's own time on the candidate's
  path, i.e. what is neither the candidate's compile (``build_s``, with the
  untimed precompile forward), its forwards in the correctness rounds
  (``forward_s``), nor the timing phase (candidate and library, the
  protocol's measurement): waiting for its worker to start (``startup_s``),
  and per round making inputs, the guards' checks, handing the output over
  and the trusted checker's reference and compare (``correctness_s -
  forward_s - queue_s``; ``check_s`` and ``reference_s`` are shown apart).
  Runs before ``queue_s`` existed (2026-11-30) count the waits inside the
  correctness phase as overhead: only their one-job configs measure it cleanly;
* gaps: for a one-job config, the wall clock minus the candidates' sessions,
  per candidate (run set-up, process teardown, record writing);
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
        startup = ph.get("startup_s", 0.0)  # shared by a candidate's workloads: counted once
        c = per_cand.setdefault(r["candidate"], {"startup_s": startup, "harness_s": startup, "own_s": 0.0, "check_s": 0.0,
                                                 "reference_s": 0.0, "session_s": startup + ph.get("import_s", 0.0)})
        forward = min(ph.get("forward_s", 0.0), ph.get("correctness_s", 0.0))
        c["own_s"] += ph.get("build_s", 0.0) + forward + ph.get("timing_s", 0.0)
        c["harness_s"] += ph.get("correctness_s", 0.0) - forward - ph.get("queue_s", 0.0)  # queueing is not work
        c["check_s"] += ph.get("check_s", 0.0)
        c["reference_s"] += ph.get("reference_s", 0.0)
        c["session_s"] += sum(ph.get(k, 0.0) for k in ("build_s", "wait_s", "correctness_s", "timing_wait_s", "timing_s"))

    def med(key: str) -> float | None:
        return round(statistics.median(c[key] for c in per_cand.values()), 3) if per_cand else None

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
        "overhead_s_median": med("harness_s"),
        "overhead_s_max": round(max(c["harness_s"] for c in per_cand.values()), 3) if per_cand else None,
        "startup_s_median": med("startup_s"), "check_s_median": med("check_s"), "reference_s_median": med("reference_s"),
        "own_s_median": med("own_s"),
        "gap_s_per_candidate": (round((wall - sum(c["session_s"] for c in per_cand.values())) / len(per_cand), 3)
                                if per_cand and jobs == 1 else None),
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
          f"{'per dev-h':>9s} {'overhead s':>10s} {'start-up':>8s} {'check':>6s} {'own s':>7s} {'gap s':>6s}")
    for r in results:
        print(f"{r['config']:8s} {r['jobs']:4d} {r['gpus']:>6s} {r['wall_s']:8.1f} {r['records']:7d} {r['passed']:6d} "
              f"{r['evals_per_hour']:8d} {r['evals_per_device_hour']:9d} {r['overhead_s_median']!s:>10s} "
              f"{r['startup_s_median']!s:>8s} {r['check_s_median']!s:>6s} {r['own_s_median']!s:>7s} "
              f"{r['gap_s_per_candidate']!s:>6s}")
    print("overhead = start-up wait + the harness's part of correctness (per candidate, median); own = compile + "
          "forwards + timing phase; gap = wall not inside any candidate's session (one-job configs)")
    for r in results:
        print(r["config"], "phase medians (s):", r["phase_s_median"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
