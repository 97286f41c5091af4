"""Ctrl-C, SIGTERM and SIGKILL end every process a run started (issue: a worker outlived ``kernelgate`` as an orphan).

The candidate sleeps in its forward, so a worker is alive and busy when the run is signalled. The test
collects every descendant of the ``kernelgate run`` process while it runs, signals the run, and asserts
that each descendant is gone within a few seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SLEEPER = (ROOT / "submissions" / "triton-reference" / "gelu.py").read_text().replace(
    "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n",
    "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        import time\n        time.sleep(600)\n", 1)


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(d))
    return kids


def _descendants(pid: int) -> set[int]:
    kids, out, todo = _children(), set(), [pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _processes_of_this_run(tmp_path: Path) -> set[int]:
    """Every live process whose environment points into ``tmp_path`` (workers and checkers get HOME and TMPDIR
    in their scratch there): also one started after the signal, or one reparented away from the run."""
    mark = str(tmp_path).encode()
    found = set()
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid():
            try:
                if mark in Path(f"/proc/{d}/environ").read_bytes() and _alive(int(d)):
                    found.add(int(d))
            except OSError:
                continue
    return found


def _cpu_ticks(pid: int) -> int | None:
    """User + system CPU time of ``pid`` in clock ticks (fields 14 and 15 of /proc/PID/stat)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[11]) + int(fields[12])


def _in_the_sleep(scratch: Path, ticks_seen: dict[int, tuple[int | None, float]], idle_s: float = 1.0) -> bool:
    """True once the worker handed the sleeper is asleep in its forward: the parent has written the candidate
    into that worker's scratch folder (its session started), and the worker (whose cwd is that folder) has
    since used no CPU for ``idle_s`` (importing, building and the inputs keep it busy until the sleep).
    ``ticks_seen``: pid -> (CPU ticks, when they were last seen to change), kept between calls."""
    folders = {str(f.parent.resolve()) for f in scratch.glob("*/gelu.py")}
    if not folders:
        return False
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{d}/cwd") not in folders:
                continue
        except OSError:
            continue
        pid, now, ticks = int(d), time.monotonic(), _cpu_ticks(int(d))
        last, since = ticks_seen.get(pid, (None, now))
        if ticks is None or ticks != last:
            ticks_seen[pid] = (ticks, now)
        elif now - since >= idle_s and _alive(pid):
            return True
    return False


def _sigint_default() -> None:
    """The run's SIGINT as a terminal's Ctrl-C leaves it. A test suite started in the background by a
    non-interactive shell (``pytest ... &``) ignores SIGINT, its children inherit that, and Python then installs no
    KeyboardInterrupt handler: the run rightly went on for 60 s after this test's SIGINT (the stack dump showed its
    main thread still waiting for its scheduler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _env(tmp_path: Path) -> dict[str, str]:
    """The run's temporary folder (where its fork server's folder goes) inside ``tmp_path``."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(tmp_path / "tmp"), "PYTHONFAULTHANDLER": "1"}


def _no_fork_server_folder(tmp_path: Path, wait_s: float = 10.0) -> bool:
    """The fork server's folder is gone (removed by the run's close, or by the server itself once orphaned)."""
    deadline = time.monotonic() + wait_s
    while list((tmp_path / "tmp").glob("kg-forkserver-*")):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _start(tmp_path: Path) -> tuple[subprocess.Popen, set[int]]:
    sub = tmp_path / "sleepy"
    sub.mkdir()
    (sub / "gelu.py").write_text(SLEEPER)
    # a next candidate: after a signal no worker may start for it (one did, and outlived the run)
    (sub / "silu.py").write_text((ROOT / "submissions" / "triton-reference" / "silu.py").read_text())
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", str(sub), "--device", "cpu", "--yes-execute", "--no-timing",
         "--jobs", "1", "--round-timeout", "900", "--out", str(tmp_path / "out"), "--scratch", str(tmp_path / "scratch"),
         "--no-progress"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(tmp_path),
        preexec_fn=_sigint_default)
    seen: set[int] = set()
    deadline = time.monotonic() + 240
    sleeping, ticks_seen = False, {}
    while time.monotonic() < deadline and proc.poll() is None:
        seen |= _descendants(proc.pid)
        if len(seen) >= 2 and _in_the_sleep(tmp_path / "scratch", ticks_seen):
            sleeping = True
            break
        time.sleep(0.25)
    assert proc.poll() is None, proc.communicate()[0][-3000:]
    assert sleeping, "the sleeper's worker never reached the sleep in its forward"
    seen |= _descendants(proc.pid)
    assert seen, "the run started no process"
    assert _processes_of_this_run(tmp_path) & seen, "the environment check does not see this run's workers"
    return proc, seen


def _gone(pids: set[int], within_s: float) -> set[int]:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        left = {p for p in pids if _alive(p)}
        if not left:
            return set()
        time.sleep(0.25)
    return {p for p in pids if _alive(p)}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_ends_its_workers_and_removes_their_scratch(tmp_path, sig):
    proc, seen = _start(tmp_path)
    proc.send_signal(sig)
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:  # every thread's stack (PYTHONFAULTHANDLER), then the failure says where
        proc.send_signal(signal.SIGABRT)
        pytest.fail(f"the run did not end within 60 s of {sig.name}: {proc.communicate(timeout=30)[0][-6000:]}")
    assert proc.returncode == 130, out[-3000:]
    assert not _gone(seen, 10), f"still running after {sig.name}: {_gone(seen, 0)}"
    time.sleep(2)
    assert not _processes_of_this_run(tmp_path), f"started or left after {sig.name}: {_processes_of_this_run(tmp_path)}"
    assert not [p for p in (tmp_path / "scratch").glob("*") if p.is_dir()], "scratch folders left behind"
    assert _no_fork_server_folder(tmp_path), "the fork server's folder was left behind"


def test_a_killed_run_leaves_no_orphan(tmp_path):
    proc, seen = _start(tmp_path)
    proc.kill()  # SIGKILL: the run gets no chance to clean up; each child's lifeline must notice
    proc.wait(timeout=30)
    left = _gone(seen, 15)
    assert not left, f"orphans after SIGKILL: {left}"
    assert not _processes_of_this_run(tmp_path), f"orphans after SIGKILL: {_processes_of_this_run(tmp_path)}"
    assert _no_fork_server_folder(tmp_path), "the fork server's folder was left behind after SIGKILL"

