"""The worker's OS boundary (harness/execute/boundary): what a confined process can see and do, checked from
inside and from outside, as the user the tests run as (root in CI), and as an unprivileged user created for it.

Exploits these stop (each worked before the boundary, from a worker sharing the harness's identity): reading
other processes through ``/proc``; ``resource.prlimit``, ``os.sched_setscheduler``/``sched_setaffinity`` and
``os.setpriority`` on the checker, a rival worker, the fork server or the harness (found through ``/proc``);
``ptrace``/``pidfd`` routes into another process; a ``setsid`` process outliving its worker.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.execute.parent import confinement, freeze

ROOT = Path(__file__).resolve().parents[2]
ENV = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux namespaces and seccomp")

CONFINED = textwrap.dedent('''
    import ctypes, errno, json, os, resource, sys, time
    from harness.execute.boundary.enter import enter
    target = int(sys.argv[1])
    open("problem.py", "w").close()
    got = enter({"isolation": "available"}, [os.path.abspath("problem.py")], lifeline_pid=target)
    seen = {"confinement": got.to_dict(), "pid": os.getpid()}
    seen["proc"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    def attempt(name, fn):
        try:
            fn()
            seen[name] = "allowed"
        except OSError as exc:
            seen[name] = errno.errorcode.get(exc.errno, str(exc.errno))
    attempt("kill", lambda: os.kill(target, 0))
    attempt("prlimit", lambda: resource.prlimit(target, resource.RLIMIT_NOFILE, (3, 3)))
    attempt("affinity", lambda: os.sched_setaffinity(target, {0}))
    attempt("scheduler", lambda: os.sched_setscheduler(target, os.SCHED_IDLE, os.sched_param(0)))
    attempt("priority", lambda: os.setpriority(os.PRIO_PROCESS, target, 19))
    attempt("pidfd", lambda: os.pidfd_open(target))
    attempt("unix_connect", lambda: __import__("socket").socket(__import__("socket").AF_UNIX).connect(
        f"/tmp/kernelgate-boundary-bait-{target}.sock"))  # a listener of the test's, outside the worker's tree
    attempt("environ", lambda: open(f"/proc/{target}/environ", "rb").read())
    attempt("unshare", lambda: os.unshare(0x10000000) if hasattr(os, "unshare") else
            (_ for _ in ()).throw(OSError(ctypes.CDLL(None, use_errno=True).unshare(0x10000000) and ctypes.get_errno(), "")))
    libc = ctypes.CDLL(None, use_errno=True)
    rc = libc.ptrace(16, target, 0, 0)  # PTRACE_ATTACH
    seen["ptrace"] = "allowed" if rc == 0 else errno.errorcode.get(ctypes.get_errno(), "?")
    seen["dumpable"] = libc.prctl(3, 0, 0, 0, 0)  # PR_GET_DUMPABLE
    seen["status"] = {k: v.strip() for k, v in (l.split(":", 1) for l in open("/proc/self/status"))
                      if k in ("CapEff", "CapPrm", "CapBnd", "NoNewPrivs", "Seccomp")}
    print(json.dumps(seen), flush=True)
    if len(sys.argv) > 2 and sys.argv[2] == "orphan":
        import subprocess
        subprocess.Popen(["sleep", "1000"], start_new_session=True)
        print("started", flush=True)
        time.sleep(1000)
    sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].isdigit() else 0)
''')


def _confined(tmp_path: Path, *args: str, python: str = sys.executable, env: dict | None = None,
              wait: bool = True) -> subprocess.Popen | tuple[int, dict, str]:
    proc = subprocess.Popen([python, "-c", CONFINED, str(os.getpid()), *args], cwd=tmp_path, env=env or ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if not wait:
        return proc
    out, err = proc.communicate(timeout=60)
    lines = [l for l in out.splitlines() if l.startswith("{")]
    assert lines, err[-2000:]
    return proc.returncode, json.loads(lines[0]), err


@pytest.fixture(autouse=True)
def bait():
    """A unix socket listening at a path outside every worker's tree (the confined script tries to connect)."""
    import socket

    path = f"/tmp/kernelgate-boundary-bait-{os.getpid()}.sock"
    if os.path.exists(path):
        os.unlink(path)
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    os.chmod(path, 0o777)
    s.listen(4)
    yield path
    s.close()
    os.unlink(path)


