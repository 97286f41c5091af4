"""Small builders shared by the engine's tests (not a test module)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from harness import env as envmod
from harness.candidates.discover import discover
from harness.execute.parent.gate import DeviceGate
from harness.execute.parent.memory import DeviceMemory
from harness.execute.parent.options import RunOptions
from harness.execute.parent.task import DeviceContext, Task
from harness.problems.registry import load_registry

FIXTURES = Path(__file__).parent / "fixtures"


def task_for(folder: Path, name: str, problem: str, tags: tuple[str, ...] = ("smoke",), **kw) -> Task:
    """The Task of candidate ``name`` of ``folder`` for ``problem`` (its bytes read as the planner does)."""
    _, cands = discover(folder)
    cand = next(c for c in cands if c.path.name == name)
    prob = load_registry().get(problem)
    return Task(candidate=cand, problem=prob, workloads=tuple(prob.select(tags)), diagnostics=(),
                source=cand.path.read_bytes(), **kw)


def device_context(opts: RunOptions, checkers=None, pool=None, gate=None) -> DeviceContext:
    return DeviceContext(opts=opts, env=envmod.snapshot(opts.device), run_id="20260101T000000Z-test", gpu=None,
                         checkers=checkers, gate=gate or DeviceGate(1), memory=DeviceMemory(None), pool=pool,
                         screen_for=None, lock=threading.Lock())


def run_runner(script: Path, args: dict, report: Path, bound_s: float, cwd: Path) -> tuple[dict | None, str, float]:
    """Run ``script`` (a runner written to a file, so its command line is a path) with ``args`` as JSON, in its own
    session, killed with its whole group after ``bound_s``: (the report it wrote or None, its output's tail with
    its exit code, wall seconds)."""
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, str(script), json.dumps(args)], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=bound_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        out += f"\n[killed after {bound_s} s]".encode()
    wall = time.monotonic() - t0
    text = out.decode(errors="replace")[-3000:] + f"\n[runner exit code {proc.returncode}]"
    return (json.loads(report.read_text()) if report.exists() else None), text, wall
