"""The Landlock sandbox: every rule is shown against the exploit it stops.

Landlock cannot be undone in the process that applies it, so each check runs
in a fresh interpreter (``subprocess.run([sys.executable, "-c", code])``) with
the worker's real environment (:func:`harness.execute.parent.children.scrubbed_env`),
its working directory in a scratch folder, and a fake project root beside it
holding the things a cheating candidate wants: ``runs/results.jsonl``,
``leaderboards/``, other submissions. The child exits 0 on success and
fails with an ``AssertionError`` naming the operation that was wrongly allowed.
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.execute.boundary import landlock as sandbox
from harness.execute.parent.children import scrubbed_env

REPO = Path(__file__).resolve().parents[2]
ABI = sandbox.landlock_abi()
needs_landlock = pytest.mark.skipif(ABI == 0, reason="Landlock is not available on this kernel")

CANDIDATE = '''
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x, y, o, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


def run():
    x = torch.arange(100, dtype=torch.float32)
    y = torch.ones(100)
    o = torch.empty(100)
    add_kernel[(4,)](x, y, o, 100, BLOCK=32)
    assert torch.equal(o, x + y), o
    return o
'''

PRELUDE = '''
import errno, os, sys
from pathlib import Path
from harness.execute.boundary import landlock as sandbox

SCRATCH, ROOT, PROBLEM = Path({scratch!r}), Path({root!r}), Path({problem!r})
RESULTS = ROOT / "runs" / "results.jsonl"
policy = sandbox.default_policy(SCRATCH, ROOT, PROBLEM, extra_read={extra_read!r}, more_problems={more!r})
{before}
DESC = sandbox.apply(policy)
assert DESC.startswith("landlock-abi"), DESC


def denied(fn, *args, errnos=(errno.EACCES, errno.EPERM)):
    """fn(*args) must fail the way Landlock refuses (EACCES / EPERM, or EXDEV for cross-folder links)."""
    try:
        fn(*args)
    except OSError as exc:
        assert exc.errno in errnos, f"{{fn.__name__}}{{args}} failed, but with {{exc!r}}"
        return
    raise AssertionError(f"{{fn.__name__}}{{args}} was allowed inside the sandbox")


def read(p):
    with open(p, "rb") as f:
        return f.read()


def write(p, data=b"x", mode="wb"):
    with open(p, mode) as f:
        f.write(data)
'''


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    """A fake project root (with things worth stealing) and a worker scratch folder like the runner's."""
    root = tmp_path / "project"
    for sub in ("harness", "leaderboards", "runs", "problems/gemm", "submissions/rival"):
        (root / sub).mkdir(parents=True)
    (root / "harness" / "__init__.py").write_text("")
    (root / "leaderboards" / "board.md").write_text("| rank | candidate |\n")
    (root / "runs" / "results.jsonl").write_text('{"status": "PASSED", "latency_ms": 1.0}\n')
    (root / "submissions" / "rival" / "fast.py").write_text("SECRET = 1\n")
    problem = root / "problems" / "gemm" / "gemm_square.py"
    problem.write_text("N = 16\n")
    scratch = tmp_path / "kg-scratch"
    for sub in ("tmp", "handoff", "triton-cache", "tilelang-cache", "cache"):
        (scratch / sub).mkdir(parents=True)
    (scratch / "candidate.py").write_text(CANDIDATE)
    return {"root": root, "scratch": scratch, "problem": problem, "tmp": tmp_path}


def run_child(layout: dict[str, Path], body: str, *, before: str = "", extra_read: tuple = (), more_problems: tuple = (),
              env: dict[str, str] | None = None, timeout: int = 180) -> subprocess.CompletedProcess:
    code = PRELUDE.format(scratch=str(layout["scratch"]), root=str(layout["root"]), problem=str(layout["problem"]),
                          extra_read=tuple(str(p) for p in extra_read), more=tuple(str(p) for p in more_problems),
                          before=before) + textwrap.dedent(body)
    child_env = {**scrubbed_env(layout["scratch"], "cpu", None), **(env or {})}
    return subprocess.run([sys.executable, "-c", code], cwd=layout["scratch"], env=child_env, capture_output=True,
                          text=True, timeout=timeout)


