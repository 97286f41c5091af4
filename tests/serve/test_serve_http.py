"""The service over real HTTP (uvicorn on loopback, httpx), with the fake engine of serve_fakes.py.

Covers auth, the 4xx answers (each names its field), idempotency, reward
and feedback in results, the per-client rate limit, the full-queue 429, and
concurrent submissions from several client processes.
"""

from __future__ import annotations

import json
import multiprocessing as mp

import pytest

from harness.score.reward import REWARD_VERSION
from serve_helpers import GELU, ROOT, TOKENS, client, fake_server, variant, write_tokens


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    base = tmp_path_factory.mktemp("svc")
    srv = fake_server(base / "results", "--delay", "0.02", "--max-queue", "40", "--allow-problem-source",
                      tokens=write_tokens(base / "tokens.json")).start()
    yield srv
    srv.stop()


def _err(resp) -> dict:
    return resp.json()["error"]


def test_health_is_open_and_reports_queue_lanes_and_environment(server):
    with client(server.url, None) as c:
        h = c.get("/v1/health").json()
    assert h["status"] == "ok" and set(h["queue"]) >= {"queued", "running", "done", "capacity"}
    assert h["lanes"][0]["lane"] == "cpu" and h["environment"]["device_name"] == "fake-cpu"
    assert set(h["presets"]) == {"quick", "standard", "thorough"}


def test_token_is_required_and_checked(server):
    with client(server.url, None) as c:
        r = c.post("/v1/tasks", json={"source": GELU, "problem": "gelu"})
        assert r.status_code == 401 and _err(r)["field"] == "Authorization" and "Bearer" in _err(r)["message"]
        r = c.get("/v1/problems", headers={"Authorization": "Bearer not-a-token-at-all"})
        assert r.status_code == 401 and "unknown token" in _err(r)["message"]


def test_submit_long_poll_reward_and_feedback(server):
    with client(server.url) as c:
        sub = c.post("/v1/tasks", json={"source": variant(GELU, 1), "problem": "gelu", "generator": "pol", "generator_version": 7})
        assert sub.status_code == 202
        tid = sub.json()["task_id"]
        v = c.get(f"/v1/tasks/{tid}", params={"wait_s": 20, "include": "records,reward,feedback"}).json()
    assert v["state"] == "done" and v["statuses"] == {"smoke": "PASSED"} and v["generator_version"] == "7"
    rec = v["records"][0]
    assert rec["status"] == "PASSED" and rec["generator"] == "pol" and rec["candidate"].endswith(f"gelu__{tid}.py")
    assert v["reward"]["version"] == REWARD_VERSION and v["reward"]["config"]["speed"] == "sol" and v["reward"]["value"] > 0.5
    assert "## Your previous attempt" in v["feedback"] and "```python" in v["feedback"]


def test_query_many_with_a_reward_config(server):
    with client(server.url) as c:
        r = c.post("/v1/batches", json={"candidates": [{"source": variant(GELU, 10)}, {"source": variant(GELU, 11) + "# FAIL_ME"}],
                                        "problem": "gelu", "preset": "standard"})
        ids = [t["task_id"] for t in r.json()["tasks"]]
        q = c.post("/v1/tasks/query", json={"task_ids": ids, "wait_s": 20, "include": ["reward"],
                                            "reward": {"failure": -2.0, "hack": -3.0}}).json()
    assert q["done"] == 2 and q["pending"] == 0
    good, bad = q["tasks"]
    assert good["preset"] == "standard" and good["reward"]["value"] > 0
    assert bad["reward"]["value"] == -2.0 and bad["reward"]["config"]["failure"] == -2.0


