"""End to end through the real engine: `kernelgate serve` on the CPU path, tiny Triton kernels on smoke workloads.

One batch of four candidates: the bundled Triton GELU (PASSED, timed and
screened: positive reward), a GELU whose forward raises with its process id
(RUNTIME_ERROR, negative reward; the id proves it ran outside the server), a
GELU that starts a thread (refused by the static scan: REWARD_HACK, never
run), and a syntax error (COMPILE_ERROR). Nothing is timed (the CPU path's
rule, as `kernelgate run`). Then a resubmission of the PASSED kernel is
answered from the store, and `kernelgate leaderboard` reads the service's results folder.
"""

from __future__ import annotations

import subprocess
import sys

from harness.cli import main
from serve_helpers import GELU, ROOT, Server, free_port

RAISES = GELU.replace("def forward(self, x: torch.Tensor) -> torch.Tensor:",
                      "def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
                      "        import os\n        raise RuntimeError(f'candidate pid={os.getpid()}')")
THREAD = "import threading\n" + GELU + "\nthreading.Thread(target=print).start()\n"


def test_serve_evaluates_through_the_engine_and_never_in_its_own_process(tmp_path, capsys):
    assert RAISES != GELU
    tokens = tmp_path / "tokens.json"
    made = subprocess.run([sys.executable, "-m", "harness.commands.serve", "--add-client", "e2e", "--tokens", str(tokens)],
                          cwd=ROOT, check=True, capture_output=True, text=True)
    secret = [ln for ln in made.stdout.splitlines() if ln.startswith("kg_")][-1]
    assert secret not in tokens.read_text()
    results, port = tmp_path / "results", free_port()
    srv = Server([sys.executable, "-m", "harness.commands.serve", "--results", str(results), "--tokens", str(tokens),
                  "--device", "cpu", "--port", str(port), "--jobs", "2", "--yes-execute", "--log-level", "warning"],
                 port, tmp_path / "server.log").start(timeout_s=120)
    from harness.serve.client import ServiceClient

    try:
        with ServiceClient(srv.url, secret) as kg:
            ids = kg.submit_batch([{"source": GELU}, {"source": RAISES}, {"source": THREAD}, {"source": "def broken(:\n"}],
                                  problem="gelu", generator="e2e-gen")
            views = kg.wait(ids, timeout_s=300, include=("records", "reward", "feedback"))
            again = kg.submit(GELU, "gelu")
            health = kg.health()
    finally:
        srv.stop()
    statuses = [v["statuses"]["smoke"] for v in views]
    assert statuses == ["PASSED", "RUNTIME_ERROR", "REWARD_HACK", "COMPILE_ERROR"], [v["records"] for v in views]
    ok, raised, hack, broken = views
    rec = ok["records"][0]
    # the CPU path: no timing unless asked (the rule of kernelgate run and the API), so no verdict either
    assert rec["timing"] is None and rec["screening"] is None and rec["generator"] == "e2e-gen"
    assert rec["client"] == "e2e"
    assert "not timed" in ok["feedback"] and "noisy" not in ok["feedback"]
    assert ok["reward"]["value"] == 0.5 and raised["reward"]["value"] == -0.5 and hack["reward"]["value"] == -1.0
    pid = int(raised["records"][0]["error"]["message"].split("pid=")[1].split()[0])
    assert pid != srv.proc.pid
    assert "candidate pid=" in raised["feedback"] and "```python" in raised["feedback"]
    assert again["deduplicated"] and again["task_id"] == ids[0]
    assert health["throughput"]["records_last_window"] == 4
    lines = (results / "results.jsonl").read_text().splitlines()
    assert len(lines) == 4
    assert main(["leaderboard", "--results", str(results)]) == 0
    assert "e2e-gen" in capsys.readouterr().out
