"""Workers forked from a process that has already imported torch (the parent's side of the fork server).

:func:`server_for` starts, once per device kind and thread count, a :mod:`harness.execute.forkserver.server` process
in the background; :func:`harness.execute.parent.process.spawn_worker` then asks it for each worker instead of
starting a fresh interpreter. What a forked worker is told, and what it does before its candidate (limits,
sandbox, audit hooks, warm-up), is the same as for a started one; only the imports are shared.
:func:`start_early` lets ``kernelgate run`` start the server before it loads problems and calibrations, so the
server's own import overlaps them.

The server never holds anything of a run but its options: no seed, key, spec, reference or record. Its
children are not the parent's: :class:`ForkedProc` gives the parent the part of ``subprocess.Popen`` it uses
(``pid``, ``poll``, ``wait``, ``kill``, ``returncode``, ``stdout``, ``stderr``), with a pidfd the server opened
before the child could be reaped (so the parent's handle never names a reused pid) and the exit status fetched
from the server once the pidfd says the child ended. Until then the child stays a zombie of the server, so its
pid and process group cannot be reused under :func:`harness.execute.parent.children.kill_group`.

If the server cannot start, dies, or refuses a spawn (it has more than one thread), the caller falls back to
starting the worker with ``exec`` and the run goes on; :func:`fallbacks` counts those for diagnostics.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

READY_TIMEOUT_S = 180.0
"""A server not done importing by then is given up (its workers are started with exec)."""
REPLY_TIMEOUT_S = 30.0


class ForkServerError(RuntimeError):
    """The server cannot serve this request (not started, gone, or it refused): start the worker with exec."""


class ForkServer:
    """One :mod:`harness.execute.forkserver.server` process and its control socket; thread-safe (one request at a time)."""

    def __init__(self, device: str, threads: int = 1):
        from harness.execute.parent.children import CappedBuffer, drain, popen, scrubbed_env

        self.device, self.threads = device, threads
        from harness.execute.forkserver.server import FOLDER_PREFIX

        self.scratch = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX))
        for sub in ("home", "tmp", "cache"):
            (self.scratch / sub).mkdir()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = ours
        self.err = CappedBuffer()
        try:
            self.proc = popen([sys.executable, "-m", "harness.execute.forkserver.server", "--ctl-fd", str(theirs.fileno())],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              pass_fds=(theirs.fileno(),), cwd=self.scratch,
                              env=scrubbed_env(self.scratch, device, None, threads))
        finally:
            theirs.close()
        threading.Thread(target=drain, args=(self.proc.stderr, self.err), daemon=True).start()
        self._lock = threading.Lock()
        self._ready: dict | None = None
        self.broken = ""

    # ------------------------------------------------------------------ requests
    def _recv(self, timeout_s: float) -> tuple[dict, list[int]]:
        ready, _, _ = select.select([self.sock], [], [], timeout_s)
        if not ready:
            raise ForkServerError(f"no reply from the fork server in {timeout_s:.0f} s")
        try:
            data, fds, _flags, _addr = socket.recv_fds(self.sock, 1 << 16, 4)
        except OSError as exc:
            raise ForkServerError(f"the fork server's socket failed ({exc})") from None
        if not data:
            raise ForkServerError(f"the fork server ended: {self.err.text()[-500:]}")
        return json.loads(data), fds

    def _wait_ready(self) -> None:
        if self._ready is None:
            msg, fds = self._recv(READY_TIMEOUT_S)
            for fd in fds:
                os.close(fd)
            if msg.get("op") != "ready":
                raise ForkServerError(f"unexpected first message {msg.get('op')!r}")
            self._ready = msg

    def _request(self, msg: dict, fds: list[int] | None = None, timeout_s: float = REPLY_TIMEOUT_S) -> tuple[dict, list]:
        with self._lock:
            if self.broken:
                raise ForkServerError(self.broken)
            try:
                self._wait_ready()
                data = json.dumps(msg).encode()
                if fds:
                    socket.send_fds(self.sock, [data], fds)
                else:
                    self.sock.send(data)
                return self._recv(timeout_s)
            except (ForkServerError, OSError, ValueError) as exc:
                self.broken = f"fork server unusable: {exc}"
                raise ForkServerError(self.broken) from None

    @property
    def import_s(self) -> float | None:
        """Seconds the server took to import, once it is ready."""
        return None if self._ready is None else self._ready.get("import_s")

    def spawn(self, args: list[str], cwd: Path, env: dict[str, str], in_fd: int, out_fd: int) -> "ForkedProc":
        """Fork a worker (``python -m harness.execute.worker.main --in-fd IN --out-fd OUT ARGS`` in ``cwd``, with
        ``env``); ``in_fd``/``out_fd`` are the child's ends of its protocol pipes (the caller closes its copies)."""
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            reply, fds = self._request({"op": "spawn", "cwd": str(cwd), "env": env, "args": list(args)},
                                       [in_fd, out_fd, out_w, err_w])
        except ForkServerError:
            os.close(out_r)
            os.close(err_r)
            raise
        finally:
            os.close(out_w)
            os.close(err_w)
        if reply.get("op") != "spawned" or len(fds) != 1:
            for fd in (*fds, out_r, err_r):
                os.close(fd)
            raise ForkServerError(f"the fork server refused: {reply.get('message', reply.get('op'))}")
        return ForkedProc(self, int(reply["pid"]), fds[0], os.fdopen(out_r, "rb", buffering=0),
                          os.fdopen(err_r, "rb", buffering=0))

    def reap(self, pid: int) -> int | None:
        """The exit code of an ended child (``-N`` for a signal, as ``Popen``); None when the server cannot say."""
        try:
            reply, fds = self._request({"op": "reap", "pid": pid})
        except ForkServerError:
            return None
        for fd in fds:
            os.close(fd)
        return int(reply["code"]) if reply.get("op") == "reaped" else None

    def close(self) -> None:
        from harness.execute.parent.children import kill_group

        with self._lock:
            self.broken = self.broken or "closed"
            try:
                self.sock.close()
            except OSError:
                pass
        kill_group(self.proc)
        shutil.rmtree(self.scratch, ignore_errors=True)


