"""SIGKILL the service while tasks are queued and running, restart it on the same folder: none lost, none twice.

The fake engine (serve_fakes.py) spends 0.4 s per workload and logs every
record it emits. Six tasks of two workloads each are queued in one batch; the
lane claims two. The server is killed right after the first record of the
first task is stored, so at the kill: task 1 has one of its two records
(partial), task 2 is claimed but has none, tasks 3-6 are queued.
"""

from __future__ import annotations

import json
import sqlite3
import time

from serve_helpers import GELU, client, fake_server, variant, write_tokens

WORKLOADS = ["smoke", "fp16-16384x8192"]


def _events(path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_sigkill_with_tasks_queued_and_running(tmp_path):
    results, calls, tokens = tmp_path / "results", tmp_path / "calls.jsonl", write_tokens(tmp_path / "tokens.json")
    args = ("--delay", "0.4", "--batch-max", "2", "--calls", str(calls))
    srv = fake_server(results, *args, tokens=tokens).start()
    with client(srv.url) as c:
        r = c.post("/v1/batches", json={"candidates": [{"source": variant(GELU, k)} for k in range(6)], "problem": "gelu",
                                        "workloads": WORKLOADS})
        ids = [t["task_id"] for t in r.json()["tasks"]]
    deadline = time.monotonic() + 30
    while not any(e["event"] == "record" for e in _events(calls)):
        assert time.monotonic() < deadline, "the fake engine never emitted a record"
        time.sleep(0.02)
    srv.kill()

    with sqlite3.connect(results / "serve" / "queue.sqlite") as db:
        at_kill = dict(db.execute("SELECT id, state FROM tasks"))
        recorded = db.execute("SELECT task_id, workload FROM records").fetchall()
    assert at_kill[ids[0]] == at_kill[ids[1]] == "running"
    assert all(at_kill[t] == "queued" for t in ids[2:])
    assert recorded == [(ids[0], "smoke")]

    srv = fake_server(results, *args, tokens=tokens).start()
    try:
        with client(srv.url) as c:
            health = c.get("/v1/health").json()
            views = c.post("/v1/tasks/query", json={"task_ids": ids, "wait_s": 30, "include": ["records"]}).json()["tasks"]
            while any(v["state"] != "done" for v in views):
                views = c.post("/v1/tasks/query", json={"task_ids": ids, "wait_s": 30, "include": ["records"]}).json()["tasks"]
    finally:
        srv.stop()
    assert health["recovery"] == {"requeued": 2, "completed": 0, "appended": 0}
    assert [sorted(r["workload"] for r in v["records"]) for v in views] == [sorted(WORKLOADS)] * 6
    assert [v["attempts"] for v in views] == [2, 2, 1, 1, 1, 1]  # running at the kill: re-queued once; queued: run once

    lines = [json.loads(x) for x in (results / "results.jsonl").read_text().splitlines()]
    keys = [(ln["candidate"].split("__")[1][:-3], ln["workload"]) for ln in lines]
    assert len(keys) == 12 and set(keys) == {(t, w) for t in ids for w in WORKLOADS}
    # two batches evaluate at once here: a parse in one thread beside another's once made a HARNESS_ERROR
    # (harness/astparse.py)
    assert [ln["status"] for ln in lines] == ["PASSED"] * 12, [(ln["status"], ln.get("error")) for ln in lines]

    runs = [e for e in _events(calls) if e["event"] == "run"]
    second_life = [e for e in runs if e["pid"] != runs[0]["pid"]]
    first_task_runs = [e["items"][ids[0]] for e in second_life if ids[0] in e["items"]]
    assert first_task_runs == [["fp16-16384x8192"]]  # only the workload without a record was evaluated again
    emitted = [(e["task"], e["workload"]) for e in _events(calls) if e["event"] == "record"]
    assert len(emitted) == len(set(emitted)) == 12
