"""The Ray executor on a local CPU cluster: one batch of records per task, crashes never retried, worker deaths retried.

One ``evaluate(executor="ray")`` over four candidates, with ``run_task``
wrapped so that each attempt is logged and two of them kill their own Ray
worker process (a stand-in for a lost node or an OOM kill):

=====================  =================================  ==================  ========
candidate              what happens                       expected status     attempts
=====================  =================================  ==================  ========
gelu.py                first attempt's Ray worker dies    PASSED (retried)    2
silu__abort.py         the candidate aborts its process   CRASHED (as is)     1
silu__syntax_error.py  static scan, never a task          COMPILE_ERROR       0
gelu__doomed.py        every attempt's Ray worker dies    HARNESS_ERROR       1 + retries
=====================  =================================  ==================  ========

Two shorter runs on the same cluster: a node whose software differs from the
driver's (HARNESS_ERROR, not retried) and a failed GPU health probe (the run
stops, as a local run does). The whole file takes about 20 s on two CPU cores.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Callable

import pytest

ray = pytest.importorskip("ray", reason="the Ray executor's tests need 'ray' (pip install -e '.[dev]')")

from harness import env as envmod  # noqa: E402
from harness.execute.parent import ray_executor  # noqa: E402
from harness.execute.parent.options import RunOptions  # noqa: E402
from harness.jsonio import read_jsonl  # noqa: E402
from harness.measure.timing import TimingConfig  # noqa: E402
from harness.pipeline import EvalRequest, evaluate  # noqa: E402
from harness.problems.registry import load_registry  # noqa: E402
from harness.records import Status  # noqa: E402
from harness.results.store import ResultStore  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MIXED = Path(__file__).parent / "fixtures" / "mixed"
TAGS = ("smoke",)


def _submission(folder: Path) -> Path:
    folder.mkdir()
    shutil.copy(MIXED / "manifest.json", folder / "manifest.json")
    for name in ("gelu.py", "silu__abort.py", "silu__syntax_error.py"):
        shutil.copy(MIXED / name, folder / name)
    (folder / "gelu__doomed.py").write_text((MIXED / "gelu.py").read_text() + "\n# its Ray worker always dies\n")
    return folder


def _instrumented(log: Path, kill: Callable[[str, int], bool] = lambda name, attempt: False,
                  raise_runtime: str = ""):
    """``run_task`` that logs each attempt, kills its Ray worker when ``kill(name, attempt)``, and makes
    the Session raise DeviceUnhealthy (as a failed GPU health probe does) for the file named ``raise_runtime``.

    A nested function, so Ray's cloudpickle ships it by value to the workers;
    the real ``run_task`` it calls is shipped by reference.
    """
    real = ray_executor.run_task

    def run_task(task):
        name = task.candidate.path.name
        with open(log, "a") as fh:
            fh.write(name + "\n")
        if kill(name, log.read_text().splitlines().count(name)):
            os._exit(1)
        if name == raise_runtime:  # this Ray worker process runs one task only, so the patch dies with it
            from harness.execute.parent import session as runner
            from harness.execute.parent.scheduler import DeviceUnhealthy

            def probe_failed(self):
                raise DeviceUnhealthy(f"GPU 0 failed its health probe after {self.c.rel_path}; stopping the run")
            runner.Session.run = probe_failed
        return real(task)
    return run_task


def _request(sub: Path, out: Path, **changes) -> EvalRequest:
    opts = RunOptions(device="cpu", timing=TimingConfig.for_device("cpu"), time_kernels=False,
                      compile_timeout_s=60, round_timeout_s=15, timing_timeout_s=60)
    return EvalRequest(submissions=[sub], registry=load_registry(), out_dir=out, options=opts,
                       env=changes.pop("env", envmod.snapshot("cpu")), workload_tags=TAGS, progress=False,
                       executor="ray", **changes)


def _attempts(log: Path) -> Counter:
    return Counter(log.read_text().splitlines()) if log.exists() else Counter()


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def ray_run(cluster, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ray")
    sub = _submission(tmp / "sub")
    log = tmp / "attempts.log"
    appended: list[str] = []
    real_append = ResultStore.append

    def counting_append(self, result):
        appended.append(result.job_id)
        real_append(self, result)

    def kill(name: str, attempt: int) -> bool:
        return name == "gelu__doomed.py" or (name == "gelu.py" and attempt == 1)

    mp = pytest.MonkeyPatch()
    mp.setattr(ray_executor, "run_task", _instrumented(log, kill))
    mp.setattr(ResultStore, "append", counting_append)
    try:
        results = evaluate(_request(sub, tmp / "out"))
    finally:
        mp.undo()
    return tmp / "out", results, _attempts(log), appended


def test_one_record_per_candidate_and_workload(ray_run):
    out, results, _, _ = ray_run
    reg = load_registry()
    expected = sorted((f"sub/{name}", w.name) for name, pid in
                      (("gelu.py", "gelu"), ("silu__abort.py", "silu"), ("silu__syntax_error.py", "silu"),
                       ("gelu__doomed.py", "gelu"))
                      for w in reg.get(pid).select(TAGS))
    rows = read_jsonl(out / "results.jsonl")
    assert sorted((r["candidate"], r["workload"]) for r in rows) == expected
    assert len({r["job_id"] for r in rows}) == len(rows) == len(results)


def test_statuses(ray_run):
    _, results, _, _ = ray_run
    got = {r.candidate: r.status for r in results}
    assert got == {"sub/gelu.py": Status.PASSED, "sub/silu__abort.py": Status.CRASHED,
                   "sub/silu__syntax_error.py": Status.COMPILE_ERROR, "sub/gelu__doomed.py": Status.HARNESS_ERROR}
    good = next(r for r in results if r.candidate == "sub/gelu.py")
    assert good.correctness.rounds_passed == good.correctness.rounds_run >= 5
    doomed = next(r for r in results if r.candidate == "sub/gelu__doomed.py")
    assert doomed.error.type == "WorkerCrashedError" and "retried" in doomed.error.message


def test_candidate_crash_is_not_retried_but_worker_death_is(ray_run):
    _, _, attempts, _ = ray_run
    assert attempts["silu__abort.py"] == 1
    assert attempts["gelu.py"] == 2
    assert attempts["gelu__doomed.py"] == 1 + ray_executor.DEFAULT_MAX_RETRIES
    assert attempts["silu__syntax_error.py"] == 0


def test_results_are_written_by_the_driver_only(ray_run):
    out, results, _, appended = ray_run
    rows = read_jsonl(out / "results.jsonl")
    assert [r["job_id"] for r in rows] == appended
    assert sorted(appended) == sorted(r.job_id for r in results)


def test_node_that_differs_from_the_driver_is_a_harness_error_not_retried(cluster, tmp_path, monkeypatch):
    sub = tmp_path / "sub"
    sub.mkdir()
    shutil.copy(MIXED / "gelu.py", sub / "gelu.py")
    log = tmp_path / "attempts.log"
    monkeypatch.setattr(ray_executor, "run_task", _instrumented(log))
    driver_env = dataclasses.replace(envmod.snapshot("cpu"), torch="0.0.0-elsewhere")
    results = evaluate(_request(sub, tmp_path / "out", env=driver_env))
    assert [r.status for r in results] == [Status.HARNESS_ERROR] * len(results) and results
    assert results[0].error.type == "NodeSetupError"
    assert "torch: node" in results[0].error.message and "0.0.0-elsewhere" in results[0].error.message
    assert _attempts(log)["gelu.py"] == 1
    assert len(read_jsonl(tmp_path / "out" / "results.jsonl")) == len(results)


def test_unhealthy_gpu_stops_the_run_like_a_local_run(cluster, tmp_path, monkeypatch):
    sub = tmp_path / "sub"
    sub.mkdir()
    shutil.copy(MIXED / "gelu.py", sub / "gelu.py")
    monkeypatch.setattr(ray_executor, "run_task", _instrumented(tmp_path / "attempts.log", raise_runtime="gelu.py"))
    with pytest.raises(RuntimeError, match="failed its health probe"):
        evaluate(_request(sub, tmp_path / "out"))


def test_importing_the_executor_does_not_import_ray():
    code = "import sys, harness.execute.parent.ray_executor, harness.pipeline; assert 'ray' not in sys.modules"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_unknown_executor_is_a_clear_error(tmp_path):
    req = EvalRequest(submissions=[], registry=load_registry(), out_dir=tmp_path, options=RunOptions(),
                      env=envmod.snapshot("cpu"), progress=False, executor="slurm")
    with pytest.raises(ValueError, match="expected 'local' or 'ray'"):
        evaluate(req)


def test_ray_address_without_ray_executor_is_refused(tmp_path):
    from harness.cli import main

    with pytest.raises(SystemExit, match="--ray-address needs --executor ray"):
        main(["run", str(tmp_path), "--device", "cpu", "--ray-address", "auto", "--yes-execute"])
