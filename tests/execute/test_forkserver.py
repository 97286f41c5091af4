"""Workers forked from the fork server: the same worker as one started by exec, without the server's reach.

The exploit this ships with is tests/execute/fixtures/hostile/gelu__reach_fork_server.py (a candidate that
looks for the server's control socket among its descriptors); test_hostile runs it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from harness.execute.parent import forks as forkserver
from harness.execute.forkserver import server as zygote
from harness.execute.parent.pool import prestart_settings
from harness.execute.parent.options import RunOptions
from harness.execute.parent.children import kill_group
from harness.execute.parent.process import WorkerProc, make_scratch, spawn_worker, wait_ready
from harness.problems.registry import load_registry

pytestmark = pytest.mark.skipif(not forkserver.supported(), reason="fork servers need Linux pidfds")


def _ppid(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _forked(tmp_path: Path) -> WorkerProc:
    opts = RunOptions(device="cpu", sandbox=False)
    pre = prestart_settings(opts, [load_registry().get("gelu").path])
    w = spawn_worker(make_scratch(tmp_path, "fork"), "cpu", None, pre, fork=True)
    assert isinstance(w.proc, forkserver.ForkedProc), f"started with exec, not forked: {forkserver.last_problem()}"
    assert wait_ready(w, 120.0), w.err_buf.text()[-2000:]
    return w


def test_forked_worker_is_the_servers_child_in_its_own_session_and_folder(tmp_path):
    w = _forked(tmp_path)
    try:
        server = forkserver.server_for("cpu")
        assert _ppid(w.proc.pid) == server.proc.pid
        assert os.getsid(w.proc.pid) == w.proc.pid  # kill_group kills its group, not the server's
        assert os.path.realpath(f"/proc/{w.proc.pid}/cwd") == os.path.realpath(w.scratch)
        # the import was the server's: the worker's own import step is a fraction of a fresh interpreter's
        assert w.warm_s["import_s"] < 0.5, w.warm_s
    finally:
        code = kill_group(w.proc)
        w.close_fds()
    assert code == -9 and w.proc.poll() == -9


def test_forked_worker_holds_no_socket(tmp_path):
    """Bug it stops: a worker that kept the server's control socket could ask it for a worker without the
    sandbox (the server forks whatever it is sent)."""
    w = _forked(tmp_path)
    try:
        links = []
        for fd in os.listdir(f"/proc/{w.proc.pid}/fd"):
            try:
                links.append(os.readlink(f"/proc/{w.proc.pid}/fd/{fd}"))
            except OSError:
                pass
        assert links and not [x for x in links if x.startswith("socket:")], links
    finally:
        kill_group(w.proc)
        w.close_fds()


def test_ended_workers_are_reaped_by_the_server(tmp_path):
    w = _forked(tmp_path)
    server = forkserver.server_for("cpu")
    pid = w.proc.pid
    kill_group(w.proc)
    w.close_fds()
    with open(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children") as f:
        assert str(pid) not in f.read().split()  # no zombie left behind
    assert not os.path.exists(f"/proc/{pid}")


def test_wait_times_out_like_popen(tmp_path):
    w = _forked(tmp_path)
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            w.proc.wait(timeout=0.05)
        assert w.proc.poll() is None
    finally:
        kill_group(w.proc)
        w.close_fds()


def test_unusable_server_falls_back_to_exec(tmp_path, monkeypatch):
    monkeypatch.setattr(forkserver, "server_for", lambda device, threads=1: None)
    before = forkserver.fallbacks()
    w = spawn_worker(make_scratch(tmp_path, "exec"), "cpu", None,
                     prestart_settings(RunOptions(device="cpu", sandbox=False), [load_registry().get("gelu").path]),
                     fork=True)
    try:
        assert isinstance(w.proc, subprocess.Popen) and forkserver.fallbacks() == before + 1
        assert wait_ready(w, 120.0), w.err_buf.text()[-2000:]
    finally:
        kill_group(w.proc)
        w.close_fds()


def test_server_refuses_to_fork_with_threads():
    """Bug it stops: a fork from a process with a second thread can copy a lock that thread held (the child
    hangs on it); the server answers with an error instead, and the parent starts the worker with exec."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    t.start()
    fds = [os.open(os.devnull, os.O_RDONLY) for _ in range(4)]
    try:
        zygote._spawn(theirs, {"op": "spawn", "cwd": "/", "env": {}, "args": []}, fds, os.getpid())
        reply = ours.recv(4096)
    finally:
        stop.set()
        ours.close()
        theirs.close()
    assert b'"error"' in reply and b"threads" in reply, reply
    for fd in fds:  # the server closed the descriptors it was handed
        with pytest.raises(OSError):
            os.fstat(fd)


