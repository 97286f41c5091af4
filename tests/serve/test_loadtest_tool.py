"""tools/serve_loadtest.py, the service's load test, on the CPU path at a tiny scale: its checks pass on a real
service (a real uvicorn, client processes, the real engine), and --lockstep submits a client's next batch only
after the previous batch's results came back (an RL loop's steps)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")


def test_lockstep_clients_wait_for_each_step_and_nothing_is_lost(tmp_path):
    out = tmp_path / "lt"
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "serve_loadtest.py"), "--n", "4", "--clients", "2",
                           "--batch", "1", "--lockstep", "--device", "cpu", "--no-cli", "--tags", "smoke",
                           "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads((out / "loadtest.json").read_text())
    s = report["service"]
    assert report["lockstep"] and s["complete"] and s["checks"]["ok"], s["checks"]
    assert s["records"] == 4
    by_client: dict[int, list[dict]] = {}
    for line in (out / "seen-0.jsonl").read_text().splitlines() + (out / "seen-1.jsonl").read_text().splitlines():
        t = json.loads(line)
        by_client.setdefault(t["k"] % 2, []).append(t)
    for tasks in by_client.values():
        tasks.sort(key=lambda t: t["submitted"])
        for earlier, later in zip(tasks, tasks[1:]):
            assert later["submitted"] >= earlier["seen_done"], "a step was submitted before the previous one's result"
