"""The parent's handle on its workers: spawning one (with exec, or from the fork server), its pipes and scratch
folder, reading a pre-started worker's warm line, and a GPU health probe after a fault.

What every child of the parent shares (sessions of their own, capped output, tree kills, the environment) is in
:mod:`harness.execute.parent.children`.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.execute.parent.children import LIVE, _LIVE_LOCK, CappedBuffer, drain, kill_group, popen, scrubbed_env
from harness.execute.wire.protocol import GPU_GO, GPU_WANT_LINE, WARM_LINE_MAX, parse_warm_line

SCRATCH_DIRS = ("tmp", "handoff", "triton-cache", "tilelang-cache", "cache", "home")

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
    timed. Bug it stops: workers starting beside a timed workload slowed honest kernels' libraries 3-11x in the
    service's load test, and the suite's disturbed timing sets came in runs of about a second (a worker's warm-up
    on the H200 makes its context in 0.3-0.6 s)."""
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
