"""Environment faults (harness/score/environment.py) and the planner's canary (harness/pipeline.py).

The two error texts are the ones a virtual environment inside the checkout produced on the CPU path (every Triton
candidate: RUNTIME_ERROR on torch's ``_device.py``; every TileLang one: COMPILE_ERROR on ``tilelang/__init__.py``),
with the checkout's path replaced by ``{prefix}``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.records import EnvSnapshot, ErrorInfo, Status
from harness.results.ids import static_record
from harness.score.environment import (ENVIRONMENT_FAULT, InterpreterPaths, Watch, as_harness_error, fault_of,
                                       is_environment_fault)

ROOT = Path(__file__).resolve().parents[2]
ENV = EnvSnapshot(device_kind="cpu", device_name="cpu", device_uuid=None, driver=None, python="3.11", torch="2.13",
                  triton="3.9", tilelang=None, harness="0.1.0")
PREFIX = "/home/u/kernelgate/.venv"
SITE = f"{PREFIX}/lib/python3.11/site-packages"
TORCH_DENIED = ErrorInfo("PermissionError", f"[Errno 13] Permission denied: '{SITE}/torch/utils/_device.py'", (
    'Traceback (most recent call last):\n  File "{prefix}/../harness/execute/worker/main.py", line 189, in workload\n'
    "    ref_model = self.make_reference_model(module, w.dtype, self.device, w.model_seed, spec.mode)\n"
    '  File "<frozen importlib._bootstrap_external>", line 1130, in get_data\n'
    f"PermissionError: [Errno 13] Permission denied: '{SITE}/torch/utils/_device.py'\n"))
TILELANG_DENIED = ErrorInfo("PermissionError", f"[Errno 13] Permission denied: '{SITE}/tilelang/__init__.py'")
PATHS = InterpreterPaths((PREFIX, SITE, "/usr/lib/python3.11"), project_root="/home/u/kernelgate")


def _rec(status: Status, error: ErrorInfo, name: str = "gelu.py"):
    from harness.candidates.discover import Candidate

    cand = Candidate(path=Path(name), rel_path=f"sub/{name}", problem_id="gelu", variant="", dsl="triton",
                     sha256="0" * 64, generator="g", generator_version="1")
    return static_record(cand, None, None, status, error, ENV, "r1")


def test_a_permission_denial_on_the_interpreters_files_is_an_environment_fault():
    for status, err in ((Status.RUNTIME_ERROR, TORCH_DENIED), (Status.COMPILE_ERROR, TILELANG_DENIED)):
        fault = fault_of(_rec(status, err), PATHS)
        assert fault is not None and fault.root == SITE and fault.path.startswith(SITE)
    so = ErrorInfo("ImportError", f"{SITE}/torch/lib/libtorch_cpu.so: cannot open shared object file: Permission denied")
    assert fault_of(_rec(Status.COMPILE_ERROR, so), PATHS) is not None


@pytest.mark.parametrize("status, error", [
    (Status.RUNTIME_ERROR, ErrorInfo("PermissionError", "[Errno 13] Permission denied: '/etc/shadow'")),  # not ours
    (Status.RUNTIME_ERROR, ErrorInfo("ValueError", "bad block size")),
    (Status.INCORRECT_NUMERICAL, ErrorInfo("INCORRECT_NUMERICAL", f"[Errno 13] Permission denied: '{SITE}/x.py'")),
    (Status.TIMEOUT, TORCH_DENIED),  # a timeout is not what an unreadable file produces
])
def test_other_failures_are_the_candidates(status, error):
    assert fault_of(_rec(status, error), PATHS) is None


def test_the_reclassified_record_names_the_cause_and_the_fix_and_keeps_the_workers_text():
    rec = _rec(Status.RUNTIME_ERROR, TORCH_DENIED)
    out = as_harness_error(rec, fault_of(rec, PATHS), PATHS)
    assert out.status is Status.HARNESS_ERROR and out.error.type == ENVIRONMENT_FAULT and is_environment_fault(out)
    assert "not the candidate" in out.error.message and "inside the project folder /home/u/kernelgate" in out.error.message
    assert "python -m venv" in out.error.message and "--resume" in out.error.message
    assert "torch/utils/_device.py" in out.error.traceback_tail
    outside = InterpreterPaths((SITE,), project_root="/srv/checkout")
    assert "make " + SITE + " readable" in as_harness_error(rec, fault_of(rec, outside), outside).error.message


def test_the_running_interpreters_own_folders_are_roots():
    paths = InterpreterPaths.of_this_interpreter()
    assert paths.root_of(str(Path(sys.prefix) / "lib" / "x.py")) is not None
    import json

    assert paths.root_of(json.__file__) is not None  # the standard library
    assert paths.root_of("/nonexistent/elsewhere.py") is None


def test_the_watch_holds_suspects_stops_when_the_first_ones_all_are_and_trusts_only_the_canary():
    w = Watch(PATHS)
    assert not w.see([_rec(Status.RUNTIME_ERROR, TORCH_DENIED, "a.py")]) and not w.stop
    assert not w.see([_rec(Status.COMPILE_ERROR, TILELANG_DENIED, "b.py")]) and w.stop
    records, fault = w.resolve([_rec(Status.RUNTIME_ERROR, TORCH_DENIED, "canary.py")])
    assert fault is not None and [r.status for r in records] == [Status.HARNESS_ERROR] * 2

    hostile = Watch(PATHS)  # a candidate that provokes the denial itself, in a working environment
    assert hostile.see([_rec(Status.PASSED, None, "ok.py").replace(error=None)])
    assert not hostile.see([_rec(Status.RUNTIME_ERROR, TORCH_DENIED, "writes-site-packages.py")])
    assert not hostile.stop  # a candidate already got through
    records, fault = hostile.resolve([_rec(Status.PASSED, None, "canary.py").replace(error=None)])
    assert fault is None and [r.status for r in records] == [Status.RUNTIME_ERROR]  # its own failure, as it came


class _FakeExecutor:
    """Every candidate but those named ``ok`` (and the canary when ``canary_ok``) fails on torch's file under this
    interpreter's site-packages, as a worker that cannot read the environment does."""

    def __init__(self, opts, env, run_id, *, canary_ok: bool, **_):
        self.env, self.run_id, self.canary_ok, self.ran = env, run_id, canary_ok, []

    def run(self, tasks, emit, stop=None, on_drained=None):
        from harness.execute.parent.scheduler import ScheduleReport

        site = InterpreterPaths.of_this_interpreter().roots[-1]
        report = ScheduleReport()
        for k, task in enumerate(tasks):
            if stop is not None and stop.is_set():
                report.not_run = list(tasks[k:])
                break
            self.ran.append(task.candidate.rel_path)
            good = "ok" in task.candidate.rel_path or ("canary" in task.candidate.rel_path and self.canary_ok)
            err = ErrorInfo("PermissionError", f"[Errno 13] Permission denied: '{site}/torch/utils/_device.py'")
            recs = [static_record(task.candidate, task.problem, w, Status.RUNTIME_ERROR, err, self.env, self.run_id)
                    if not good else static_record(task.candidate, task.problem, w, Status.RUNTIME_ERROR, err, self.env,
                                                   self.run_id).replace(status=Status.PASSED, error=None)
                    for w in task.workloads]
            emit(task, recs)
        return report

    def close(self):
        pass