def _assert_confined(seen: dict) -> None:
    c = seen["confinement"]
    assert not c["missing"], c["missing"]
    assert {"user", "pid", "mount", "net", "ipc"} <= set(c["namespaces"]) and c["private_proc"]
    assert seen["pid"] == 1 and seen["proc"] == [1], seen["proc"]  # its own namespace, nothing else in /proc
    for name in ("kill", "prlimit", "affinity", "scheduler", "priority", "pidfd", "environ", "ptrace", "unix_connect"):
        assert seen[name] != "allowed", (name, seen[name])
    assert seen["unix_connect"] == "ENOENT", seen["unix_connect"]  # as if the bait did not exist
    assert seen["kill"] == "ESRCH" and seen["prlimit"] in ("ESRCH", "EPERM")  # the harness's pid names nothing
    assert seen["unshare"] == "EPERM" and seen["ptrace"] in ("EPERM", "ESRCH")
    st = seen["status"]
    assert int(st["CapEff"], 16) == int(st["CapPrm"], 16) == int(st["CapBnd"], 16) == 0
    # alone in its PID namespace with its own /proc, it stays dumpable so the parent can read its descriptor table
    assert st["NoNewPrivs"] == "1" and st["Seccomp"] == "2" and seen["dumpable"] == 1


def test_a_confined_process_sees_and_reaches_nothing_outside_its_tree(tmp_path):
    before = (os.sched_getaffinity(0), os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0),
              __import__("resource").getrlimit(__import__("resource").RLIMIT_NOFILE))
    code, seen, err = _confined(tmp_path, "7")
    assert code == 7, err[-2000:]  # the keeper exits as its worker did
    _assert_confined(seen)
    after = (os.sched_getaffinity(0), os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0),
             __import__("resource").getrlimit(__import__("resource").RLIMIT_NOFILE))
    assert after == before  # this process (standing in for the harness) was not re-limited or re-scheduled


