"""The fork server's process: imports once what every worker imports, then forks workers on request.

Started by :class:`harness.execute.parent.forks.ForkServer` (``python -m harness.execute.forkserver.server --ctl-fd N``)
with a worker's scrubbed environment, before any candidate of the run exists. It imports torch, Triton and
the harness modules a worker's loop uses (:data:`WARM_MODULES`), and nothing else: no CUDA context, no
sandbox, no candidate, no seed, no reference, no result ever reaches it. Each ``spawn`` request carries the
worker's folder, environment, arguments and four descriptors (the worker's ends of its two protocol pipes, its
stdout and stderr); the forked child becomes a fresh worker (:func:`harness.execute.worker.main.main`) in a session of
its own, keeping only those descriptors, and from there on does exactly what a worker started by ``exec`` does:
it crosses the OS boundary (:mod:`harness.execute.boundary.enter`: namespaces, limits, Landlock, seccomp, no
privileges), installs its audit hooks and warms up, all before candidate code.

Why: importing torch and Triton costs about 5 s of CPU per worker on an H200 host (about 550 s of a 112 s suite on
16 cores, every candidate's worker paying it again), and the first candidates waited for sixteen such imports side
by side. A fork shares the imported pages instead.

The server is a child subreaper (:mod:`harness.execute.parent.reaper`): an orphan of a forked worker's tree that
leaves the worker (the worker ended first, or its candidate cleared the worker's own flag) becomes the server's
child instead of init's, and the server kills every child it did not fork as a worker at each tick of its loop
(:func:`cull`), so a candidate's ``setsid`` process cannot outlive it there.

Fork is only safe from a single-threaded process: a spawn is refused (and the parent falls back to ``exec``)
whenever this process has more than one thread (a library that started one at import: the scrubbed
environment's ``OMP_NUM_THREADS=1`` keeps OpenBLAS and OpenMP from doing so).

Messages on the control socket (``AF_UNIX``/``SOCK_SEQPACKET``, one JSON object per packet, descriptors as
``SCM_RIGHTS``): see :mod:`harness.execute.parent.forks`, which defines both sides' records.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import sys
import time

from harness.execute.parent import reaper

WARM_MODULES = ("torch", "triton", "numpy", "harness.execute.worker.main", "harness.execute.worker.warmup",
                "harness.execute.boundary.enter", "harness.execute.boundary.namespaces",
                "harness.execute.boundary.privileges", "harness.execute.boundary.seccomp",
                "harness.execute.boundary.landlock", "harness.execute.boundary.limits",
                "harness.execute.worker.rules.audit", "harness.execute.worker.rules.tamper",
                "harness.execute.worker.rules.trusted_thread", "harness.execute.shared.threads",
                "harness.execute.worker.guards", "harness.execute.worker.outputs", "harness.execute.shared.inputs",
                "harness.execute.wire.channel", "harness.execute.shared.profiling", "harness.measure.timing",
                "harness.problems.loader", "pyseccomp")
"""What a worker imports before its candidate (:func:`harness.execute.worker.warmup.warm_up`), imported here once."""

EXIT_ORPHANED = 70
FOLDER_PREFIX = "kg-forkserver-"
"""The server's own folder (home, caches, temporary files) is a temporary folder named so."""


def threads() -> int:
    """OS threads of this process (a fork keeps only the calling one)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def _close_all_but(keep: set[int]) -> None:
    try:
        fds = [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 1024))
    for fd in fds:
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _child(req: dict, fds: list[int], harness: int) -> None:
    """In the forked child: become a worker that lives as long as ``harness`` does (not only the server);
    never returns into the server's loop."""
    code = 1
    try:
        in_fd, out_fd, out_w, err_w = fds
        os.setsid()  # its own session and group: the parent kills the group (harness.execute.parent.children.kill_group)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        _close_all_but({0, 1, 2, in_fd, out_fd})  # the control socket above all: a worker never asks for forks
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        import tempfile

        tempfile.tempdir = None  # an import here computed it from the server's TMPDIR: recompute from the worker's
        sys.argv = ["harness.execute.worker.main", *req["args"]]
        from harness.execute.worker import main as worker

        code = worker.main(["--in-fd", str(in_fd), "--out-fd", str(out_fd), "--watch-pid", str(harness),
                            *req["args"]])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - whatever it was, the child must not return into the loop
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code if isinstance(code, int) else 1)