class ForkedProc:
    """A forked worker, as much of ``subprocess.Popen`` as the harness uses."""

    def __init__(self, server: ForkServer, pid: int, pidfd: int, stdout: Any, stderr: Any):
        self.server, self.pid, self._pidfd = server, pid, pidfd
        self.stdout, self.stderr, self.stdin = stdout, stderr, None
        self.args = ["harness.execute.worker.main (forked)"]
        self.returncode: int | None = None
        self._lock = threading.Lock()

    def _ended(self, timeout_s: float | None) -> bool:
        fd = self._pidfd
        if fd < 0:
            return True
        ready, _, _ = select.select([fd], [], [], timeout_s)
        return bool(ready)

    def _collect(self) -> None:
        with self._lock:
            if self.returncode is not None:
                return
            code = self.server.reap(self.pid)
            # the server cannot say (it is gone): the child ended all the same (its pidfd said so)
            self.returncode = code if code is not None else 1
            os.close(self._pidfd)
            self._pidfd = -1

    def poll(self) -> int | None:
        if self.returncode is None and self._ended(0):
            self._collect()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not self._ended(timeout):
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self._collect()
        return self.returncode  # type: ignore[return-value]

    def send_signal(self, sig: int) -> None:
        with self._lock:
            if self.returncode is None and self._pidfd >= 0:
                try:
                    import signal

                    signal.pidfd_send_signal(self._pidfd, sig)
                except ProcessLookupError:
                    pass

    def kill(self) -> None:
        import signal

        self.send_signal(signal.SIGKILL)


_SERVERS: dict[tuple[str, int], ForkServer] = {}
_SERVERS_LOCK = threading.Lock()
_FALLBACKS = 0
_RESTARTS = 0
_LAST_PROBLEM = ""
_GIVEN_UP = False
MAX_RESTARTS = 2
"""Broken servers replaced in one process (a service's lifetime) before workers are only started with exec."""


def supported() -> bool:
    """Fork servers need Linux's pidfds (5.3+) and descriptor passing."""
    return sys.platform.startswith("linux") and hasattr(os, "pidfd_open") and hasattr(socket, "send_fds")


def server_for(device: str, threads: int = 1) -> ForkServer | None:
    """This process's fork server for workers of ``device`` with ``threads`` (started on first use); None
    where fork servers are not supported or the last one broke."""
    if not supported():
        return None
    global _RESTARTS
    key = ("cpu" if device == "cpu" else "cuda", max(1, threads))
    with _SERVERS_LOCK:
        if _GIVEN_UP:
            return None
        srv = _SERVERS.get(key)
        if srv is not None and srv.broken and srv.broken != "closed":
            if _RESTARTS >= MAX_RESTARTS:
                return None
            _RESTARTS += 1
            threading.Thread(target=srv.close, daemon=True).start()
        if srv is None or srv.broken:
            if not _SERVERS:
                import atexit

                atexit.register(close_all)  # the server's folder goes with this process
            srv = _SERVERS[key] = ForkServer(key[0], key[1])
        return srv


def start_early(device: str, threads: int = 1) -> None:
    """Start the fork server now (its import runs while the caller loads problems); errors are left to the
    first spawn, which falls back to exec."""
    try:
        server_for(device, threads)
    except OSError:
        pass


def give_up(why: str) -> None:
    """Stop forking workers in this process (their image does not work here): every later spawn uses exec."""
    global _GIVEN_UP, _LAST_PROBLEM
    with _SERVERS_LOCK:
        _GIVEN_UP = True
        _LAST_PROBLEM = why[:300]
        for srv in _SERVERS.values():
            srv.broken = srv.broken or f"given up: {why[:300]}"


def note_fallback(why: str = "") -> None:
    global _FALLBACKS, _LAST_PROBLEM
    with _SERVERS_LOCK:
        _FALLBACKS += 1
        _LAST_PROBLEM = why or _LAST_PROBLEM


def last_problem() -> str:
    """Why the last fallback happened (the server's refusal or failure), for the run's warning."""
    return _LAST_PROBLEM or "no fork server here (not supported, or it broke too often)"


def fallbacks() -> int:
    """Workers started with exec because the fork server could not fork them, in this process so far."""
    return _FALLBACKS


def close_all() -> None:
    """Stop every fork server of this process (their forked workers are killed by their owners); a later spawn
    starts a new one, even after :func:`give_up`."""
    global _GIVEN_UP, _RESTARTS
    with _SERVERS_LOCK:
        servers = list(_SERVERS.values())
        _SERVERS.clear()
        _GIVEN_UP, _RESTARTS = False, 0
    for srv in servers:
        srv.close()