def test_a_worker_that_is_exiting_is_gone_not_unconfined(monkeypatch):
    """A process in its exit has dropped its mount, network, IPC and UTS namespaces (their links read as ENOENT)
    while its user and PID links still read: seen on an H200 as "mount namespace: reported, not in force" for a
    worker that had just died, a HARNESS_ERROR blamed on the machine. It is a worker that is gone; a link that
    cannot be read for another reason (EACCES) still counts as not in force."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    real = os.readlink

    def readlink(path, errno_cls):
        if path.startswith(f"/proc/{child.pid}/ns/") and not path.endswith(("/user", "/pid")):
            raise errno_cls(path)
        return real(path)
    try:
        monkeypatch.setattr(os, "readlink", lambda p: readlink(p, FileNotFoundError))
        assert confinement.observe(child.pid) is None
        monkeypatch.setattr(os, "readlink", lambda p: readlink(p, PermissionError))
        seen = confinement.observe(child.pid)
        assert seen is not None and "mount namespace" in seen.mismatch(("mount",), False, False)
    finally:
        child.kill()
        child.wait()


def test_the_parent_sees_the_confinement_from_outside_and_orphans_die_with_the_worker(tmp_path):
    proc = _confined(tmp_path, "orphan", wait=False)
    try:
        assert json.loads(proc.stdout.readline())["pid"] == 1
        assert proc.stdout.readline().strip() == "started"
        worker = confinement.confined_pid(proc.pid)
        assert worker is not None
        seen = confinement.observe(worker)
        assert {"user", "pid", "mount", "net", "ipc"} <= set(seen.namespaces)
        assert seen.no_new_privs and seen.seccomp_filter and not seen.capabilities
        assert not seen.mismatch(("user", "pid", "mount", "net", "ipc"), True, True)
        orphans = confinement.live_descendants(worker)
        assert len(orphans) == 1  # the setsid sleep, in its own session, still in the worker's tree
        os.kill(worker, signal.SIGKILL)  # the namespace's init: every process in it dies with it
        assert proc.wait(30) == -signal.SIGKILL  # and the keeper exits as its worker did
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and os.path.exists(f"/proc/{orphans[0]}"):
            time.sleep(0.05)
        assert not os.path.exists(f"/proc/{orphans[0]}"), "the candidate's setsid process outlived its worker"
    finally:
        proc.kill()


def test_the_keeper_ends_the_worker_when_the_harness_ends(tmp_path):
    """The lifeline is the keeper's (outside the candidate's reach), not a thread in the worker."""
    stand_in = subprocess.Popen(["sleep", "1000"])
    code = CONFINED.replace("target = int(sys.argv[1])", "target = int(sys.argv[1])\nimport time") \
        .replace('sys.exit(int(sys.argv[2])', 'time.sleep(1000)\nsys.exit(int(sys.argv[2])')
    proc = subprocess.Popen([sys.executable, "-c", code, str(stand_in.pid)], cwd=tmp_path, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert json.loads(proc.stdout.readline())["pid"] == 1
        worker = confinement.confined_pid(proc.pid)
        stand_in.kill()
        stand_in.wait()
        assert proc.wait(10) == -signal.SIGKILL
        assert not os.path.exists(f"/proc/{worker}")
    finally:
        proc.kill()
        stand_in.kill()


# ------------------------------------------------------------------------------------------- freezing

BUSY = textwrap.dedent('''
    import os, sys, threading, time, signal
    counter = sys.argv[1]
    def spin(tag):
        n = 0
        while True:
            n += 1
            if n % 20000 == 0:
                with open(f"{counter}.{tag}", "w") as f: f.write(str(n))
    for i in range(3):
        threading.Thread(target=spin, args=(f"t{os.getpid()}-{i}",), daemon=True).start()
    if os.fork() == 0:
        # a child that keeps forking short-lived children, and wakes its stopped relatives
        while True:
            if os.fork() == 0:
                time.sleep(0.01); os._exit(0)
            try:
                os.kill(os.getppid(), signal.SIGCONT)
            except OSError:
                pass
            time.sleep(0.001)
    spin("main")
''')


def _counters(prefix: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in prefix.parent.glob(prefix.name + ".*") if p.read_text()}


def test_freeze_stops_every_thread_and_process_of_the_tree_and_thaw_resumes_it(tmp_path):
    """A tree that keeps forking and sends SIGCONT to its stopped parent is still stopped whole."""
    counter = tmp_path / "count"
    proc = subprocess.Popen([sys.executable, "-c", BUSY, str(counter)], env=ENV)
    try:
        time.sleep(1.0)
        stopped = freeze.freeze(proc.pid)
        assert proc.pid in stopped and len(stopped) >= 2
        for pid in freeze.tree(proc.pid):
            for tid in os.listdir(f"/proc/{pid}/task"):
                assert freeze._state(pid, tid) in "TtZXx", (pid, tid, freeze._state(pid, tid))
        time.sleep(0.05)  # a write in flight when the stop landed
        snap = _counters(counter)
        time.sleep(0.5)
        assert _counters(counter) == snap, "something in the tree ran while it was frozen"
        freeze.thaw(stopped)
        time.sleep(0.5)
        assert _counters(counter) != snap, "the tree did not run again after the thaw"
    finally:
        for pid in freeze.tree(proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()


def test_freeze_of_a_gone_process_is_lookup_error():
    proc = subprocess.Popen(["true"])
    proc.wait()
    with pytest.raises(ProcessLookupError):
        freeze.freeze(proc.pid)


# ------------------------------------------------------------------------------------------- unprivileged

def _unprivileged_python() -> str | None:
    """An interpreter an unprivileged user can run with only the standard library (the boundary needs no more,
    pyseccomp aside, which the test copies next to the package)."""
    for cand in ("/usr/bin/python3", "/usr/local/bin/python3", sys.executable):
        if os.path.exists(cand) and subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                                    cand, "-c", "import ctypes, json"],
                                                   capture_output=True).returncode == 0:
            return cand
    return None


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None or shutil.which("useradd") is None,
                    reason="needs root (to create a user and drop to it) and util-linux setpriv")
def test_the_boundary_holds_for_an_unprivileged_user():
    """As a user created for the test (no capabilities anywhere): the same confinement, made unprivileged
    (a user namespace first, then the others inside it)."""
    python = _unprivileged_python()
    if python is None:
        pytest.skip("no interpreter runnable by an unprivileged user here")
    name = f"kgt{os.getpid() % 100000}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True,
                   capture_output=True)
    import tempfile

    tmp_path = Path(tempfile.mkdtemp(prefix="kg-unpriv-"))  # pytest's own folders are root's alone
    try:
        import pwd

        user = pwd.getpwnam(name)
        # the boundary package and the seccomp binding, copied where that user can read them
        pkg = tmp_path / "pkg"
        shutil.copytree(ROOT / "harness" / "execute" / "boundary", pkg / "harness" / "execute" / "boundary")
        for init in (pkg / "harness", pkg / "harness" / "execute"):
            (init / "__init__.py").write_text("")
        import pyseccomp

        shutil.copy(pyseccomp.__file__, pkg / "pyseccomp.py")
        work = tmp_path / "work"
        work.mkdir()
        for p in (tmp_path, pkg, work):
            os.chmod(p, 0o755)
        os.chown(work, user.pw_uid, user.pw_gid)
        subprocess.run(["chmod", "-R", "a+rX", str(pkg)], check=True)
        env = {"PYTHONPATH": str(pkg), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
        script = CONFINED.replace("target = int(sys.argv[1])", "target = int(sys.argv[1])\nassert os.geteuid() != 0")
        proc = subprocess.run(["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups",
                               "--inh-caps=-all", "--bounding-set=-all", python, "-c", script, str(os.getpid())],
                              cwd=work, env=env, capture_output=True, text=True, timeout=60)
        lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
        assert lines, proc.stderr[-2000:]
        seen = json.loads(lines[0])
        missing = seen["confinement"]["missing"]
        landlock_only = [m for m in missing if not m.startswith("landlock")]  # no harness tree to carve here
        assert not landlock_only, missing
        seen["confinement"]["missing"] = []
        _assert_confined(seen)
    finally:
        subprocess.run(["userdel", name], capture_output=True)
        shutil.rmtree(tmp_path, ignore_errors=True)


def test_a_tree_woken_while_frozen_is_seen(tmp_path):
    """Exploit: a SIGCONT the kernel delivers to a stopped worker (a lease break or I/O signal set with F_SETSIG,
    a POSIX timer) resumes it while the checker reads; every thread's CPU time, recorded when the tree was
    stopped, shows that it ran. (The wake is played here by a SIGCONT from outside.)"""
    counter = tmp_path / "count"
    proc = subprocess.Popen([sys.executable, "-c", BUSY, str(counter)], env=ENV)
    try:
        time.sleep(1.0)
        stopped = freeze.freeze(proc.pid)
        time.sleep(0.2)
        assert stopped.ran() == []  # stopped, nothing ran
        os.kill(proc.pid, signal.SIGCONT)
        time.sleep(0.2)
        os.kill(proc.pid, signal.SIGSTOP)  # stopped again, as a careful cheat would be: its CPU time still shows
        time.sleep(0.1)
        woke = stopped.ran()
        assert woke and any("ran" in w for w in woke), woke
        freeze.thaw(stopped)
    finally:
        for pid in freeze.tree(proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()
