"""Append-only JSONL: lossless non-finite floats, truncated lines, concurrent appends, schema."""

from __future__ import annotations

import math
import multiprocessing as mp

import pytest

from harness.jsonio import JsonlProblem, append_jsonl, dumps, read_jsonl
from harness.records import EnvSnapshot, JobResult, Status, TimingStats
from harness.results.store import ResultStore, load_results

ENV = EnvSnapshot("cpu", "test cpu", None, None, "3.11", "2.13", "3.9", "0.1.15", "0.1.0")


def rec(i: int, **kw) -> JobResult:
    base = dict(job_id=f"job{i}", run_id="r", candidate="s/c.py", candidate_sha256="0" * 64, generator="g",
                generator_version="1", problem_id="gelu", category="elementwise", workload="smoke", dtype="float32",
                dsl="triton", status=Status.PASSED, flops=1, min_bytes=2, env=ENV, created_at="2026-01-01T00:00:00+00:00")
    base.update(kw)
    return JobResult(**base)


def test_roundtrip_keeps_nonfinite_and_samples(tmp_path):
    store = ResultStore(tmp_path)
    t = TimingStats(1.0, float("nan"), 0.9, float("inf"), (1.0, 0.9, 1.1), "host_perf_counter", True)
    store.append(rec(1, timing=t, library_timing=t))
    (back,) = store.load()
    assert math.isnan(back.timing.iqr_ms) and math.isinf(back.timing.mean_ms)
    assert back.timing.samples_ms == (1.0, 0.9, 1.1)
    assert dumps(back.to_dict()) == dumps(rec(1, timing=t, library_timing=t).to_dict())  # NaN != NaN, so compare encodings


def test_truncated_last_line_is_reported_not_fatal(tmp_path, capsys):
    store = ResultStore(tmp_path)
    store.append(rec(1))
    with open(store.path, "a") as f:
        f.write('{"job_id": "job2", "trunc')
    store.append(rec(3))  # a new append starts on a fresh line
    ids = [r.job_id for r in load_results(tmp_path)]
    assert ids == ["job1", "job3"]
    assert "not a valid JSON record" in capsys.readouterr().err
    with pytest.raises(JsonlProblem, match=r"results.jsonl:2"):
        read_jsonl(store.path)


def _writer(path, k, barrier):
    barrier.wait()  # all writers append at once
    for i in range(50):
        append_jsonl(path, {"job_id": f"{k}-{i}", "pad": "x" * 5000})


def test_concurrent_appends_each_land_as_one_whole_line(tmp_path):
    path = tmp_path / "results.jsonl"
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(4)
    procs = [ctx.Process(target=_writer, args=(path, k, barrier)) for k in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    rows = read_jsonl(path)  # raises on a line that is not one whole record
    assert len(rows) == 200 and len({r["job_id"] for r in rows}) == 200
    writers = [r["job_id"].split("-")[0] for r in rows]
    assert sum(a != b for a, b in zip(writers, writers[1:])) > 3  # the writers really overlapped


def _append_one(path, started):
    started.set()
    append_jsonl(path, {"job_id": "late"})


def test_an_append_waits_for_the_file_lock(tmp_path):
    """A writer holding the results file's lock (another run appending, ``kernelgate merge``) keeps every other
    append out until it lets go: the append is locked, not merely a single write."""
    import fcntl
    import time

    path = tmp_path / "results.jsonl"
    append_jsonl(path, {"job_id": "first"})
    with open(path, "a") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        ctx = mp.get_context("spawn")
        started = ctx.Event()
        proc = ctx.Process(target=_append_one, args=(path, started))
        proc.start()
        assert started.wait(60)
        time.sleep(0.5)  # an unlocked append would have landed by now
        assert proc.is_alive() and [r["job_id"] for r in read_jsonl(path)] == ["first"]
        fcntl.flock(held.fileno(), fcntl.LOCK_UN)
    proc.join(30)
    assert proc.exitcode == 0 and [r["job_id"] for r in read_jsonl(path)] == ["first", "late"]


def test_unknown_field_is_a_clear_error():
    d = rec(1).to_dict()
    d["latency"] = 3
    with pytest.raises(ValueError, match="unknown field"):
        JobResult.from_dict(d)


def test_gzipped_results_read_as_committed_evidence(tmp_path):
    """Committed device evidence is stored as results.jsonl.gz (evidence/): the reports read it as is."""
    import gzip

    store = ResultStore(tmp_path)
    store.append(rec(1))
    store.append(rec(2))
    gz = tmp_path / "suite_results.jsonl.gz"
    gz.write_bytes(gzip.compress(store.path.read_bytes()))
    assert [r.job_id for r in load_results(gz)] == ["job1", "job2"]
