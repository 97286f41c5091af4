"""Process trees: a candidate's ``setsid`` process stays in its worker's tree and dies with it.

The exploit: candidate code that gets a process started (past the audit hooks) runs ``sh -c 'setsid sleep 97 &'``;
the ``sleep`` has its own session and group and its parent (``sh``) is gone, so killing the worker's group left
it running after the harness exited (it could hold GPU memory while other candidates are timed). Each test here
plays one part (a worker, the parent, the fork server) in a small script and finds the ``sleep`` by a token in
its command line; every process a test starts carries its token, and the fixture kills whatever still does.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import signal
import socket
import subprocess
import sys
import time

import pytest

from harness.execute.parent import reaper
from harness.execute.parent.children import PROJECT_ROOT, kill_group, popen, wait_briefly

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process trees are read from /proc")

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(PROJECT_ROOT)}

WORKER = """\
import json, subprocess, sys, time
from harness.execute.worker import guards
from harness.execute.parent import reaper
flag = reaper.set_subreaper() if sys.argv[1] == "1" else False
subprocess.run(["sh", "-c", "setsid sleep " + sys.argv[2] + " >/dev/null 2>&1 &"], check=True)
print(json.dumps({"subreaper": flag, "children": sorted(guards.live_children())}), flush=True)
time.sleep(60)
"""
"""Plays a worker whose candidate started a double-forked ``sleep`` (argv: ``1`` to be a subreaper, the token)."""

PARENT = """\
import subprocess, sys
from harness.execute.parent import children as process
p = process.popen([sys.executable, "-c", sys.argv[1], "1", sys.argv[2]], stdout=subprocess.PIPE)
print(p.pid, p.stdout.readline().decode().strip(), flush=True)
sys.stdin.readline()
print(process.kill_all(), flush=True)
"""
"""Plays an interrupted run: starts a worker (WORKER), waits for a line on stdin, then ``kill_all``."""

SERVER = """\
import os, socket, subprocess, sys
from harness.execute.forkserver import server as zygote

def child(req, fds, harness):  # a forked worker whose candidate cleared its flag and made an orphan
    in_fd, out_fd = fds[0], fds[1]
    got = subprocess.run(["sh", "-c", "setsid sleep " + sys.argv[2] + " >/dev/null 2>&1 & echo $!"],
                         stdout=subprocess.PIPE, check=True).stdout
    os.write(out_fd, got)
    os.read(in_fd, 1)  # until the test closes its end
    os._exit(0)

zygote._child = child
sys.exit(zygote.serve(socket.socket(fileno=int(sys.argv[1])), os.getppid()))
"""
"""Plays the fork server (its real loop, :func:`harness.execute.forkserver.server.serve`) with a stand-in for the forked
worker: argv is the control socket's descriptor and the token."""


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _with_token(token: str) -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and token.encode() in _cmdline(int(p))]


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, ppid), read independently of the module under test; None when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return fields[0].decode(), int(fields[1])


