"""One run over a folder mixing good, broken and cheating candidates (CPU path, Triton interpreter).

Every fixture's docstring starts with ``expect: STATUS``; the run must finish
with exactly one record per fixture carrying that status. This is the
end-to-end proof that each anti-cheat rule stops the exploit it was written for.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from harness import env as envmod
from harness.execute.parent.options import RunOptions
from harness.measure.timing import TimingConfig
from harness.pipeline import EvalRequest, evaluate
from harness.problems.registry import load_registry
from harness.records import Status
from harness.results.store import load_results

FIXTURES = Path(__file__).parent / "fixtures" / "mixed"


def _expected() -> dict[str, str]:
    out = {}
    for f in sorted(FIXTURES.glob("*.py")):
        text = f.read_text()
        m = re.search(r'expect: ([A-Z_|]+)', text.splitlines()[0])
        assert m, f"{f} must start with a docstring 'expect: STATUS'"
        out[f"mixed/{f.name}"] = m.group(1)
    return out


@pytest.fixture(scope="module")
def run_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    # silu__hang's first call may take round + compile timeout (the first call may compile), and on the CPU path
    # it holds the device gate all that time, so every other candidate's checks wait behind it: 30 s, not 75 s.
    # The other fixtures' steps take about a second here; the limits leave a wide margin on a loaded machine.
    opts = RunOptions(device="cpu", timing=TimingConfig.for_device("cpu"), jobs=2, compile_timeout_s=20,
                      round_timeout_s=10, timing_timeout_s=60)
    req = EvalRequest(submissions=[FIXTURES], registry=load_registry(), out_dir=out, options=opts,
                      env=envmod.snapshot("cpu"), workload_tags=("smoke",), progress=False)
    results = evaluate(req)
    return out, results


def test_every_fixture_gets_its_status(run_results):
    out, results = run_results
    expected = _expected()
    got = {r.candidate: r.status.value for r in results}
    assert sorted(got) == sorted(expected), "exactly one record per fixture"
    wrong = {k: (got[k], expected[k], next(r.error.message[:200] if r.error else "" for r in results if r.candidate == k))
             for k in expected if got[k] not in expected[k].split("|")}
    assert not wrong, f"fixtures with the wrong status (got, expected, detail): {wrong}"


def test_records_are_persisted_once_and_readable(run_results):
    out, results = run_results
    stored = load_results(out)
    assert len(stored) == len(results)
    assert len({r.job_id for r in stored}) == len(stored)


def test_good_candidate_is_timed_on_cpu_and_labelled(run_results):
    _, results = run_results
    good = next(r for r in results if r.candidate == "mixed/gelu.py")
    assert good.status is Status.PASSED
    assert good.correctness.rounds_passed == good.correctness.rounds_run >= 5
    assert good.timing.timer == "host_perf_counter" and good.library_timing is not None
    assert good.env.device_kind == "cpu"
    assert {"startup_s", "import_s", "build_s", "wait_s", "correctness_s", "timing_s"} <= set(good.phase_s)
    # the parts of correctness_s that overhead accounting (tools/benchmark_throughput.py) reads
    parts = {k: good.phase_s[k] for k in ("forward_s", "check_s", "reference_s", "compare_s", "queue_s", "freeze_s")}
    assert all(v >= 0 for v in parts.values())
    assert parts["forward_s"] + parts["check_s"] <= good.phase_s["correctness_s"] + 0.05
    # stopping the worker's tree for every read of its outputs, and letting it run again: the boundary's cost
    assert 0 < parts["freeze_s"] < parts["check_s"] + good.phase_s["timing_s"]
    # the neighbours' GPU work beside the scored sample set is recorded (harness.execute.parent.activity)
    assert good.phase_s["beside_build_s"] >= 0 and good.phase_s["beside_exit_s"] >= 0
    # the checker's own parts of its reply, as it timed them, fit inside the reply's round trip
    assert 0 < parts["reference_s"] + parts["compare_s"] <= parts["check_s"] + 0.01


def test_unknown_problem_suggests_a_name(run_results):
    _, results = run_results
    rec = next(r for r in results if r.candidate == "mixed/layernrom.py")
    assert "did you mean 'layernorm'" in rec.error.message


def test_fake_results_file_did_not_reach_the_store(run_results):
    out, _ = run_results
    assert not (FIXTURES / "results.jsonl").exists()
    for r in load_results(out):
        assert r.candidate.startswith("mixed/")


def test_resume_skips_everything_already_recorded(run_results, tmp_path):
    out, results = run_results
    opts = RunOptions(device="cpu", timing=TimingConfig.for_device("cpu"))
    req = EvalRequest(submissions=[FIXTURES], registry=load_registry(), out_dir=out, options=opts,
                      env=envmod.snapshot("cpu"), workload_tags=("smoke",), resume=True, progress=False)
    again = evaluate(req)
    assert again == []
    assert len(load_results(out)) == len(results)


def test_fixture_docstrings_parse():
    for f in FIXTURES.glob("*.py"):
        if "syntax_error" in f.name:
            continue
        ast.parse(f.read_text())