def ok(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, f"sandboxed child failed (rc {proc.returncode}):\n{proc.stderr[-4000:]}"
    return proc.stdout


# --------------------------------------------------------------------------- files


@needs_landlock
def test_scratch_is_writable_project_root_is_not(layout):
    """Exploit: overwrite the leaderboard or append a fake PASSED record. Only scratch is writable."""
    ok(run_child(layout, '''
        write(SCRATCH / "tmp" / "note.txt")
        assert read(SCRATCH / "tmp" / "note.txt") == b"x"
        import tempfile
        with tempfile.NamedTemporaryFile() as f:  # TMPDIR = scratch/tmp
            f.write(b"ok")
        (SCRATCH / "handoff" / "sub").mkdir()
        os.replace(SCRATCH / "tmp" / "note.txt", SCRATCH / "handoff" / "sub" / "note.txt")

        denied(write, ROOT / "leaderboards" / "board.md", b"| 1 | me |", "ab")
        denied(write, ROOT / "leaderboards" / "new.md")
        denied(write, RESULTS, b'{"status": "PASSED"}\\n', "ab")
        denied(os.mkdir, ROOT / "runs" / "fake")
        denied(write, Path("/tmp") / "kg-sandbox-probe")
    '''))


@needs_landlock
def test_project_files_are_not_readable(layout):
    """Exploit: read earlier results, reference outputs or a rival's submission. Only harness/ and the problem's folder are."""
    ok(run_child(layout, '''
        denied(read, RESULTS)
        denied(os.listdir, ROOT)
        denied(os.listdir, ROOT / "runs")
        denied(read, ROOT / "leaderboards" / "board.md")
        denied(read, ROOT / "submissions" / "rival" / "fast.py")
        assert read(ROOT / "harness" / "__init__.py") == b""
        assert read(PROBLEM) == b"N = 16\\n"
        assert os.path.exists(RESULTS)  # metadata stays visible: Landlock controls opening, not stat()
    '''))


@needs_landlock
def test_prestarted_worker_reads_the_runs_problem_files_only(layout):
    """A pre-started worker may read the folders of its run's problem files, not other problem folders."""
    other = layout["root"] / "problems" / "norm" / "layernorm.py"
    other.parent.mkdir()
    other.write_text("M = 8\n")
    hidden = layout["root"] / "problems" / "hidden" / "secret.py"
    hidden.parent.mkdir()
    hidden.write_text("SECRET = 1\n")
    ok(run_child(layout, f'''
        assert read(Path({str(other)!r})) == b"M = 8\\n"
        assert read(PROBLEM) == b"N = 16\\n"
        denied(read, Path({str(hidden)!r}))
        denied(read, RESULTS)
    ''', more_problems=(other,)))


@needs_landlock
def test_unlink_rename_and_chdir_do_not_escape(layout):
    """Exploit: delete results, move them into scratch, or write through a relative path after chdir."""
    ok(run_child(layout, '''
        denied(os.unlink, RESULTS)
        denied(os.rename, RESULTS, SCRATCH / "stolen.jsonl", errnos=(errno.EACCES, errno.EPERM, errno.EXDEV))
        denied(os.rmdir, ROOT / "leaderboards")
        os.chdir("/")
        denied(write, "kg_probe.txt")
        os.chdir(ROOT / "runs")
        denied(write, "results.jsonl", b"", "wb")
        denied(read, "results.jsonl")
    '''))
    assert (layout["root"] / "runs" / "results.jsonl").read_text().startswith('{"status"')


@needs_landlock
def test_links_in_scratch_do_not_reach_outside(layout):
    """Exploit: a symlink or hard link from scratch to the results file. Landlock checks the file, not the name."""
    ok(run_child(layout, '''
        os.symlink(RESULTS, SCRATCH / "link.jsonl")
        denied(read, SCRATCH / "link.jsonl")
        denied(os.link, RESULTS, SCRATCH / "hard.jsonl", errnos=(errno.EACCES, errno.EPERM, errno.EXDEV))
    '''))


@needs_landlock
def test_children_inherit_the_sandbox(layout):
    """Exploit: start a fresh program (cat, another python) to escape the restriction. Children inherit it."""
    ok(run_child(layout, '''
        import subprocess
        p = subprocess.run(["cat", str(RESULTS)], capture_output=True, text=True)
        assert p.returncode != 0 and "Permission denied" in p.stderr, (p.returncode, p.stdout, p.stderr)
        p = subprocess.run([sys.executable, "-c", f"open({str(RESULTS)!r}).read()"], capture_output=True, text=True)
        assert p.returncode != 0 and "PermissionError" in p.stderr, p.stderr
        p = subprocess.run(["sh", "-c", "echo hi > out.txt && cat out.txt"], capture_output=True, text=True)
        assert p.stdout == "hi\\n", p.stderr  # programs from /usr still run, and write in scratch
    '''))


@needs_landlock
def test_devices(layout):
    """/dev/null and friends work; /dev/shm, new device nodes and raw disks do not."""
    ok(run_child(layout, '''
        import glob, stat
        write("/dev/null", b"x", "w+b")
        with open("/dev/urandom", "rb") as f:
            assert len(f.read(8)) == 8
        denied(write, "/dev/shm/kg-probe")
        denied(os.mknod, SCRATCH / "disk", stat.S_IFBLK | 0o600, os.makedev(7, 0))
        denied(os.mknod, SCRATCH / "mem", stat.S_IFCHR | 0o600, os.makedev(1, 1))
        for dev in glob.glob("/dev/[sv]d?") + glob.glob("/dev/nvme?n?") + glob.glob("/dev/loop?"):
            if stat.S_ISBLK(os.stat(dev).st_mode):
                denied(read, dev)
    '''))


# --------------------------------------------------------------------------- it still runs kernels


@needs_landlock
def test_torch_and_triton_interpreter_work(layout):
    """The sandbox must not break the candidate's legitimate work: torch ops and a @triton.jit kernel."""
    out = ok(run_child(layout, '''
        import torch
        a = torch.randn(64, 64)
        assert torch.allclose(a @ torch.eye(64), a)
        assert os.environ["TRITON_CACHE_DIR"] == str(SCRATCH / "triton-cache")
        sys.path.insert(0, str(SCRATCH))
        import candidate  # imported from a real file, as the worker does: @triton.jit reads source
        o = candidate.run()
        torch.save(o, SCRATCH / "handoff" / "out.pt")
        print(DESC)
    '''))
    assert out.startswith(f"landlock-abi{ABI} (fs")
    assert (layout["scratch"] / "handoff" / "out.pt").stat().st_size > 0


# --------------------------------------------------------------------------- network and processes


@pytest.fixture
def listener():
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    yield srv.getsockname()[1]
    srv.close()


@pytest.mark.skipif(ABI < 4, reason="TCP rules need Landlock ABI >= 4 (Linux 6.7)")
def test_tcp_connect_and_bind_refused(layout, listener):
    """Exploit: send results to, or fetch answers from, a server (here a local one the test runs)."""
    ok(run_child(layout, f'''
        import socket
        assert "tcp" in DESC, DESC
        denied(socket.create_connection, ("127.0.0.1", {listener}), 5)
        s = socket.socket()
        denied(s.bind, ("127.0.0.1", 0))
    '''))


@pytest.mark.skipif(ABI < 4, reason="TCP rules need Landlock ABI >= 4 (Linux 6.7)")
def test_tcp_allowed_when_policy_allows_network(layout, listener):
    """Control for the test above: the same connection works once allow_network is set."""
    ok(run_child(layout, f'''
        import socket
        socket.create_connection(("127.0.0.1", {listener}), 5).close()
    ''', before="import dataclasses; policy = dataclasses.replace(policy, allow_network=True)"))


@pytest.mark.skipif(ABI < 6, reason="signal scoping needs Landlock ABI >= 6 (Linux 6.12)")
def test_cannot_signal_outside_the_sandbox(layout):
    """Exploit: stop or kill the runner (the parent) so that it records a partial run. Only signal 0 is tried."""
    ok(run_child(layout, '''
        import signal, subprocess
        assert "signal-scope" in DESC, DESC
        denied(os.kill, os.getppid(), 0)
        child = subprocess.Popen(["sleep", "30"])
        os.kill(child.pid, signal.SIGKILL)  # its own children stay killable
        assert child.wait() == -signal.SIGKILL
    '''))


@needs_landlock
def test_parent_memory_and_environment_are_out_of_reach(layout):
    """Exploit: read or patch the runner's memory, or walk its root/cwd links, through /proc.

    As root the kernel lets CAP_PERFMON read other processes' environ/maps without asking
    Landlock (see the module docstring), so that part is only checked for non-root users.
    """
    ok(run_child(layout, '''
        ppid = os.getppid()
        denied(read, f"/proc/{ppid}/mem")
        denied(read, f"/proc/{ppid}/stack")
        denied(os.readlink, f"/proc/{ppid}/cwd")
        denied(read, f"/proc/{ppid}/root{RESULTS}")
        if os.geteuid() != 0:
            denied(read, f"/proc/{ppid}/environ")
        assert read("/proc/self/status")  # its own /proc entries stay readable
        assert read(f"/proc/{os.getpid()}/environ") is not None
        import threading
        write(f"/proc/self/task/{threading.get_native_id()}/comm", b"kg-worker")  # CUDA names its threads so
        denied(write, f"/proc/{ppid}/task/{ppid}/comm", b"pwned")
    '''))


@needs_landlock
def test_description_counts_unconfined_threads(layout):
    """Before ABI 8 only the calling thread is restricted: apply() must say so."""
    out = ok(run_child(layout, '''
        print(DESC)
    ''', before="import threading; threading.Thread(target=__import__('time').sleep, args=(5,), daemon=True).start()"))
    if ABI >= 8:
        assert "unconfined" not in out
    else:
        assert "1 earlier thread unconfined" in out, out


# --------------------------------------------------------------------------- policy construction


def test_default_policy_keeps_project_root_out(layout):
    root, scratch = layout["root"].resolve(), layout["scratch"].resolve()
    policy = sandbox.default_policy(scratch, root, layout["problem"])
    assert policy.write_dirs == (str(scratch),)
    for p in policy.read_dirs + policy.exec_dirs:
        assert not Path(p) in root.parents and Path(p) != root, f"{p} would expose the project root"
    inside = {p for p in policy.read_dirs if root in Path(p).parents}
    assert inside == {str(root / "harness"), str(root / "problems" / "gemm")}
    assert str(scratch) not in policy.exec_dirs
    assert not any(Path(p) in (Path("/tmp"), Path("/dev"), Path("/dev/shm")) for p in policy.read_dirs + policy.write_dirs)
    assert all(p.startswith("/dev/") for p in policy.rw_files if p != sandbox.PROC_SELF_TASK)
    assert sandbox.PROC_SELF_TASK in policy.rw_files  # resolved by the applying process, not here
    assert sandbox.SandboxPolicy.from_dict(policy.to_dict()) == policy


def test_a_venv_inside_the_project_root_is_granted_and_nothing_else_of_it(layout, monkeypatch):
    """Bug it stops: with ``python -m venv .venv`` in the checkout, the policy granted nothing under the project
    root, the interpreter's own files included, and every candidate failed on a permission denial (blamed on
    the candidates). The venv is the interpreter's; the checkout around it stays out."""
    import site

    root = layout["root"].resolve()
    venv = root / ".venv"
    (venv / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    (venv / "bin").mkdir()
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setattr(sys, "exec_prefix", str(venv))
    monkeypatch.setattr(sys, "executable", str(venv / "bin" / "python"))
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(venv / "lib" / "python3.11" / "site-packages")])
    monkeypatch.setattr(sys, "path", [str(root), str(venv / "lib" / "python3.11" / "site-packages")])  # editable
    policy = sandbox.default_policy(layout["scratch"], root, layout["problem"])
    granted = {Path(p) for p in policy.read_dirs + policy.exec_dirs}
    assert venv in granted or any(venv in g.parents or g == venv for g in granted)
    assert root not in granted and not any(g in root.parents for g in granted)  # never the checkout as a whole
    inside = {g for g in granted if root in g.parents}
    assert all(g == venv or venv in g.parents or g in (root / "harness", root / "problems" / "gemm") for g in inside)