def _running(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def _wait(cond, timeout_s: float = 5.0) -> bool:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def _sleep_of(token: str) -> int:
    """The pid of the test's ``sleep <token>``, once it has exec'd."""
    def sleeps() -> list[int]:
        return [p for p in _with_token(token) if _cmdline(p).startswith(b"sleep\0")]

    assert _wait(lambda: bool(sleeps())), "the double-forked sleep never appeared"
    return sleeps()[0]


@pytest.fixture
def token():
    """A token (a ``sleep`` duration no one else uses) whose processes are all killed at teardown."""
    tok = f"61.{secrets.randbelow(10**6):06d}{secrets.randbelow(10**3):03d}"
    yield tok
    for pid in _with_token(tok):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


@pytest.fixture
def started():
    """Processes a test started (``process.popen``): each killed with its group and reaped at teardown."""
    procs: list[subprocess.Popen] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        wait_briefly(p)
        for stream in (p.stdin, p.stdout, p.stderr):
            if stream is not None:
                stream.close()


def _worker(started: list, subreaper: bool, token: str) -> tuple[subprocess.Popen, dict, int]:
    proc = popen([sys.executable, "-c", WORKER, "1" if subreaper else "0", token], stdout=subprocess.PIPE,
                 env=ENV)
    started.append(proc)
    line = proc.stdout.readline()
    assert line, "the worker script ended early"
    return proc, json.loads(line), _sleep_of(token)


def test_a_subreaper_keeps_the_orphan_as_its_child_and_kill_group_ends_it(started, token):
    """Without the subreaper flag (``reaper.set_subreaper``) the sleep is not the worker's child; without the
    tree kill in ``process.kill_group`` it outlives the kill."""
    proc, info, sleep = _worker(started, True, token)
    assert info["subreaper"] is True
    assert _stat(sleep)[1] == proc.pid, "the orphan was not handed to the subreaper"
    assert sleep in info["children"], "the worker's child check (guards.live_children) does not see it"
    assert os.getsid(sleep) != proc.pid and os.getpgid(sleep) != proc.pid  # beyond the group kill's reach
    assert kill_group(proc) == -signal.SIGKILL
    assert _wait(lambda: not _running(sleep)), "the adopted sleep survived kill_group"


def test_without_the_subreaper_the_orphan_escapes_the_group_kill(started, token):
    """The hole itself: a worker that is no subreaper loses the sleep to an ancestor (init), out of its tree."""
    proc, info, sleep = _worker(started, False, token)
    assert info["subreaper"] is False
    assert _stat(sleep)[1] != proc.pid and sleep not in info["children"]
    kill_group(proc)
    time.sleep(0.3)
    assert _running(sleep)


def test_kill_all_ends_the_tree_of_an_interrupted_runs_worker(started, token):
    """Without the tree kill in ``process.kill_all`` (Ctrl-C, SIGTERM) the adopted sleep outlives the run."""
    parent = popen([sys.executable, "-c", PARENT, WORKER, token], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                   env=ENV)
    started.append(parent)
    worker_pid, _info = parent.stdout.readline().decode().split(" ", 1)
    sleep = _sleep_of(token)
    assert _stat(sleep)[1] == int(worker_pid)
    parent.stdin.write(b"go\n")
    parent.stdin.flush()
    assert parent.stdout.readline().strip() == b"1"
    assert _wait(lambda: not _running(sleep)), "the adopted sleep survived kill_all"


def test_the_fork_server_kills_an_adopted_orphan_and_spares_its_workers(started, token, tmp_path):
    """Without the server's own subreaper flag, or without ``zygote.cull`` in its loop, the orphan of a forked
    worker (one whose candidate cleared the worker's flag) outlives it; a cull that ignored the forked set
    would kill the worker."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        server = popen([sys.executable, "-c", SERVER, str(theirs.fileno()), token], pass_fds=(theirs.fileno(),),
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
    finally:
        theirs.close()
    started.append(server)
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    null = [os.open(os.devnull, os.O_WRONLY) for _ in range(2)]
    try:
        req = {"op": "spawn", "cwd": str(tmp_path), "env": ENV, "args": []}
        socket.send_fds(ours, [json.dumps(req).encode()], [in_r, out_w, *null])
        ours.settimeout(30)
        data, fds, _, _ = socket.recv_fds(ours, 1 << 16, 4)
        for fd in fds:
            os.close(fd)
        reply = json.loads(data)
        assert reply["op"] == "spawned", reply
        forked = reply["pid"]
        for fd in (in_r, out_w, *null):
            os.close(fd)
        in_r = out_w = -1
        assert select.select([out_r], [], [], 30)[0], "the stand-in worker wrote nothing"
        sleep = int(os.read(out_r, 64).split()[0])  # the stand-in worker's orphan
        assert _wait(lambda: not _running(sleep), 5.0), "the orphan outlived its worker's tree at the fork server"
        time.sleep(1.1)  # two more ticks of the server's loop
        st = _stat(forked)
        assert st is not None and st[0] not in ("Z", "X") and st[1] == server.pid, "a forked worker was killed"
    finally:
        for fd in (in_r, in_w, out_r, out_w):
            if fd >= 0:
                os.close(fd)
        ours.close()  # the stand-in worker reads its end closed and exits; the server sees the socket closed
    assert server.wait(timeout=10) == 0
    err = server.stderr.read().decode()
    assert f"killed process {sleep}" in err, err


def test_stat_lines_are_split_at_the_last_parenthesis():
    assert reaper.parse_stat(b"4242 (k) Z 1 (k) S 77 4242 4242 0 -1 4194560") == (4242, "k) Z 1 (k", "S", 77)
    assert reaper.parse_stat(b"7 (a b) R 3 7 7") == (7, "a b", "R", 3)
    with pytest.raises(ValueError):
        reaper.parse_stat(b"no stat line")


def test_a_child_named_like_a_zombie_of_init_is_still_found_and_killed(started, token):
    """A process may name itself ``k) Z 1 (k``: split at the first ``)``, its stat line reads as a zombie whose
    parent is init, and ``kill_tree`` would skip it. Here it is in a session of its own, so only the tree kill
    can reach it."""
    code = ("import os, subprocess, sys, time\n"
            "child = ('import os, time\\nos.setsid()\\nopen(\"/proc/self/comm\", \"w\").write(\"k) Z 1 (k\")\\n'\n"
            "         'print(os.getpid(), flush=True)\\ntime.sleep(60)\\n')\n"
            "p = subprocess.Popen([sys.executable, '-c', child, sys.argv[1]], stdout=subprocess.PIPE)\n"
            "print(p.stdout.readline().decode().strip(), flush=True)\n"
            "time.sleep(60)\n")
    root = popen([sys.executable, "-c", code, token], stdout=subprocess.PIPE, env=ENV)
    started.append(root)
    kid = int(root.stdout.readline())
    with open(f"/proc/{kid}/comm") as f:
        assert f.read().strip() == "k) Z 1 (k"
    assert reaper.children(root.pid) == [kid] and reaper.descendants(root.pid) == [kid]
    assert reaper.parent_map()[kid] == (root.pid, "S")
    assert reaper.kill_tree(root.pid) == 2
    assert _wait(lambda: not _running(kid)), "the oddly named child survived kill_tree"
    assert root.wait(timeout=10) == -signal.SIGKILL


def test_descendants_leave_out_spared_subtrees(started, token):
    """``kill_group`` spares the other live processes it started (a fork server's workers outlive it)."""
    code = ("import subprocess, sys, time\n"
            "p = subprocess.Popen(['sleep', sys.argv[1]])\n"
            "print(p.pid, flush=True)\n"
            "time.sleep(60)\n")
    root = popen([sys.executable, "-c", code, token], stdout=subprocess.PIPE, env=ENV)
    started.append(root)
    kid = int(root.stdout.readline())
    assert reaper.descendants(root.pid) == [kid] and reaper.descendants(root.pid, spare={kid}) == []
    assert reaper.kill_tree(root.pid, spare={kid}) == 1
    assert root.wait(timeout=10) == -signal.SIGKILL
    time.sleep(0.1)
    assert _running(kid)