def _run(tmp_path, monkeypatch, names, *, canary_ok: bool, resume: bool = False):
    import harness.execute.parent.local as local
    from harness.execute.parent.options import RunOptions
    from harness.pipeline import EvalRequest, run_evaluation
    from harness.problems.registry import load_registry

    made = []

    def executor(*a, **k):
        made.append(_FakeExecutor(*a, canary_ok=canary_ok, **k))
        return made[-1]

    monkeypatch.setattr(local, "LocalExecutor", executor)
    sub = tmp_path / "sub"
    sub.mkdir(exist_ok=True)
    gelu = (ROOT / "submissions" / "triton-reference" / "gelu.py").read_text()
    for k, name in enumerate(names):
        (sub / f"gelu__{name}.py").write_text(gelu + f"\n# {k}\n")
    req = EvalRequest(submissions=[sub], registry=load_registry(), out_dir=tmp_path / "out",
                      options=RunOptions(device="cpu", time_kernels=False), env=ENV, workload_tags=("smoke",),
                      progress=False, resume=resume)
    return req, made, run_evaluation


def test_a_run_whose_first_candidates_fail_on_the_environment_stops_early_and_says_so(tmp_path, monkeypatch):
    """Was: all 52 candidates of the quick start recorded as the candidates' RUNTIME_ERROR/COMPILE_ERROR, exit 0."""
    from harness.pipeline import EnvironmentBroken
    from harness.results.store import load_results

    req, made, run = _run(tmp_path, monkeypatch, ["a", "b", "c", "d", "e"], canary_ok=False)
    with pytest.raises(EnvironmentBroken, match=r"stopped early: 2 record\(s\) failed because of the environment.*"
                                                r"3 candidate\(s\) not run"):
        run(req)
    recs = load_results(tmp_path / "out")
    assert [r.status for r in recs] == [Status.HARNESS_ERROR] * 2 and all(is_environment_fault(r) for r in recs)
    assert made[0].ran[-1] == "kernelgate-canary/gelu.py"  # the canary confirmed it
    req2, made2, run2 = _run(tmp_path, monkeypatch, ["a", "b", "c", "d", "e"], canary_ok=False, resume=True)
    with pytest.raises(EnvironmentBroken):
        run2(req2)
    assert made2[0].ran[0] in {"sub/gelu__a.py", "sub/gelu__b.py"}  # --resume evaluates environment faults again