def test_idempotency_same_task_unless_rerun_or_another_preset(server):
    """One client's identical submission is its earlier task; another client's is a task of its own (its records
    carry its name: a client's records never answer another's submission)."""
    src = variant(GELU, 2)
    with client(server.url) as c, client(server.url, "bob") as other:
        a = c.post("/v1/tasks", json={"source": src, "problem": "gelu"}).json()
        b = other.post("/v1/tasks", json={"source": src, "problem": "gelu", "generator": "bob-gen"}).json()
        again = c.post("/v1/tasks", json={"source": src, "problem": "gelu", "rerun": True}).json()
        thorough = c.post("/v1/tasks", json={"source": src, "problem": "gelu", "preset": "thorough"}).json()
        after = c.post("/v1/tasks", json={"source": src, "problem": "gelu"}).json()
        same = c.post("/v1/tasks", json={"source": src, "problem": "gelu"}).json()
    assert not a["deduplicated"] and not b["deduplicated"] and b["task_id"] != a["task_id"]
    assert same["deduplicated"] and same["task_id"] == after["task_id"]
    assert not again["deduplicated"] and again["task_id"] != a["task_id"]
    assert not thorough["deduplicated"] and thorough["task_id"] not in (a["task_id"], again["task_id"])
    assert after["deduplicated"] and after["task_id"] == again["task_id"]  # the latest identical task


@pytest.mark.parametrize("body, status, field, words", [
    (b'{"source": "x", "problem": ', 400, "body", "malformed JSON at line 1"),
    (b"", 400, "body", "empty"),
    (json.dumps({"source": "x" * 300_000, "problem": "gelu"}).encode(), 413, "source", "at most 262144 bytes"),
    (json.dumps({"source": "x", "problem": "gelux"}).encode(), 422, "problem", "did you mean 'gelu'"),
    (json.dumps({"source": "x", "problem": "gelu", "preset": "fast"}).encode(), 422, "preset", "quick"),
    (json.dumps({"sorce": "x", "problem": "gelu"}).encode(), 422, "sorce", "did you mean 'source'"),
    (json.dumps({"problem": "gelu"}).encode(), 422, "source", "missing"),
    (json.dumps({"source": "x", "problem": "gelu", "workloads": ["huge"]}).encode(), 422, "workloads", "it has"),
    (json.dumps({"source": "x", "problem": "gelu", "tags": ["nope"]}).encode(), 422, "tags", "selects no workload"),
    (json.dumps({"source": "x", "problem": "gelu", "rerun": "yes"}).encode(), 422, "rerun", "true or false"),
])
def test_bad_submissions_name_the_field_and_the_fix(server, body, status, field, words):
    with client(server.url) as c:
        r = c.post("/v1/tasks", content=body)
    assert r.status_code == status, r.text
    assert _err(r)["field"] == field and words in _err(r)["message"]


def test_bad_batches_and_reads(server):
    with client(server.url) as c:
        r = c.post("/v1/batches", json={"candidates": [{"source": "x"}, {"source": 3}], "problem": "gelu"})
        assert r.status_code == 422 and _err(r)["field"] == "candidates[1].source"
        r = c.post("/v1/batches", json={"candidates": [{"source": "x"}] * 65, "problem": "gelu"})
        assert r.status_code == 413 and "split the batch" in _err(r)["message"]
        r = c.get("/v1/tasks/tnope")
        assert r.status_code == 404 and "unknown task id" in _err(r)["message"]
        r = c.post("/v1/tasks/query", json={"task_ids": ["tnope"], "include": ["everything"]})
        assert r.status_code == 422 and _err(r)["field"] == "include"
        r = c.post("/v1/tasks/query", json={"task_ids": ["tnope"], "reward": {"speed": "warp"}})
        assert r.status_code == 422 and _err(r)["field"] == "reward" and "'speed'" in _err(r)["message"]
        r = c.get("/v1/tasks/tnope", params={"wait": 3})
        assert r.status_code == 422 and _err(r)["field"] == "wait"
        r = c.get("/v1/nothing")
        assert r.status_code == 404 and "POST /v1/batches" in _err(r)["message"]


def test_rate_limit_per_client_with_retry_after(server):
    with client(server.url, "slow") as slow, client(server.url, "alice") as alice:
        codes = [slow.post("/v1/tasks", json={"source": variant(GELU, 100 + k), "problem": "gelu"}).status_code
                 for k in range(4)]
        assert codes == [202, 202, 202, 429]
        r = slow.post("/v1/tasks", json={"source": variant(GELU, 200), "problem": "gelu"})
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1 and "rate limit of client 'slow'" in _err(r)["message"]
        assert alice.post("/v1/tasks", json={"source": variant(GELU, 201), "problem": "gelu"}).status_code == 202
        r = slow.post("/v1/batches", json={"candidates": [{"source": variant(GELU, 300 + k)} for k in range(4)],
                                           "problem": "gelu"})
        assert r.status_code == 413 and "burst of 3" in _err(r)["message"]


