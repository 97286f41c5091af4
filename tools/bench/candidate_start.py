"""Benchmark: what starting its worker costs each candidate (not a test; CPU timings are host times).

Evaluates N copies of one bundled reference kernel with ``kernelgate run --jobs 1 --no-prestart`` (every candidate
starts its own worker, none is pre-started) and reads, from the records, the parent's clock from the session's
start to the worker's Ready message (``phase_s.startup_s``: spawn, the OS boundary, the warm-up) and the whole
evaluation of each candidate. Run it at two commits side by side to compare them.

    python tools/bench/candidate_start.py --n 10 --spawn fork
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--spawn", choices=("fork", "exec"), default="fork")
    ap.add_argument("--problem", default="gelu")
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout to measure (default: this one)")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="kg-startbench-"))
    try:
        sub = tmp / "sub"
        sub.mkdir()
        src = (args.root / "submissions" / "triton-reference" / f"{args.problem}.py").read_text()
        (sub / "manifest.json").write_text('{"generator": "start-bench", "version": "1"}')
        for i in range(args.n):
            (sub / f"{args.problem}__v{i}.py").write_text(src + f"\n# copy {i}\n")
        cmd = [sys.executable, "-m", "harness", "run", str(sub), "--out", str(tmp / "out"), "--jobs", "1",
               "--no-prestart", "--spawn", args.spawn, "--no-progress", "--yes-execute"]
        subprocess.run(cmd, cwd=args.root, check=True, capture_output=True, env={"PYTHONPATH": str(args.root),
                                                                                 "PATH": "/usr/bin:/bin"})
        recs = [json.loads(line) for line in (tmp / "out" / "results.jsonl").read_text().splitlines()]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    startup = sorted(r["phase_s"]["startup_s"] for r in recs)
    total = sorted(sum(v for k, v in r["phase_s"].items() if isinstance(v, (int, float))) for r in recs)
    statuses = sorted({r["status"] for r in recs})
    print(f"{args.root} spawn={args.spawn} n={len(recs)} statuses={statuses}")
    print(f"  startup_s median {statistics.median(startup):.3f} (min {startup[0]:.3f}, max {startup[-1]:.3f})")
    print(f"  phases summed per candidate median {statistics.median(total):.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
