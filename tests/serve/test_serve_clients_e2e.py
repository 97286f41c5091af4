"""Two clients and a saboteur, through `kernelgate serve` on the CPU path with the real engine.

Bob submits a candidate whose forward re-limits and re-schedules every other process of the service it can see
(its pre-started workers, checkers and fork server): ``resource.prlimit`` (address space), ``os.sched_setaffinity``
and ``os.setpriority``, found by scanning ``/proc``. It only touches descendants of this test's own service (the
service's results folder is written into its source), so nothing outside the test is affected. Then Alice
submits two correct kernels, and her first one again.

* Her resubmission is never answered from the store with a failure the harness or a neighbour could have caused
  (CRASHED, TIMEOUT, RUNTIME_ERROR, ...): it is evaluated again (harness/serve/store.py ``reusable``).
* Every record carries the client that submitted it, and each client's name is its own.
* Her correct kernels come back PASSED: this needs the saboteur unable to reach other processes at all, which is
  the worker's own PID namespace (the OS boundary), not something the service can decide. Bob's forward raises
  with the number of processes it reached, so the test also shows that his code ran (it was not refused before
  running, which would prove nothing about the boundary).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from serve_helpers import GELU, ROOT, Server, free_port, variant

pytestmark = pytest.mark.slow

SABOTAGE = '''

def _sabotage(marker):
    import os
    res = __import__("reso" + "urce")
    parent, cmdline = {}, {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    parent[int(name)] = int(f.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    cmdline[int(name)] = f.read().replace(b"\\0", b" ").decode(errors="replace")
            except (OSError, ValueError, IndexError):
                pass
    roots = [p for p, c in cmdline.items() if "harness.commands.serve" in c and marker in c]
    if not roots:
        return []
    tree, grew = {roots[0]}, True
    while grew:
        grew = False
        for p, pp in parent.items():
            if pp in tree and p not in tree:
                tree.add(p)
                grew = True
    hit = []
    for pid in sorted(tree - {roots[0], os.getpid()}):
        for call in (lambda: getattr(res, "prl" + "imit")(pid, res.RLIMIT_AS, (1 << 28, 1 << 28)),
                     lambda: getattr(os, "sched_set" + "affinity")(pid, {0}),
                     lambda: getattr(os, "setprio" + "rity")(os.PRIO_PROCESS, pid, 19)):
            try:
                call()
                hit.append(pid)
            except Exception:
                pass
    return sorted(set(hit))
'''


def _saboteur(marker: str) -> str:
    head = "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
    src = GELU.replace(head, head + f'        raise RuntimeError("sabotaged %d process(es)" % len(_sabotage({marker!r})))\n', 1)
    assert src != GELU
    return src + SABOTAGE


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    base = tmp_path_factory.mktemp("clients")
    tokens, results, port = base / "tokens.json", base / "results", free_port()
    secrets = {}
    for who in ("alice", "bob"):
        made = subprocess.run([sys.executable, "-m", "harness.commands.serve", "--add-client", who, "--tokens",
                               str(tokens)], cwd=ROOT, check=True, capture_output=True, text=True)
        secrets[who] = [ln for ln in made.stdout.splitlines() if ln.startswith("kg_")][-1]
    srv = Server([sys.executable, "-m", "harness.commands.serve", "--results", str(results), "--tokens", str(tokens),
                  "--device", "cpu", "--port", str(port), "--jobs", "2", "--yes-execute", "--log-level", "warning",
                  "--linger", "0"], port, base / "server.log").start(timeout_s=120)
    from harness.serve.client import ServiceClient

    try:
        with ServiceClient(srv.url, secrets["bob"]) as bob, ServiceClient(srv.url, secrets["alice"]) as alice:
            (sab,) = bob.wait([bob.submit(_saboteur(str(results)), "gelu")["task_id"]], timeout_s=300,
                              include=("records",))
            ids = alice.submit_batch([{"source": variant(GELU, 1)}, {"source": variant(GELU, 2)}], problem="gelu",
                                     generator="alice-gen")
            first = alice.wait(ids, timeout_s=300, include=("records",))
            again = alice.submit(variant(GELU, 1), "gelu", generator="alice-gen")
            (second,) = alice.wait([again["task_id"]], timeout_s=300, include=("records",))
    finally:
        srv.stop()
    lines = [json.loads(x) for x in (results / "results.jsonl").read_text().splitlines()]
    return {"sab": sab, "ids": ids, "first": first, "again": again, "second": second, "lines": lines}


def test_a_resubmission_is_never_answered_with_a_failure_a_neighbour_could_cause(scenario):
    from harness.records import JobResult
    from harness.serve.store import reusable

    first, again, second = scenario["first"][0], scenario["again"], scenario["second"]
    stored = [JobResult.from_dict(r) for r in first["records"]]
    if all(reusable(r) for r in stored):
        assert again["deduplicated"] and again["task_id"] == first["task_id"]
    else:  # a crash, timeout or runtime error is not the answer: the same kernel was evaluated again
        assert not again["deduplicated"] and again["task_id"] != first["task_id"]
        assert second["state"] == "done" and second["records"] and second["started_at"] is not None


def test_the_saboteur_ran(scenario):
    (rec,) = scenario["sab"]["records"]
    assert rec["status"] == "RUNTIME_ERROR" and "sabotaged " in rec["error"]["message"], rec


def test_every_record_names_the_client_that_submitted_it(scenario):
    by_task = {ln["candidate"].split("__")[1][:-3]: ln for ln in scenario["lines"]}
    assert by_task[scenario["sab"]["task_id"]]["client"] == "bob"
    assert by_task[scenario["sab"]["task_id"]]["generator"] == "bob"
    for tid in scenario["ids"]:
        assert by_task[tid]["client"] == "alice" and by_task[tid]["generator"] == "alice-gen"


def test_the_saboteur_cannot_hurt_the_other_clients_correct_kernels(scenario):
    statuses = [v["statuses"]["smoke"] for v in scenario["first"]] + [scenario["second"]["statuses"]["smoke"]]
    assert statuses == ["PASSED", "PASSED", "PASSED"], [v.get("records") for v in scenario["first"]]
