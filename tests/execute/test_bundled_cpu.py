"""The bundled submissions on the CPU path, as CI runs them.

Every Triton candidate must pass correctness on the smoke workloads under the
Triton interpreter; every TileLang candidate must lower to CUDA source for
sm_90a (it cannot execute without a GPU); the run must produce a leaderboard
JSON and an HTML report.

The defects run beside the references, as two runs of the same options: a CPU
run checks one candidate at a time (its device gate has one slot), so while a
defect spends a minute in the Triton interpreter (``conv2d_3x3__naive_direct``)
one run leaves the second core idle; two keep both busy (the same 52 records;
measured back to back on the suite's 2-core machine, twice each: 223 and
231 s against 262 and 263 s for one run of the three folders with 2 jobs).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from harness import env as envmod
from harness.execute.parent.options import RunOptions
from harness.measure.timing import TimingConfig
from harness.pipeline import EvalRequest, evaluate
from harness.problems.registry import load_registry
from harness.records import Status
from harness.report.html import write_report
from harness.report.leaderboard import build_leaderboard, write_leaderboard

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = [ROOT / "submissions" / name for name in ("triton-reference", "tilelang-reference", "defects")]


@pytest.fixture(scope="module")
def bundled(tmp_path_factory):
    out = tmp_path_factory.mktemp("bundled")
    opts = RunOptions(device="cpu", timing=TimingConfig.for_device("cpu"), jobs=1, time_kernels=False,
                      compile_timeout_s=300, round_timeout_s=300)
    registry, env = load_registry(), envmod.snapshot("cpu")

    def run(folders: list[Path], name: str):
        req = EvalRequest(submissions=folders, registry=registry, out_dir=out / name, options=opts, env=env,
                          workload_tags=("smoke",), progress=False)
        return evaluate(req)

    with ThreadPoolExecutor(max_workers=2) as pool:  # the references and the defects side by side
        runs = [pool.submit(run, FOLDERS[:2], "references"), pool.submit(run, FOLDERS[2:], "defects")]
        return out, [r for done in runs for r in done.result()]


def test_every_problem_has_a_candidate_in_both_reference_folders():
    problems = set(load_registry().problems)
    for folder in FOLDERS[:2]:
        assert {p.stem for p in folder.glob("*.py")} == problems, folder.name


def test_triton_candidates_pass_and_tilelang_candidates_lower(bundled):
    _, results = bundled
    bad = []
    for r in results:
        want = Status.LOWERED if r.dsl == "tilelang" else Status.PASSED
        if r.status is not want:
            bad.append((r.candidate, r.status.value, r.error.message[:200] if r.error else ""))
    assert not bad, bad
    assert {r.dsl for r in results} == {"triton", "tilelang"}
    assert len(results) == sum(len(list(f.glob("*.py"))) for f in FOLDERS)


def test_defect_candidates_carry_their_diagnosis(bundled):
    _, results = bundled
    for r in results:
        if r.generator == "defects" and "structural" not in r.candidate and "untuned" not in r.candidate:
            assert any(d["severity"] == "defect" for d in r.diagnostics), r.candidate


def test_leaderboard_and_report(bundled, tmp_path):
    _, results = bundled
    lb = build_leaderboard(results, source="bundled-cpu")
    write_leaderboard(tmp_path / "lb.json", lb)
    assert {g["generator"] for g in lb["ranking"]} >= {"triton-reference", "tilelang-reference", "defects"}
    html, md = write_report(results, tmp_path / "report")
    assert html.stat().st_size > 5000 and "triton-reference" in html.read_text()