def test_full_queue_answers_429_and_queues_nothing(server):
    with client(server.url) as c:
        before = c.get("/v1/health").json()["queue"]
        r = c.post("/v1/batches", json={"candidates": [{"source": variant(GELU, 500 + k)} for k in range(41)],
                                        "problem": "gelu"})
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
        assert "do not fit" in _err(r)["message"]
        after = c.get("/v1/health").json()["queue"]
        total = lambda q: q["queued"] + q["running"] + q["done"]  # noqa: E731
        assert total(after) == total(before) and after["capacity"] == 40


def test_problem_source_needs_the_operators_consent():
    from harness.serve.submission import Limits, RequestError, parse_submission

    with pytest.raises(RequestError) as err:
        parse_submission({"source": "x", "problem_source": "class Model: pass"}, limits=Limits(allow_problem_source=False))
    assert err.value.status == 403 and err.value.field == "problem_source" and "--allow-problem-source" in str(err.value)


def _client_process(url: str, who: str, k: int, out) -> None:
    from harness.serve.client import ServiceClient

    with ServiceClient(url, TOKENS[who]) as kg:
        cands = [{"source": variant(GELU, 1000 + j)} for j in range(5)]  # the same five in every process
        cands += [{"source": variant(GELU, 2000 + 10 * k + j)} for j in range(5)]  # five of its own
        ids = [kg.submit(c["source"], "gelu")["task_id"] for c in cands[:3]]
        ids += kg.submit_batch(cands[3:], problem="gelu")
        views = kg.wait(ids, timeout_s=120, include=("records",))
    out.put((k, ids, [len(v["records"]) for v in views]))


def test_concurrent_client_processes_share_their_identical_tasks_and_lose_nothing(tmp_path):
    srv = fake_server(tmp_path / "results", "--delay", "0.05", tokens=write_tokens(tmp_path / "tokens.json")).start()
    try:
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        procs = [ctx.Process(target=_client_process, args=(srv.url, ("alice", "bob")[k % 2], k, q)) for k in range(3)]
        for p in procs:
            p.start()
        got = [q.get(timeout=180) for _ in procs]
        for p in procs:
            p.join(timeout=30)
            assert p.exitcode == 0
    finally:
        srv.stop()
    shared = {k % 2: {tuple(ids[:5]) for j, ids, _ in got if j % 2 == k % 2} for k, _, _ in got}
    assert all(len(v) == 1 for v in shared.values())  # a client's processes got the same five tasks for the same five
    assert shared[0] != shared[1]  # sources; the other client got tasks of its own
    all_ids = {t for _, ids, _ in got for t in ids}
    assert len(all_ids) == 2 * 5 + 3 * 5
    assert all(n == [1] * 10 for _, _, n in got)
    lines = [json.loads(x) for x in (tmp_path / "results" / "results.jsonl").read_text().splitlines()]
    assert len(lines) == len(all_ids)  # one record per task and workload, none twice
    assert {ln["candidate"].split("__")[1][:-3] for ln in lines} == all_ids


def test_problem_source_is_loaded_outside_the_server_when_allowed(server, tmp_path):
    problem = (ROOT / "problems" / "elementwise" / "gelu.py").read_text()
    marker = tmp_path / "loaded-by"
    with client(server.url) as c:
        r = c.post("/v1/tasks", json={"source": GELU, "problem_source": problem, "problem": "my_gelu"})
        assert r.status_code == 202, r.text
        v = c.get(f"/v1/tasks/{r.json()['task_id']}", params={"wait_s": 20}).json()
        assert v["problem_id"] == "my_gelu" and v["statuses"] == {"smoke": "PASSED"}
        source = f"import os\nopen({str(marker)!r}, 'a').write(f'{{os.getpid()}}\\n')\nraise SystemExit(3)\n"
        bad = c.post("/v1/tasks", json={"source": GELU, "problem_source": source})
        assert bad.status_code == 422 and _err(bad)["field"] == "problem_source"
        assert "not a usable problem file" in _err(bad)["message"]
    pids = {int(x) for x in marker.read_text().split()}
    assert pids and server.proc.pid not in pids  # the file ran, in a process that is not the service's


