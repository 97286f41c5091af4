"""Process helpers of the parent: spawning workers and checkers, their environment, output, end.

Every process the parent starts runs in its own session (process group), with
a scrubbed environment, stdin closed and stdout/stderr drained into capped
buffers; :func:`kill_group` ends a process with everything it started: its
group, and its whole tree of descendants in whatever session (a worker is a
child subreaper, so orphans of its candidate's processes are in that tree:
:mod:`harness.execute.parent.reaper`).
Every process started here is also remembered in :data:`LIVE` until it is
reaped, so a run that is interrupted (Ctrl-C, SIGTERM) can end them all
(:func:`kill_all`) and leave no orphan behind.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.execute.parent import reaper
from harness.execute.wire.protocol import GPU_GO, GPU_WANT_LINE, WARM_LINE_MAX, parse_warm_line

PROJECT_ROOT = Path(__file__).resolve().parents[3]
OUTPUT_CAP_BYTES = 64 * 1024
SCRATCH_DIRS = ("tmp", "handoff", "triton-cache", "tilelang-cache", "cache", "home")

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
    extra_path = os.environ.get("KERNELGATE_EXTRA_PYTHONPATH") or os.environ.get("PYTHONPATH")
    if extra_path:
        env["PYTHONPATH"] += os.pathsep + extra_path
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
    else:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu if gpu is not None else 0)
    return env


def run_tag(run_id: str) -> str:
    """The part of a run id that names the run's scratch folders (``kg-<tag>-*``, ``checker-<tag>-*``): its
    random suffix, so two runs sharing a scratch root never share (or delete) each other's folders.

    Bug it stops: the tag was ``run_id[:8]``, the date, so two runs on one day shared ``checker-YYYYMMDD-0``
    (one run's close deleted the other's checker folder) and an interrupted run's cleanup deleted the other
    run's worker folders (``kg-YYYYMMDD-*``).
    """
    tail = run_id.rsplit("-", 1)[-1]
    return tail if tail and tail != run_id else run_id.replace("/", "_")[:32]


def make_scratch(root: Path, tag: str) -> Path:
    """A fresh scratch folder (home, TMPDIR, compiler caches, output hand-off) for one process."""
    scratch = Path(root) / f"kg-{tag}-{secrets.token_hex(3)}"
    for sub in SCRATCH_DIRS:
        (scratch / sub).mkdir(parents=True, exist_ok=True)
    return scratch


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


@dataclass
class WorkerProc:
    """A spawned worker process and the parent's ends of its pipes."""

    proc: subprocess.Popen
    scratch: Path
    p2c_w: int
    c2p_r: int
    out_buf: CappedBuffer
    err_buf: CappedBuffer
    drains: list
    prestarted: bool = False
    isolation: str = "strict"
    """The level the worker was started with (``off``: no keeper, the process is the worker itself)."""
    warm_s: dict | None = None
    """A pre-started worker's warm-up, step by step (its claim) and ``wall_s`` (spawn to warm, the parent's
    clock): diagnostics, ``warm_*`` in the records' ``phase_s``."""

    _confined: int | None = None
    vitals: Any = None
    """A pre-started worker's :class:`harness.execute.parent.vitals.Vitals` once warm (checked before it is taken)."""

    def confined_pid(self) -> int | None:
        """The confined worker's pid (its keeper's one child; the process itself when isolation is off), or None
        when it is not there (not started yet, or gone). Known once the worker has written its first line."""
        if self.isolation == "off":
            return self.proc.pid
        if self._confined is None:
            from harness.execute.parent.confinement import confined_pid

            self._confined = confined_pid(self.proc.pid)
        return self._confined

    def close_fds(self) -> None:
        """Close the parent's pipe ends, once: a closed end is set to -1 (its number may already be reused by
        another thread's new file, which a second close would take from it)."""
        fds = (self.p2c_w, self.c2p_r)
        self.p2c_w = self.c2p_r = -1
        for fd in fds:
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass

    def discard(self) -> None:
        """Kill it and free its pipes and scratch (a pre-started worker nobody took)."""
        kill_group(self.proc)
        self.close_fds()
        shutil.rmtree(self.scratch, ignore_errors=True)


def wait_ready(w: "WorkerProc", timeout_s: float, gate: Any = None) -> bool:
    """Read a pre-started worker's warm line (:func:`harness.execute.wire.protocol.warm_line`; byte by byte, so
    nothing after it is consumed) into ``w.warm_s``; False when it exited, wrote anything else or took longer
    than ``timeout_s``.

    With ``gate`` (a :class:`harness.execute.parent.gate.DeviceGate`; the worker was told ``gpu_gate``), the worker
    first writes :data:`~harness.execute.wire.protocol.GPU_WANT_LINE`: it is let go with a background place in the
    gate held until its warm line (or its end), so its CUDA context and profiler are never made while a workload is
    timed. Bug it stops: workers starting beside a timed workload slowed honest kernels' libraries 3-11x in
    session 9's service load test, and the suite's disturbed timing sets came in runs of about a second (a
    worker's warm-up on the H200 makes its context in 0.3-0.6 s)."""
    import select
    import time

    t0 = time.monotonic()
    deadline = t0 + timeout_s
    got = b""
    held = False
    try:
        while not got.endswith(b"\n") and len(got) < WARM_LINE_MAX:
            left = deadline - time.monotonic()
            fd = w.c2p_r
            if left <= 0 or fd < 0:
                return False
            try:
                ready, _, _ = select.select([fd], [], [], min(left, 0.5))
                chunk = os.read(fd, 1) if ready else None
            except (OSError, ValueError):
                return False
            if chunk is None:
                continue
            if not chunk:
                return False
            got += chunk
            if got == GPU_WANT_LINE and gate is not None and not held:
                gate.acquire_background()
                held = True
                try:
                    os.write(w.p2c_w, GPU_GO)
                except OSError:
                    return False
                got = b""
    finally:
        if held:
            gate.release_background()
    laps = parse_warm_line(got)
    if laps is None:
        return False
    w.warm_s = {**laps, "wall_s": round(time.monotonic() - t0, 3)}
    return True


