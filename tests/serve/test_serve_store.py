"""The durable queue (harness/serve/store.py): idempotent submissions, atomic admission, claims, recovery."""

from __future__ import annotations

import hashlib
import json
import sqlite3

import pytest

from harness.records import EnvSnapshot, ErrorInfo, JobResult, Status
from harness.serve.store import GeneratorTaken, NewTask, QueueFull, Store

ENV = EnvSnapshot(device_kind="cpu", device_name="cpu", device_uuid=None, driver=None, python="3.11", torch="2.13",
                  triton="3.9", tilelang=None, harness="0.1.0")


def _task(tid: str, key: str, preset: str = "quick", workloads=("smoke",), rerun: bool = False) -> NewTask:
    spec = {"preset": preset, "workloads": [], "tags": [], "source": "x", "generator": "g", "generator_version": "0"}
    return NewTask(tid, key, "alice", spec, tuple(workloads), rerun)


def _rec(task: str, workload: str, run_id: str = "r1") -> JobResult:
    return JobResult(job_id=hashlib.sha256(f"{task}{workload}".encode()).hexdigest()[:20], run_id=run_id,
                     candidate=f"g/p__{task}.py", candidate_sha256="0" * 64, generator="g", generator_version="0",
                     problem_id="p", category="elementwise", workload=workload, dtype="float32", dsl="triton",
                     status=Status.PASSED, flops=1, min_bytes=1, env=ENV, created_at="2025-01-01T00:00:00+00:00")


def _lines(store: Store) -> list[dict]:
    return [json.loads(x) for x in store.jsonl.read_text().splitlines()] if store.jsonl.exists() else []


def test_submit_deduplicates_by_key_within_and_across_calls_and_reruns_make_new_tasks(tmp_path):
    s = Store(tmp_path)
    assert s.submit([_task("t1", "k1"), _task("t2", "k1"), _task("t3", "k2")], 100) == \
        [("t1", False), ("t1", True), ("t3", False)]
    assert s.submit([_task("t4", "k1")], 100) == [("t1", True)]
    assert s.submit([_task("t5", "k1", rerun=True)], 100) == [("t5", False)]
    assert s.submit([_task("t6", "k1")], 100) == [("t5", True)]
    assert s.counts() == {"queued": 3, "running": 0, "done": 0}


def test_a_submission_that_does_not_fit_enqueues_nothing(tmp_path):
    s = Store(tmp_path)
    s.submit([_task("t1", "k1"), _task("t2", "k2")], 3)
    with pytest.raises(QueueFull, match="holds 2 task"):
        s.submit([_task("t3", "k3"), _task("t4", "k4")], 3)
    assert s.counts()["queued"] == 2
    assert s.submit([_task("t5", "k1")], 2) == [("t1", True)]  # a duplicate takes no room


def test_claim_takes_the_oldest_tasks_group_only_and_counts_attempts(tmp_path):
    s = Store(tmp_path)
    s.submit([_task("t1", "k1"), _task("t2", "k2", preset="thorough"), _task("t3", "k3"), _task("t4", "k4")], 100)
    group = lambda t: t.spec["preset"]  # noqa: E731
    got = s.claim("cpu", 2, group)
    assert [t.id for t in got] == ["t1", "t3"] and all(t.attempts == 1 and t.state == "running" for t in got)
    assert [t.id for t in s.claim("cpu", 5, group)] == ["t2"]
    assert [t.id for t in s.claim("cpu", 5, group)] == ["t4"]
    assert s.claim("cpu", 5, group) == []


def test_records_are_stored_and_appended_once_and_complete_the_task(tmp_path):
    s = Store(tmp_path)
    s.submit([_task("t1", "k1", workloads=("a", "b"))], 10)
    s.claim("cpu", 1, lambda t: 0)
    assert s.add_record("t1", _rec("t1", "a"))
    assert not s.add_record("t1", _rec("t1", "a", run_id="r2"))
    assert s.get(["t1"])["t1"].state == "running"
    assert s.add_record("t1", _rec("t1", "b"))
    t = s.get(["t1"])["t1"]
    assert t.state == "done" and sorted(t.recorded) == ["a", "b"]
    assert [(d["workload"], d["run_id"]) for d in _lines(s)] == [("a", "r1"), ("b", "r1")]


def test_recover_requeues_interrupted_tasks_once_and_completes_finished_ones(tmp_path):
    s = Store(tmp_path)
    s.submit([_task("t1", "k1", workloads=("a", "b")), _task("t2", "k2", workloads=("a",)), _task("t3", "k3")], 10)
    s.claim("cpu", 2, lambda t: 0)
    s.add_record("t1", _rec("t1", "a"))
    with sqlite3.connect(s.db_path) as db:  # t2's record stored, then the service died before marking it done
        db.execute("INSERT INTO records VALUES (?, ?, ?, ?, ?, 1, 0)",
                   ("t2", "a", "j", "r", json.dumps(_rec("t2", "a").to_dict())))
        db.execute("UPDATE tasks SET state = 'running' WHERE id = 't2'")
    rec = Store(tmp_path).recover()
    assert rec.requeued == ("t1",) and rec.completed == ("t2",)
    again = Store(tmp_path).recover()
    assert again.requeued == () and again.completed == ()
    t1 = s.claim("cpu", 5, lambda t: 0)[0]
    assert t1.id == "t1" and t1.attempts == 2 and t1.remaining == ("b",)


