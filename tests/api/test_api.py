"""The Python API (harness/api.py) through the real engine on the CPU path (smoke workloads)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.api import evaluate, evaluate_async, evaluate_batch
from harness.records import Status
from harness.results.store import load_results
from harness.score.reward import reward_of

ROOT = Path(__file__).resolve().parents[2]
GELU = (ROOT / "submissions" / "triton-reference" / "gelu.py").read_text()
PID = GELU.replace("def forward(self, x: torch.Tensor) -> torch.Tensor:",
                   "def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
                   "        import os\n        raise RuntimeError(f'candidate pid={os.getpid()}')")


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    out = tmp_path_factory.mktemp("api")
    cands = [{"source": GELU, "problem": "gelu", "generator": "me", "generator_version": 2},
             {"source": PID, "problem": ROOT / "problems" / "elementwise" / "gelu.py"},
             {"source": "def broken(:\n", "problem": "gelu"}]
    return out, evaluate_batch(cands, device="cpu", out=out, jobs=2)


def test_batch_records_in_candidate_order_with_the_cli_records(batch):
    _, res = batch
    assert [[r.status for r in rs] for rs in res] == [[Status.PASSED], [Status.RUNTIME_ERROR], [Status.COMPILE_ERROR]]
    good = res[0][0]
    # the CPU path: correctness only unless timing=True (the rule of kernelgate run and the service), no verdict
    assert good.timing is None and good.screening is None and good.problem_id == "gelu"
    assert (good.generator, good.generator_version) == ("me", "2")
    assert reward_of(res[0]).value == 0.5 and reward_of(res[1]).value < 0  # correct, no speed term without a verdict


def test_candidates_never_run_in_the_callers_process(batch):
    _, res = batch
    msg = res[1][0].error.message
    assert "candidate pid=" in msg and int(msg.split("pid=")[1].split()[0]) != os.getpid()


def test_out_folder_gets_a_results_file(batch):
    out, res = batch
    assert sorted(r.job_id for r in load_results(out)) == sorted(r.job_id for rs in res for r in rs)


def test_evaluate_async_is_the_same_job_as_the_batch(batch):
    _, res = batch
    recs = asyncio.run(evaluate_async(GELU, "gelu", device="cpu", preset="standard", generator="me", generator_version="2"))
    assert [r.status for r in recs] == [Status.PASSED]
    assert recs[0].job_id == res[0][0].job_id and recs[0].run_id != res[0][0].run_id  # same content, another run


def test_the_engine_adapter_hands_the_executor_to_the_pipeline_and_fills_missing_records(monkeypatch, tmp_path):
    import harness.pipeline

    seen = {}

    def fake_evaluate(req):  # records nothing: the adapter must then write HARNESS_ERROR records itself
        seen.update(executor=req.executor, address=req.ray_address, names=req.workload_names,
                    files=sorted(p.name for f in req.submissions for p in f.glob("*.py")))
        return []
    monkeypatch.setattr(harness.pipeline, "evaluate", fake_evaluate)
    recs = evaluate(GELU, "gelu", device="cpu", executor="ray", ray_address="auto", workloads=["smoke"])
    assert seen == {"executor": "ray", "address": "auto", "names": ("smoke",), "files": ["gelu__c0.py"]}
    assert [(r.status, r.workload, r.error.type) for r in recs] == [(Status.HARNESS_ERROR, "smoke", "NoRecord")]


@pytest.mark.parametrize("kwargs, error, words", [
    ({"problem": "gelux"}, ValueError, "did you mean 'gelu'"),
    ({"problem": "gelu", "preset": "fast"}, ValueError, "quick"),
    ({"problem": "gelu", "workloads": ["huge"]}, ValueError, "has no workload matching"),
    ({"problem": "gelu", "device": "tpu"}, ValueError, "'cuda' or 'cpu'"),
    ({"problem": "gelu", "executor": "slurm"}, ValueError, "'local' or 'ray'"),
    ({"problem": 3}, TypeError, "problem id"),
])
def test_bad_arguments_fail_before_anything_runs(kwargs, error, words):
    problem = kwargs.pop("problem")
    with pytest.raises(error, match=words):
        evaluate(GELU, problem, **{"device": "cpu", **kwargs})


def test_importing_the_api_loads_nothing_heavy():
    code = ("import sys, harness.api\n"
            "print(','.join(m for m in ('torch', 'numpy', 'fastapi', 'httpx', 'triton') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0 and out.stdout.strip() == "", out.stderr


@pytest.mark.parametrize("timing, timed", [(None, False), (True, True), (False, False)])
def test_the_cpu_path_times_only_when_asked_as_the_cli(monkeypatch, timing, timed):
    """Was: the API timed candidates on the CPU path (the CLI did not), so feedback said "not timed" beside a
    library timing's noise. One rule now (harness.serve.presets.timing_default) for the CLI, the API, the service."""
    import harness.pipeline

    seen = {}

    def fake_evaluate(req):
        seen.update(time_kernels=req.options.time_kernels, ceilings=req.ceilings)
        return []
    monkeypatch.setattr(harness.pipeline, "evaluate", fake_evaluate)
    monkeypatch.setattr("harness.measure.calibrate.load_or_measure", lambda *a, **k: {"measured": "in a test"})
    evaluate(GELU, "gelu", device="cpu", **({} if timing is None else {"timing": timing}))
    assert seen["time_kernels"] is timed and (seen["ceilings"] is not None) is timed