def test_example_rl_client_runs_against_a_server(server):
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, str(ROOT / "examples" / "rl_client.py"), "--url", server.url, "--token",
                          TOKENS["alice"], "--problem", "gelu", "--steps", "2", "--variants", "3"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("variant ") >= 6 and "## Your previous attempt" in out.stdout and "best reward: " in out.stdout


def test_an_engine_failure_becomes_harness_error_records_that_are_not_reused(server):
    src = variant(GELU, 900) + "# RAISE_IN_ENGINE\n"
    with client(server.url) as c:
        first = c.post("/v1/tasks", json={"source": src, "problem": "gelu"}).json()
        v = c.get(f"/v1/tasks/{first['task_id']}", params={"wait_s": 20, "include": "records,reward"}).json()
        lane = c.get("/v1/health").json()["lanes"][0]
        again = c.post("/v1/tasks", json={"source": src, "problem": "gelu"}).json()
        c.get(f"/v1/tasks/{again['task_id']}", params={"wait_s": 20})
    assert v["statuses"] == {"smoke": "HARNESS_ERROR"} and v["reward"]["value"] is None
    assert "the engine failed on this batch" in v["records"][0]["error"]["message"]
    assert "RAISE_IN_ENGINE" in lane["last_error"] and lane["state"] != "retired"
    assert not again["deduplicated"] and again["task_id"] != first["task_id"]


def test_records_carry_the_authenticated_client_and_generator_names_belong_to_one_client(server):
    """Was: records named no client, and any client could file records under another's generator name (the
    leaderboard then ranked them there)."""
    with client(server.url) as alice, client(server.url, "bob") as bob:
        mine = alice.post("/v1/tasks", json={"source": variant(GELU, 300), "problem": "gelu", "generator": "alice-pol"})
        v = alice.get(f"/v1/tasks/{mine.json()['task_id']}", params={"wait_s": 20, "include": "records"}).json()
        taken = bob.post("/v1/tasks", json={"source": variant(GELU, 301), "problem": "gelu", "generator": "alice-pol"})
        named = bob.post("/v1/batches", json={"candidates": [{"source": variant(GELU, 302)},
                                                             {"source": variant(GELU, 303), "generator": "alice"}],
                                              "problem": "gelu"})
        own = bob.post("/v1/tasks", json={"source": variant(GELU, 304), "problem": "gelu"})
        w = bob.get(f"/v1/tasks/{own.json()['task_id']}", params={"wait_s": 20, "include": "records"}).json()
    assert v["records"][0]["client"] == "alice" and v["client"] == "alice"
    assert taken.status_code == 403 and _err(taken)["field"] == "generator"
    assert "belongs to client 'alice'" in _err(taken)["message"]
    assert named.status_code == 403 and _err(named)["field"] == "candidates[1].generator"
    assert "name of another client" in _err(named)["message"]
    assert w["records"][0]["client"] == "bob" and w["records"][0]["generator"] == "bob"  # his own name by default


def test_a_stored_crash_is_never_the_answer_to_a_new_submission(server):
    """Was: a crash another client's candidate caused was served from the store ("deduplicated") to a resubmission."""
    src = variant(GELU, 310) + "# CRASH_ME\n"
    with client(server.url) as c:
        first = c.post("/v1/tasks", json={"source": src, "problem": "gelu"}).json()
        v1 = c.get(f"/v1/tasks/{first['task_id']}", params={"wait_s": 20}).json()
        again = c.post("/v1/tasks", json={"source": src, "problem": "gelu"}).json()
        v2 = c.get(f"/v1/tasks/{again['task_id']}", params={"wait_s": 20}).json()
        third = c.post("/v1/tasks", json={"source": src, "problem": "gelu"}).json()
    assert v1["statuses"] == {"smoke": "CRASHED"}
    assert not again["deduplicated"] and again["task_id"] != first["task_id"] and v2["statuses"] == {"smoke": "PASSED"}
    assert third["deduplicated"] and third["task_id"] == again["task_id"]  # a PASSED answer is reused
