"""The parent's handle on the trusted checker processes of one device (a pool).

Each request goes to a free process, so the correctness phases that share a
GPU (:mod:`harness.execute.parent.gate`) are checked side by side. A workload's
requests prefer the process that served it last: that process has its
references and its library model cached (the candidates of one problem get
the same round seeds), so a problem's references are computed once per run.
A timing phase *leases* one process for its whole conversation (library
samples, kept outputs, verifications, batches), see :meth:`CheckerPool.lease`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from harness.execute.wire import protocol as P
from harness.execute.parent.process import CappedBuffer, drain, kill_group, popen, scrubbed_env


class CheckerDied(RuntimeError):
    """A checker process ended or answered garbage: the harness's failure, never the candidate's."""


class CheckerProcess:
    """One checker subprocess speaking :mod:`harness.execute.wire.protocol` on stdin/stdout."""

    def __init__(self, device: str, gpu: int | None, scratch: Path, threads: int = 1, cpus: Any = None):
        env = scrubbed_env(scratch, device, gpu, threads)
        env.pop("TRITON_INTERPRET", None)  # the checker never runs candidate kernels
        self.stderr = CappedBuffer()
        self.proc = popen([sys.executable, "-m", "harness.execute.checker.main"], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=scratch)
        if cpus is not None:
            cpus.confine(self.proc.pid)  # pinned to the reserved cores only while it serves a timing phase (harness.execute.parent.cpus)
        threading.Thread(target=drain, args=(self.proc.stderr, self.stderr), daemon=True).start()
        self.lock = threading.Lock()

    def request(self, req: Any) -> Any:
        """Send one request, return its decoded reply (an :class:`protocol.ErrorReply` when it failed)."""
        with self.lock:
            try:
                assert self.proc.stdin is not None and self.proc.stdout is not None
                self.proc.stdin.write((json.dumps(P.encode(req)) + "\n").encode())
                self.proc.stdin.flush()
                line = self.proc.stdout.readline()
            except (BrokenPipeError, OSError):
                line = b""
        if not line:
            raise CheckerDied("reference checker died: " + self.stderr.text()[-2000:])
        try:
            return P.decode(json.loads(line), P.REPLY_FOR[type(req)])
        except (ValueError, P.ProtocolError) as exc:
            raise CheckerDied(f"reference checker sent an unreadable reply ({exc})") from None

    def close_stdin(self) -> None:
        if self.proc.poll() is None and self.proc.stdin:
            try:
                self.proc.stdin.close()
            except OSError:
                pass


class CheckerPool:
    def __init__(self, device: str, gpu: int | None, scratch: Path, size: int = 1, threads: int = 1,
                 cpus: Any = None):
        scratch.mkdir(parents=True, exist_ok=True)
        for sub in ("tmp", "home", "cache"):
            (scratch / sub).mkdir(exist_ok=True)
        self.procs = [CheckerProcess(device, gpu, scratch, threads, cpus) for _ in range(max(1, size))]
        self._cv = threading.Condition()
        self._free: list[CheckerProcess] = list(self.procs)
        self._last: dict[str, CheckerProcess] = {}  # workload key -> the process that computed its references

    def _take(self, key: str) -> CheckerProcess:
        with self._cv:
            while not self._free:
                self._cv.wait()
            proc = self._last.get(key)
            if proc not in self._free:
                proc = self._free[0]
            self._free.remove(proc)
            self._last[key] = proc
            return proc

    def _give(self, proc: CheckerProcess) -> None:
        with self._cv:
            self._free.append(proc)
            self._cv.notify()

    def request(self, req: Any, key: str) -> tuple[Any, float]:
        """(reply, seconds waited for a free process) for one request about workload ``key``."""
        t0 = time.monotonic()
        proc = self._take(key)
        waited = time.monotonic() - t0
        try:
            return proc.request(req), waited
        finally:
            self._give(proc)

    @contextmanager
    def lease(self, key: str) -> Iterator[CheckerProcess]:
        """One process for a whole conversation (its kept outputs stay where they were made)."""
        proc = self._take(key)
        try:
            yield proc
        finally:
            self._give(proc)

    def close(self, timeout_s: float = 10.0) -> None:
        """End every checker: close their stdin, give them ``timeout_s`` in all, then kill the rest."""
        for p in self.procs:
            p.close_stdin()
        deadline = time.monotonic() + timeout_s
        for p in self.procs:
            try:
                p.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                kill_group(p.proc)
            else:
                kill_group(p.proc)  # reaps, and forgets it in process.LIVE