def spawn_worker(scratch: Path, device: str, gpu: int | None, prestart: dict | None = None,
                 threads: int = 1, cpus: Any = None, fork: bool = False, isolation: str = "strict") -> WorkerProc:
    """Start ``python -m harness.execute.worker.main`` in ``scratch``: a fresh interpreter, scrubbed env, own session;
    kept off the timed pair's cores when ``cpus`` (a :class:`harness.execute.parent.cpus.CpuPlan`) is given.

    ``fork``: ask this process's fork server (:mod:`harness.execute.parent.forks`) for it instead, a child of a
    process that has already imported torch; where it cannot, the worker is started with exec as above."""
    p2c_r, p2c_w = os.pipe()
    c2p_r, c2p_w = os.pipe()
    args = ["--prestart", json.dumps(prestart)] if prestart is not None else []
    env = scrubbed_env(scratch, device, gpu, threads)
    proc: Any = None
    try:
        if fork:
            from harness.execute.parent import forks as forkserver

            server = forkserver.server_for(device, threads)
            if server is not None:
                try:
                    proc = server.spawn(args, scratch, env, p2c_r, c2p_w)
                    with _LIVE_LOCK:
                        LIVE.add(proc)
                except forkserver.ForkServerError as exc:
                    forkserver.note_fallback(str(exc)[:300])
                    # a child the server forked before failing may still hold these pipes (until it reads their
                    # end, closed here): the started worker gets pipes of its own, so no spec can reach the other
                    for fd in (p2c_r, p2c_w, c2p_r, c2p_w):
                        os.close(fd)
                    p2c_r, p2c_w = os.pipe()
                    c2p_r, c2p_w = os.pipe()
            else:
                forkserver.note_fallback()
        if proc is None:
            argv = [sys.executable, "-m", "harness.execute.worker.main", "--in-fd", str(p2c_r), "--out-fd", str(c2p_w),
                    *args]
            proc = popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         pass_fds=(p2c_r, c2p_w), cwd=scratch, env=env)
    except BaseException:
        os.close(p2c_w)
        os.close(c2p_r)
        raise
    finally:
        os.close(p2c_r)
        os.close(c2p_w)
    if cpus is not None:
        cpus.confine(proc.pid)  # before it starts threads: they inherit the main thread's cores
    out_buf, err_buf = CappedBuffer(), CappedBuffer()
    drains = [threading.Thread(target=drain, args=(proc.stdout, out_buf), daemon=True),
              threading.Thread(target=drain, args=(proc.stderr, err_buf), daemon=True)]
    for t in drains:
        t.start()
    if prestart is not None:
        isolation = str(prestart.get("isolation", isolation))
    return WorkerProc(proc, scratch, p2c_w, c2p_r, out_buf, err_buf, drains, prestarted=prestart is not None,
                      isolation=isolation)


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """A GPU health probe's outcome: usable, full (out of memory: neighbours may still hold it) or broken."""

    state: str
    """``healthy``, ``full`` or ``broken``."""
    seconds: float
    detail: str = ""

    @property
    def healthy(self) -> bool:
        return self.state == "healthy"


_PROBE = ("import torch\n"
          "x = torch.ones(1024, device='cuda'); torch.cuda.synchronize()\n"
          "assert float((x + 1).sum()) == 2048.0\n")


def gpu_probe(gpu: int, timeout_s: float = 120.0) -> ProbeResult:
    """A tiny probe in a fresh process: is the GPU usable after a crash, a kill or an out-of-memory?

    An out-of-memory in the probe means the GPU is *full*, not broken: other
    processes still hold its memory, and the caller retries after they end.
    """
    import time

    env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu)}
    t0 = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-c", _PROBE], env=env, timeout=timeout_s, capture_output=True,
                              text=True)
    except subprocess.TimeoutExpired:
        return ProbeResult("broken", time.monotonic() - t0, f"the probe did not finish in {timeout_s:.0f} s")
    dt = time.monotonic() - t0
    if proc.returncode == 0:
        return ProbeResult("healthy", dt)
    err = proc.stderr[-600:]
    full = "out of memory" in err.lower() or "cudaErrorMemoryAllocation" in err
    return ProbeResult("full" if full else "broken", dt, err.strip().splitlines()[-1][:300] if err.strip() else "")