def _spawn(sock: socket.socket, req: dict, fds: list[int], harness: int) -> int | None:
    """Fork a worker for ``req``; its pid, or None when none was forked (or it was killed again at once)."""
    if len(fds) != 4:
        for fd in fds:
            os.close(fd)
        _send(sock, {"op": "error", "message": f"spawn needs 4 descriptors, got {len(fds)}"})
        return None
    n = threads()
    if n != 1:
        for fd in fds:
            os.close(fd)
        _send(sock, {"op": "error", "message": f"this process has {n} threads: forking it is not safe"})
        return None
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    pid = os.fork()
    if pid == 0:
        _child(req, fds, harness)
    for fd in fds:
        os.close(fd)
    try:
        pidfd = os.pidfd_open(pid)  # before any reap: the parent's handle can never name a reused pid
    except OSError as exc:  # a kernel without pidfds: this child cannot be handed over safely
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        _send(sock, {"op": "error", "message": f"pidfd_open failed ({exc})"})
        return None
    try:
        _send(sock, {"op": "spawned", "pid": pid}, [pidfd])
    finally:
        os.close(pidfd)
    return pid


def _reap(sock: socket.socket, pid: int) -> bool:
    """Answer a ``reap`` request; True when ``pid`` is no child of this server any more (reaped now, or not
    one)."""
    try:
        got, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        _send(sock, {"op": "error", "message": f"{pid} is not a child of the fork server"})
        return True
    if got == 0:
        _send(sock, {"op": "alive", "pid": pid})
        return False
    _send(sock, {"op": "reaped", "pid": pid, "code": os.waitstatus_to_exitcode(status)})
    return True


def cull(forked: set[int]) -> list[int]:
    """SIGKILL (with its own tree) and reap every child of this process that is not in ``forked`` (the
    workers it forked and has not reaped: never touched); returns the pids reaped.

    Such a child is an orphan adopted from a worker's tree (this process is a child subreaper). A kill lands
    asynchronously: a child not yet dead is reaped at a later call. Bug it stops: a candidate's
    ``setsid`` process, handed to the server when its worker ended, outlived the run
    (``tests/execute/test_reaper.py``)."""
    reaped = []
    for pid in reaper.children(os.getpid()):
        if pid in forked:
            continue
        reaper.kill_tree(pid)
        try:
            got, _status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        if got:
            reaped.append(pid)
    return reaped


def _send(sock: socket.socket, msg: dict, fds: list[int] | None = None) -> None:
    data = json.dumps(msg).encode()
    if fds:
        socket.send_fds(sock, [data], fds)
    else:
        sock.send(data)


def serve(sock: socket.socket, parent: int) -> int:
    """Answer requests until the parent closes the socket (0) or ends (:data:`EXIT_ORPHANED`); every tick
    (at most 0.5 s apart) kills the children it did not fork (:func:`cull`)."""
    if not reaper.set_subreaper():
        print("kernelgate fork server: cannot be a child subreaper (not Linux, or prctl refused): orphans of "
              "its workers go to init", file=sys.stderr, flush=True)
    forked: set[int] = set()
    while True:
        ready, _, _ = select.select([sock], [], [], 0.5)
        if os.getppid() != parent:
            return EXIT_ORPHANED  # the harness is gone: its workers end too (harness.execute.shared.lifeline)
        for pid in cull(forked):
            print(f"kernelgate fork server: killed process {pid}, an orphan adopted from a worker's tree",
                  file=sys.stderr, flush=True)
        if not ready:
            continue
        try:
            data, fds, _flags, _addr = socket.recv_fds(sock, 1 << 20, 8)
        except OSError:
            return 0
        if not data:
            return 0  # the parent closed the server
        try:
            req = json.loads(data)
            op = req["op"]
        except (ValueError, KeyError, TypeError):
            for fd in fds:
                os.close(fd)
            _send(sock, {"op": "error", "message": "malformed request"})
            continue
        if op == "spawn":
            pid = _spawn(sock, req, fds, parent)
            if pid is not None:
                forked.add(pid)
        elif op == "reap":
            pid = int(req["pid"])
            if _reap(sock, pid):
                forked.discard(pid)
        else:
            for fd in fds:
                os.close(fd)
            _send(sock, {"op": "error", "message": f"unknown op {op!r}"})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.execute.forkserver.server", description=__doc__.splitlines()[0])
    parser.add_argument("--ctl-fd", type=int, required=True, help="this end of the control socket")
    args = parser.parse_args(argv)
    parent = os.getppid()
    sock = socket.socket(fileno=args.ctl_fd)
    t0 = time.perf_counter()
    import importlib

    failed = ""
    for name in WARM_MODULES:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - a worker importing it will report it; forks still save the rest
            failed = failed or f"{name}: {type(exc).__name__}: {exc}"[:300]
    _send(sock, {"op": "ready", "import_s": round(time.perf_counter() - t0, 3), "threads": threads(),
                 "failed": failed})
    try:
        return serve(sock, parent)
    finally:
        _remove_own_folder()


def _remove_own_folder() -> None:
    """The server's folder (its working directory, made by the parent), removed on the way out: a parent
    killed outright (SIGKILL) never gets to remove it."""
    import shutil

    here = os.getcwd()
    if os.path.basename(here).startswith(FOLDER_PREFIX):
        shutil.rmtree(here, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
