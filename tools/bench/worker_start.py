"""Benchmark: the per-candidate start cost of a worker on this machine (not a test; CPU timings are host times).

For each of N workers: spawn (through the fork server, or with exec), let it lock itself down and warm up as a
pre-started worker does (``--prestart``), and time spawn -> warm line on the parent's clock; then end it.
Prints the median and spread, and per-step laps the workers reported.

    python tools/bench/worker_start.py --n 12 --spawn fork
    python tools/bench/worker_start.py --n 6 --spawn exec
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=12)
    ap.add_argument("--spawn", choices=("fork", "exec"), default="fork")
    ap.add_argument("--json", type=Path, help="also write the samples here")
    args = ap.parse_args(argv)

    from harness.execute.parent import forks
    from harness.execute.parent.children import kill_group
    from harness.execute.parent.process import make_scratch, spawn_worker, wait_ready
    from harness.execute.parent.options import RunOptions
    from harness.execute.parent.pool import prestart_settings

    problems = sorted((ROOT / "problems").rglob("*.py"))
    settings = {**prestart_settings(RunOptions(device="cpu"), problems), "gpu_gate": False}
    root = Path(tempfile.mkdtemp(prefix="kg-bench-"))
    fork = args.spawn == "fork"
    if fork:
        srv = forks.server_for("cpu", 1)
        t0 = time.monotonic()
        srv._wait_ready()
        print(f"fork server ready after {time.monotonic() - t0:.2f} s (import {srv.import_s} s)")
    walls, laps = [], []
    try:
        for i in range(args.n):
            t0 = time.monotonic()
            w = spawn_worker(make_scratch(root, f"bench{i}"), "cpu", None, settings, fork=fork)
            ok = wait_ready(w, 300.0)
            walls.append(time.monotonic() - t0)
            if not ok:
                print(f"worker {i} did not warm up: {w.err_buf.text()[-800:]}")
                return 1
            laps.append(w.warm_s)
            kill_group(w.proc)
            w.close_fds()
    finally:
        forks.close_all()
        shutil.rmtree(root, ignore_errors=True)
    med = statistics.median(walls)
    q = statistics.quantiles(walls, n=4) if len(walls) >= 4 else [min(walls), med, max(walls)]
    print(f"{args.spawn}: n={len(walls)} spawn->warm median {med:.3f} s, IQR {q[0]:.3f}-{q[2]:.3f} s, "
          f"min {min(walls):.3f}, max {max(walls):.3f}")
    keys = sorted({k for lap in laps for k in lap})
    print("laps (median s): " + ", ".join(f"{k} {statistics.median(l.get(k, 0.0) for l in laps):.3f}" for k in keys))
    if args.json:
        args.json.write_text(json.dumps({"spawn": args.spawn, "walls_s": walls, "laps": laps}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