def test_dead_server_is_replaced_by_exec(tmp_path):
    server = forkserver.server_for("cpu")
    server._wait_ready()
    kill_group(server.proc)
    before = forkserver.fallbacks()
    t0 = time.monotonic()
    w = spawn_worker(make_scratch(tmp_path, "after"), "cpu", None,
                     prestart_settings(RunOptions(device="cpu", sandbox=False), [load_registry().get("gelu").path]),
                     fork=True)
    try:
        assert wait_ready(w, 120.0), w.err_buf.text()[-2000:]
        assert isinstance(w.proc, subprocess.Popen) and forkserver.fallbacks() == before + 1
        assert time.monotonic() - t0 < 60
    finally:
        kill_group(w.proc)
        w.close_fds()
        forkserver.close_all()  # the next test gets a fresh server


def test_pool_gives_up_forking_when_a_forked_worker_cannot_warm_up(tmp_path, monkeypatch):
    """Bug it stops: if the server's image does not work on a machine (a library it imported broke CUDA in its
    children, say), every forked worker would fail and the pool would stop starting workers after three; the
    pool instead gives up forking and starts the rest with exec. The broken image is simulated by forking
    workers with an argument they refuse."""
    from harness.execute.parent.pool import WorkerPool

    real = forkserver.ForkServer.spawn
    monkeypatch.setattr(forkserver.ForkServer, "spawn",
                        lambda self, args, *a, **k: real(self, [*args, "--no-such-option"], *a, **k))
    pool = WorkerPool(RunOptions(device="cpu", sandbox=False), None, tmp_path, "g",
                      [load_registry().get("gelu").path], size=2)
    try:
        t0 = time.monotonic()
        while len(pool._idle) < 2:
            assert time.monotonic() - t0 < 120 and not pool.broken, "the pool stopped starting workers"
            time.sleep(0.1)
        assert all(isinstance(w.proc, subprocess.Popen) for w in pool._idle)
        assert forkserver.server_for("cpu") is None and "did not warm up" in forkserver.last_problem()
    finally:
        pool.close()
        forkserver.close_all()
    assert forkserver.server_for("cpu") is not None  # closing every server starts afresh
    forkserver.close_all()


def test_workers_outlive_their_fork_server(tmp_path):
    """Bug it stops: a forked worker's lifeline watched its parent, the server, so a candidate that killed the
    server (where neither the audit hooks nor Landlock's signal scope stop it) ended every other candidate's
    worker, and those candidates were recorded as crashed. A forked worker watches the harness instead (the
    exploit: tests/execute/fixtures/hostile/gelu__kill_fork_server.py)."""
    a, b = _forked(tmp_path), _forked(tmp_path)
    server = forkserver.server_for("cpu")
    try:
        kill_group(server.proc)
        time.sleep(2.5)  # more than two lifeline intervals
        assert a.proc.poll() is None and b.proc.pid and os.path.exists(f"/proc/{b.proc.pid}")
        with open(f"/proc/{a.proc.pid}/stat") as f:
            assert f.read().rsplit(")", 1)[1].split()[0] != "Z"
    finally:
        for w in (a, b):
            os.killpg(w.proc.pid, 9)
            w.close_fds()
        forkserver.close_all()
