"""Fault injection: kill -9 the runner mid-run, resume; two runs writing one results file at once.

Nothing completed may be lost or duplicated, no record may be half-written,
and the leaderboard built from the results must not depend on their order.
"""

from __future__ import annotations

import os
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


def _records(path: Path) -> list[bytes]:
    """The complete lines of a results file (a torn last line would be one without its newline)."""
    if not path.exists():
        return []
    return path.read_bytes().splitlines(keepends=True)


def _kill_after_new_records(proc: subprocess.Popen, path: Path, before: int, timeout_s: float = 240.0) -> int | None:
    """SIGKILL the run's process group as soon as it has written a record beyond ``before`` and is still running;
    the number of records then, or None if the run ended first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        n = len(_records(path))
        if n > before:
            os.killpg(proc.pid, signal.SIGKILL)  # the runner and everything it started
            proc.wait()
            return n
        time.sleep(0.02)
    proc.wait(timeout=60)
    return None


def test_kill_minus_nine_then_resume_loses_and_duplicates_nothing(tmp_path):
    """Killed twice, each time just after a record was written (so a run dies with candidates in flight and some
    done), then resumed: the records written before each kill are kept byte for byte, the rest are evaluated
    once, and no line is torn. Bug it replaces: the kills came at random times (4-10 s) and were never shown to
    have happened after any record."""
    sub = _submission(tmp_path / "sub", 6, "killtest")
    out = tmp_path / "out"
    path = out / "results.jsonl"
    first = _kill_after_new_records(_run(sub, out, "--resume"), path, 0)
    assert first is not None and 1 <= first < 6, f"the first run was not killed part-way ({first} records)"
    kept = _records(path)
    second = _kill_after_new_records(_run(sub, out, "--resume"), path, len(kept))
    assert _records(path)[:len(kept)] == kept  # appended after, never rewritten
    kept = _records(path)
    final = _run(sub, out, "--resume")
    assert final.wait(timeout=300) == 0, final.stderr.read().decode()[-2000:]
    rows = read_jsonl(path)  # raises on any truncated or invalid line
    assert _records(path)[:len(kept)] == kept
    ids = [r["job_id"] for r in rows]
    assert len(ids) == len(set(ids)) == 6, f"{len(ids)} records, {len(set(ids))} unique (kills after {first}, {second})"
    results = load_results(out)
    assert all(r.status.value == "PASSED" for r in results)
    # the leaderboard does not depend on the order the kills left the records in
    assert dumps(build_leaderboard(results, source="x")) == dumps(build_leaderboard(results[::-1], source="x"))


def test_two_runs_appending_to_one_results_file(tmp_path):
    out = tmp_path / "shared"
    subs = [_submission(tmp_path / f"sub{k}", 3, f"gen{k}") for k in range(2)]
    procs = [_run(s, out) for s in subs]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read().decode()[-2000:]
    rows = read_jsonl(out / "results.jsonl")
    assert len(rows) == 6 and len({r["job_id"] for r in rows}) == 6
    assert {r["generator"] for r in rows} == {"gen0", "gen1"}
