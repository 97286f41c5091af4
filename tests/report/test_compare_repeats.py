"""tools/compare_repeats.py: kernel and library medians of two runs, and with --elib their E_lib and verdicts."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

from harness.records import EnvSnapshot, JobResult, Screening, Status, TimingStats, Verdict
from harness.results.store import ResultStore

ROOT = Path(__file__).resolve().parents[2]
ENV = EnvSnapshot("cuda", "H200", None, None, "3.12", "2.11", "3.6", "0.1.15", "0.1.0")


def _rec(name: str, kernel_ms: float, library_ms: float, verdict: Verdict) -> JobResult:
    t = lambda ms: TimingStats(ms, 0.001, ms, ms, (ms,), "cuda_event", True)  # noqa: E731
    scr = Screening(library_ms / kernel_ms, 0.9, 0.8, 0.1, "memory", "dram", verdict, False, 0.8, 0.5, "")
    return JobResult(job_id=name, run_id="r", candidate=f"s/{name}.py", candidate_sha256="0" * 64, generator="g",
                     generator_version="1", problem_id="gelu", category="elementwise", workload="w", dtype="float16",
                     dsl="triton", status=Status.PASSED, flops=1, min_bytes=2, env=ENV,
                     created_at="2026-01-01T00:00:00+00:00", timing=t(kernel_ms), library_timing=t(library_ms),
                     screening=scr)


def test_medians_e_lib_and_verdicts_of_two_runs(tmp_path):
    a, b = ResultStore(tmp_path / "a"), ResultStore(tmp_path / "b")
    for r in (_rec("same", 0.100, 0.120, Verdict.EFFICIENT), _rec("moved", 0.178, 0.172, Verdict.EFFICIENT)):
        a.append(r)
    for r in (_rec("same", 0.101, 0.120, Verdict.EFFICIENT), _rec("moved", 0.228, 0.172, Verdict.BORDERLINE)):
        b.append(r)
    gz = tmp_path / "b_results.jsonl.gz"  # committed evidence is gzipped
    gz.write_bytes(gzip.compress(b.path.read_bytes()))
    out = subprocess.run([sys.executable, "tools/compare_repeats.py", str(a.path), str(gz), "--elib"], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "kernels: 1/2 within 3%" in out.stdout and "library ops: 2/2 within 3%" in out.stdout
    assert "E_lib: 1/2 within 3%" in out.stdout and "verdicts: 1/2 the same" in out.stdout
    assert "s/moved.py w: efficient (E_lib 0.966) -> borderline (E_lib 0.754)" in out.stdout
    plain = subprocess.run([sys.executable, "tools/compare_repeats.py", str(a.path), str(gz)], cwd=ROOT,
                           capture_output=True, text=True)
    assert "verdicts" not in plain.stdout and "kernels: 1/2 within 3%" in plain.stdout