def test_broad_folder_is_split_around_the_project_root(layout):
    """Granting a folder that contains the project root must not grant the root: the folder is split."""
    tmp = layout["tmp"].resolve()
    (tmp / "shared-data").mkdir()
    (tmp / "shared-data" / "weights.txt").write_text("w")
    policy = sandbox.default_policy(layout["scratch"], layout["root"], layout["problem"], extra_read=(tmp,))
    assert str(tmp) not in policy.read_dirs
    assert str(tmp / "shared-data") in policy.read_dirs
    assert not any(Path(p) == layout["root"].resolve() for p in policy.read_dirs)


@needs_landlock
def test_split_folder_in_practice(layout):
    """Same as above, in a sandboxed process: the sibling is readable, the project root still is not."""
    tmp = layout["tmp"].resolve()
    (tmp / "shared-data").mkdir()
    (tmp / "shared-data" / "weights.txt").write_text("w")
    ok(run_child(layout, f'''
        assert read({str(tmp / "shared-data" / "weights.txt")!r}) == b"w"
        denied(read, RESULTS)
        denied(os.listdir, {str(tmp)!r})
    ''', extra_read=(tmp,)))


def test_problem_file_alone_when_it_sits_in_the_project_root(layout):
    problem = layout["root"] / "loose_problem.py"
    problem.write_text("")
    policy = sandbox.default_policy(layout["scratch"], layout["root"], problem)
    assert str(problem.resolve()) in policy.read_dirs
    assert str(layout["root"].resolve()) not in policy.read_dirs