def test_a_candidate_cannot_fake_an_environment_fault(tmp_path, monkeypatch):
    """The same text from candidates, with a canary that passes: their failures stand, and the run carries on."""
    req, made, run = _run(tmp_path, monkeypatch, ["a", "b", "c", "ok"], canary_ok=True)
    out = run(req)
    by_name = {r.candidate: r.status for r in out.results}
    assert by_name == {"sub/gelu__a.py": Status.RUNTIME_ERROR, "sub/gelu__b.py": Status.RUNTIME_ERROR,
                       "sub/gelu__c.py": Status.RUNTIME_ERROR, "sub/gelu__ok.py": Status.PASSED}
    assert made[0].ran.count("kernelgate-canary/gelu.py") == 1 and out.not_run == 0


def test_the_api_never_gives_a_correct_kernel_the_failure_reward_for_the_environment(tmp_path, monkeypatch):
    """Was: through the Python API a correct kernel got RUNTIME_ERROR, reward -0.5, in an environment the workers
    could not read: an RL loop trained on it unnoticed. Now the call raises, naming the cause and the fix, and the
    records it wrote are HARNESS_ERROR (no reward)."""
    import harness.execute.parent.local as local
    from harness.api import evaluate
    from harness.pipeline import EnvironmentBroken
    from harness.results.store import load_results
    from harness.score.reward import reward_of

    monkeypatch.setattr(local, "LocalExecutor", lambda *a, **k: _FakeExecutor(*a, canary_ok=False, **k))
    gelu = (ROOT / "submissions" / "triton-reference" / "gelu.py").read_text()
    with pytest.raises(EnvironmentBroken, match="Fix: "):
        evaluate(gelu, "gelu", device="cpu", out=tmp_path / "api")
    (rec,) = load_results(tmp_path / "api")
    assert rec.status is Status.HARNESS_ERROR and reward_of([rec]).value is None
