"""Fault injection: kill -9 the runner mid-run, resume; two runs writing one results file at once.

Nothing completed may be lost or duplicated, no record may be half-written,
and the leaderboard regenerated from the results must be byte-identical.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness.jsonio import dumps, read_jsonl
from harness.report.leaderboard import build_leaderboard
from harness.results.store import load_results

ROOT = Path(__file__).resolve().parents[2]
GOOD = (Path(__file__).parent / "fixtures" / "mixed" / "gelu.py").read_text()


def _submission(folder: Path, n: int, generator: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(f'{{"generator": "{generator}", "version": "1"}}')
    for i in range(n):
        (folder / f"gelu__v{i}.py").write_text(GOOD + f"\n# variant {i} of {generator}\n")
    return folder


def _run(sub: Path, out: Path, *extra: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "harness", "run", str(sub), "--device", "cpu", "--out", str(out), "--no-timing",
           "--no-progress", "--yes-execute", *extra]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)


def test_kill_minus_nine_then_resume_loses_and_duplicates_nothing(tmp_path):
    sub = _submission(tmp_path / "sub", 6, "killtest")
    out = tmp_path / "out"
    rng = random.Random(1234)
    kills = 0
    for _ in range(2):
        proc = _run(sub, out, "--resume")
        time.sleep(rng.uniform(4.0, 10.0))
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the runner and everything it started
            kills += 1
        proc.wait()
    final = _run(sub, out, "--resume")
    assert final.wait(timeout=300) == 0, final.stderr.read().decode()[-2000:]
    rows = read_jsonl(out / "results.jsonl")  # raises on any truncated or invalid line
    ids = [r["job_id"] for r in rows]
    assert len(ids) == len(set(ids)) == 6, f"{len(ids)} records, {len(set(ids))} unique (kills: {kills})"
    results = load_results(out)
    assert all(r.status.value == "PASSED" for r in results)
    a = dumps(build_leaderboard(results, source="x"))
    b = dumps(build_leaderboard(load_results(out), source="x"))
    assert a == b


def test_two_runs_appending_to_one_results_file(tmp_path):
    out = tmp_path / "shared"
    subs = [_submission(tmp_path / f"sub{k}", 3, f"gen{k}") for k in range(2)]
    procs = [_run(s, out) for s in subs]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read().decode()[-2000:]
    rows = read_jsonl(out / "results.jsonl")
    assert len(rows) == 6 and len({r["job_id"] for r in rows}) == 6
    assert {r["generator"] for r in rows} == {"gen0", "gen1"}