def test_scratch_must_not_contain_the_project_root(layout):
    with pytest.raises(ValueError, match="contains the project root"):
        sandbox.default_policy(layout["tmp"], layout["root"], layout["problem"])


def test_handled_rights_follow_the_abi():
    fs1, net1, sc1, size1 = sandbox._handled(1, False)
    assert not fs1 & (sandbox.FS_REFER | sandbox.FS_TRUNCATE) and net1 == 0 and sc1 == 0 and size1 == 8
    assert sandbox._handled(2, False)[0] & sandbox.FS_REFER
    assert sandbox._handled(3, False)[0] & sandbox.FS_TRUNCATE
    fs4, net4, sc4, size4 = sandbox._handled(4, False)
    assert net4 == sandbox.NET_BIND_TCP | sandbox.NET_CONNECT_TCP and sc4 == 0 and size4 == 16
    assert sandbox._handled(4, True)[1] == 0
    for abi in range(1, 10):
        assert not sandbox._handled(abi, False)[0] & sandbox.FS_IOCTL_DEV, "IOCTL_DEV would break CUDA"
    fs6, _, sc6, size6 = sandbox._handled(6, False)
    assert sc6 == sandbox.SCOPE_SIGNAL | sandbox.SCOPE_ABSTRACT_UNIX_SOCKET and size6 == 24
    assert not sandbox._WRITE & (sandbox.FS_MAKE_BLOCK | sandbox.FS_MAKE_CHAR)


def test_unavailable_landlock_is_reported_not_raised(layout, monkeypatch):
    """Unknown architecture: nothing is applied (safe in this process) and the reason is returned."""
    monkeypatch.setattr(platform, "machine", lambda: "sparc64")
    assert sandbox.landlock_abi() == 0
    desc = sandbox.apply(sandbox.default_policy(layout["scratch"], layout["root"], layout["problem"]))
    assert desc == "none: landlock unavailable (no Landlock syscall numbers known for sparc64)"
    monkeypatch.setattr(sys, "platform", "darwin")
    assert sandbox.apply(sandbox.SandboxPolicy((), (), ())).startswith("none: landlock unavailable (not Linux")