def test_recover_appends_a_stored_record_missing_from_jsonl_exactly_once(tmp_path):
    s = Store(tmp_path)
    s.submit([_task("t1", "k1", workloads=("a", "b"))], 10)
    s.claim("cpu", 1, lambda t: 0)
    s.add_record("t1", _rec("t1", "a"))
    with sqlite3.connect(s.db_path) as db:
        # killed after the SQLite insert of "b" but before its JSONL append; and "a" appended but not yet marked
        db.execute("INSERT INTO records VALUES (?, ?, ?, ?, ?, 0, 0)",
                   ("t1", "b", _rec("t1", "b").job_id, "r1", json.dumps(_rec("t1", "b").to_dict())))
        db.execute("UPDATE records SET in_jsonl = 0 WHERE workload = 'a'")
    assert Store(tmp_path).recover().appended == 1
    assert Store(tmp_path).recover().appended == 0
    assert sorted(d["workload"] for d in _lines(s)) == ["a", "b"]


def test_a_task_with_a_harness_error_is_not_reused(tmp_path):
    s = Store(tmp_path)
    s.submit([_task("t1", "k1")], 10)
    s.claim("cpu", 1, lambda t: 0)
    s.add_record("t1", _rec("t1", "smoke").replace(
        status=Status.HARNESS_ERROR, error=ErrorInfo("RuntimeError", "checker died")))
    assert s.get(["t1"])["t1"].state == "done"
    assert s.submit([_task("t2", "k1")], 10) == [("t2", False)]
    assert s.submit([_task("t3", "k1")], 10) == [("t2", True)]


@pytest.mark.parametrize("status, error_type, reused", [
    (Status.CRASHED, "WorkerDied", False), (Status.TIMEOUT, "Timeout", False), (Status.TOO_LARGE, "OutOfMemory", False),
    (Status.RUNTIME_ERROR, "MemoryError", False), (Status.COMPILE_ERROR, "ImportError", False),
    (Status.COMPILE_ERROR, "SyntaxError", True), (Status.INCORRECT_NUMERICAL, "INCORRECT_NUMERICAL", True),
    (Status.REWARD_HACK, "StaticAntiCheat", True), (Status.PASSED, None, True),
])
def test_only_verdicts_on_the_candidate_are_served_again(tmp_path, status, error_type, reused):
    """A failure in a worker (a neighbour can re-limit or starve it through the OS) is evaluated again; a verdict
    on the candidate's own code or outputs is the answer."""
    s = Store(tmp_path)
    s.submit([_task("t1", "k1")], 10)
    s.claim("cpu", 1, lambda t: 0)
    extra = {"evidence": {"mechanism": "static_scan"}} if status is Status.REWARD_HACK else {}
    s.add_record("t1", _rec("t1", "smoke").replace(
        status=status, error=ErrorInfo(error_type, "x") if error_type else None, **extra))
    assert s.submit([_task("t2", "k1")], 10) == ([("t1", True)] if reused else [("t2", False)])


def test_a_generator_name_belongs_to_the_first_client(tmp_path):
    s = Store(tmp_path)
    assert s.submit([_task("t1", "k1")], 10) == [("t1", False)]
    bob = NewTask("t2", "k2", "bob", {**_task("x", "k").spec, "generator": "g"}, ("smoke",))
    with pytest.raises(GeneratorTaken, match="generator 'g' belongs to client 'alice'"):
        s.submit([_task("t3", "k3"), bob], 10)
    assert s.get(["t3", "t2"]) == {}  # nothing of the refused submission was enqueued
    assert s.generator_owner("g") == "alice"


def test_an_older_queue_adopts_the_rules_when_opened(tmp_path):
    s = Store(tmp_path)
    s.submit([_task("t1", "k1")], 10)
    s.claim("cpu", 1, lambda t: 0)
    s.add_record("t1", _rec("t1", "smoke").replace(status=Status.CRASHED, error=ErrorInfo("WorkerDied", "x")))
    s.close()
    with sqlite3.connect(tmp_path / "serve" / "queue.sqlite") as db:  # as a harness before the rules left it
        db.execute("UPDATE tasks SET harness_error = 0")
        db.execute("DELETE FROM generators")
        db.execute("DELETE FROM meta WHERE name = 'rules'")
    again = Store(tmp_path)
    assert again.submit([_task("t2", "k1")], 10) == [("t2", False)] and again.generator_owner("g") == "alice"
