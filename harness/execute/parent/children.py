"""The parent's children, whatever they run: started in sessions of their own, remembered until reaped, their
output drained into capped buffers, and ended with everything they started.

Every process the parent starts runs in its own session (process group), with a scrubbed environment
(:func:`scrubbed_env`), stdin closed and stdout/stderr drained into capped buffers; :func:`kill_group` ends a
process with everything it started: its group, and its whole tree of descendants in whatever session. Every
process started here is remembered in :data:`LIVE` until it is reaped, so a run that is interrupted (Ctrl-C,
SIGTERM) can end them all (:func:`kill_all`) and leave no orphan behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import weakref
from pathlib import Path
from typing import Any

from harness.execute.parent import reaper

PROJECT_ROOT = Path(__file__).resolve().parents[3]
OUTPUT_CAP_BYTES = 64 * 1024

LIVE: "weakref.WeakSet[subprocess.Popen]" = weakref.WeakSet()
"""Processes started by this module and not yet reaped."""
_LIVE_LOCK = threading.Lock()


class CappedBuffer:
    """Keeps the first and last ``cap/2`` bytes of a stream and counts the rest."""

    def __init__(self, cap: int = OUTPUT_CAP_BYTES):
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0
        self.cap = cap
        self._lock = threading.Lock()

    def feed(self, data: bytes) -> None:
        with self._lock:
            half = self.cap // 2
            room = half - len(self.head)
            if room > 0:
                self.head += data[:room]
                data = data[room:]
            if data:
                self.tail += data
                if len(self.tail) > half:
                    self.dropped += len(self.tail) - half
                    del self.tail[: len(self.tail) - half]

    def text(self) -> str:
        with self._lock:
            mid = f"\n... [{self.dropped} bytes dropped] ...\n" if self.dropped else ""
            return self.head.decode(errors="replace") + mid + self.tail.decode(errors="replace")


def drain(stream: Any, buf: CappedBuffer) -> None:
    for chunk in iter(lambda: stream.read(65536), b""):
        buf.feed(chunk)


def worker_pythonpath() -> str:
    """The import path of every process the parent starts: the project, then ``KERNELGATE_EXTRA_PYTHONPATH`` or
    the parent's own ``PYTHONPATH`` (packages a user put there, a carried site folder)."""
    extra = os.environ.get("KERNELGATE_EXTRA_PYTHONPATH") or os.environ.get("PYTHONPATH")
    return str(PROJECT_ROOT) + (os.pathsep + extra if extra else "")


def scrubbed_env(scratch: Path, device: str, gpu: int | None, threads: int = 1) -> dict[str, str]:
    """The whole environment of a worker or checker: nothing of the parent's leaks through.

    Home, caches and temporary files point into ``scratch``, so libraries that
    write to ``~/.cache`` or ``~/.triton`` (production kernel libraries do, at
    their first call) write inside the sandbox's writable folder.
    """
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(scratch / "home"),
        "TMPDIR": str(scratch / "tmp"),
        "PYTHONPATH": str(PROJECT_ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONHASHSEED": "0",
        "TRITON_CACHE_DIR": str(scratch / "triton-cache"),
        "TRITON_HOME": str(scratch / "home"),
        "TILELANG_CACHE_DIR": str(scratch / "tilelang-cache"),
        "TVM_FFI_CACHE_DIR": str(scratch / "tvm-cache"),
        "XDG_CACHE_HOME": str(scratch / "cache"),
        "TORCHINDUCTOR_CACHE_DIR": str(scratch / "cache" / "inductor"),
        "TORCHINDUCTOR_COMPILE_THREADS": "1",  # torch.compile in a candidate compiles in-process: no worker pool
                                               # outlives its forward (processes left running are charged)
        "OMP_NUM_THREADS": str(max(1, threads)),
        "MKL_NUM_THREADS": str(max(1, threads)),
        "LANG": "C.UTF-8",
    }
    for passthrough in ("LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
                        "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
                        "KERNELGATE_CHECKER_CACHE_MB", "KERNELGATE_FAKE_DEVICE_MEMORY_GB"):
        if passthrough in os.environ:
            env[passthrough] = os.environ[passthrough]
    env["PYTHONPATH"] = worker_pythonpath()
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
    else:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu if gpu is not None else 0)
    return env


def popen(argv: list[str], **kwargs: Any) -> subprocess.Popen:
    """``subprocess.Popen`` in a new session, remembered in :data:`LIVE` until reaped."""
    proc = subprocess.Popen(argv, start_new_session=True, **kwargs)
    with _LIVE_LOCK:
        LIVE.add(proc)
    return proc


def wait_briefly(proc: subprocess.Popen) -> int | None:
    """The exit code, after at most 30 s (then SIGKILL and another 30 s)."""
    try:
        code = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            return None
    with _LIVE_LOCK:
        LIVE.discard(proc)
    return code


def _kill_tree_and_group(proc: subprocess.Popen, spare: frozenset[int] = frozenset()) -> None:
    """SIGKILL every descendant of ``proc`` (any session or group), ``proc`` itself, then its group."""
    reaper.kill_tree(proc.pid, spare)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_group(proc: subprocess.Popen) -> int | None:
    """SIGKILL the process's whole tree (its descendants in any session: :func:`harness.execute.parent.reaper.kill_tree`)
    and its group (it runs in its own session), reap it, return its exit code.

    Other processes of :data:`LIVE` in that tree are spared, with their own trees: a fork server's workers
    outlive the server and are ended by their owners (``tests/execute/test_forkserver.py``).

    Bug it stops: the group alone missed a candidate's ``sh -c 'setsid sleep 97 &'``, a process in a session
    of its own, which outlived the run (``tests/execute/test_reaper.py``)."""
    if proc.poll() is None:
        with _LIVE_LOCK:
            spare = frozenset(p.pid for p in LIVE if p is not proc and p.returncode is None)
        _kill_tree_and_group(proc, spare)
    return wait_briefly(proc)


def kill_all() -> int:
    """Kill every process this module started that is still alive, with its whole tree and group (an
    interrupted run); returns how many."""
    with _LIVE_LOCK:
        procs = list(LIVE)
    alive = [proc for proc in procs if proc.poll() is None]  # before any kill: a server's tree holds its workers
    for proc in alive:
        _kill_tree_and_group(proc)
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        with _LIVE_LOCK:
            LIVE.discard(proc)
    return len(alive)


def signame(num: int) -> str:
    try:
        return f"{signal.Signals(num).name} ({num})"
    except ValueError:
        return f"signal {num}"
