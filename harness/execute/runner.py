"""The runner: the trusted parent that schedules candidates and writes results.

It never imports candidate code and never initialises CUDA. For every
candidate it spawns a fresh interpreter (:mod:`harness.execute.worker`) in its
own scratch folder, with a scrubbed environment, private compiler caches,
stdin closed, stdout/stderr drained into capped buffers, and a new process
group that is killed whole on timeout. Reference outputs are computed and
compared by a separate trusted process (:mod:`harness.execute.checker`).

Several candidates may be in flight at once (``jobs``): imports and compiles
overlap; on each device up to a few candidates run their correctness rounds
side by side, and one at a time is timed with the device to itself
(:class:`harness.execute.gate.DeviceGate`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from harness import __version__
from harness.candidates.discover import Candidate
from harness.execute.channel import ChannelError, Endpoint, send_raw_json
from harness.execute.gate import DeviceGate
from harness.execute.inputs import N_ROUNDS_MIN, round_seed
from harness.measure.timing import TimingConfig, summarize
from harness.problems.loader import Problem, Workload
from harness.records import CorrectnessStats, EnvSnapshot, ErrorInfo, JobResult, Status, TimingStats

PROJECT_ROOT = Path(__file__).resolve().parents[2]
OUTPUT_CAP_BYTES = 64 * 1024
NOISY_IQR = 0.10


@dataclass
class RunOptions:
    device: str = "cpu"
    """``cpu`` or ``cuda``; the runner itself never touches the GPU."""
    gpus: tuple[int, ...] = (0,)
    rounds: int = N_ROUNDS_MIN
    base_seed: int = 0
    compile_timeout_s: float = 300.0
    round_timeout_s: float = 120.0
    timing_timeout_s: float = 300.0
    timing: TimingConfig = field(default_factory=TimingConfig)
    time_kernels: bool = True
    jobs: int = 1
    keep_scratch: bool = False
    scratch_root: Path | None = None
    precompile: bool = True
    """GPU: run one dry forward (compile, no launches) before asking for the device (overlaps compiles)."""
    sandbox: bool = True
    """Apply the Landlock sandbox (harness.execute.sandbox) in each worker."""
    max_file_bytes: int = 4 << 30
    """RLIMIT_FSIZE of the worker: no single file it writes (outputs included) may exceed this."""
    gpu_memory_fraction: float = 0.5
    """GPU: share of the device's memory one worker's caching allocator may hold."""
    prestart: bool = True
    """Keep pre-started workers ready (interpreter, sandbox, torch, CUDA context) so candidates do not wait for them."""
    check_slots: int = 3
    """GPU: candidates whose correctness rounds may share one device at once (timing is always exclusive)."""
    handoff: str = "ipc"
    """GPU: 'ipc' (outputs reach the checker through CUDA IPC handles) or 'file' (harness.execute.handoff)."""


class CappedBuffer:
    """Keeps the first and last ``cap/2`` bytes of a stream and counts the rest."""

    def __init__(self, cap: int = OUTPUT_CAP_BYTES):
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0
        self.cap = cap

    def feed(self, data: bytes) -> None:
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
        mid = f"\n... [{self.dropped} bytes dropped] ...\n" if self.dropped else ""
        return self.head.decode(errors="replace") + mid + self.tail.decode(errors="replace")


def _drain(stream: Any, buf: CappedBuffer) -> None:
    for chunk in iter(lambda: stream.read(65536), b""):
        buf.feed(chunk)


def job_id(cand: Candidate, problem: Problem, workload: Workload, env: EnvSnapshot) -> str:
    """Content hash of everything a result depends on: an unchanged candidate on an
    unchanged problem, workload, environment (device model, driver, library
    versions: not which physical GPU of that model) and harness version has the
    same id, which is what ``--resume`` and the cache key on."""
    key = "|".join(map(str, (cand.sha256, problem.id, problem.version, workload.name, sorted(workload.params.items()),
                             env.comparable_key(), __version__)))
    return hashlib.sha256(key.encode()).hexdigest()[:20]


def _signame(num: int) -> str:
    try:
        return f"{signal.Signals(num).name} ({num})"
    except ValueError:
        return f"signal {num}"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def scrubbed_env(scratch: Path, device: str, gpu: int | None) -> dict[str, str]:
    """The worker's whole environment: nothing of the parent's leaks through."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(scratch),
        "TMPDIR": str(scratch / "tmp"),
        "PYTHONPATH": str(PROJECT_ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONHASHSEED": "0",
        "TRITON_CACHE_DIR": str(scratch / "triton-cache"),
        "TILELANG_CACHE_DIR": str(scratch / "tilelang-cache"),
        "TVM_FFI_CACHE_DIR": str(scratch / "tvm-cache"),
        "XDG_CACHE_HOME": str(scratch / "cache"),
        "OMP_NUM_THREADS": os.environ.get("KERNELGATE_WORKER_THREADS", "2"),
        "LANG": "C.UTF-8",
    }
    for passthrough in ("LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
                        "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"):
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


class Checker:
    """Handle on the trusted reference-checker subprocesses of one device (a pool of ``size``).

    Each compare goes to a free process, so the correctness phases that share
    a GPU (see :mod:`harness.execute.gate`) are checked side by side. A
    workload's compares prefer the process that served it last: that process
    has its references cached (the candidates of one problem get the same
    round seeds), so a problem's references are computed once per run.
    """

    def __init__(self, device: str, gpu: int | None, scratch: Path, size: int = 1):
        env = scrubbed_env(scratch, device, gpu)
        env.pop("TRITON_INTERPRET", None)
        if "KERNELGATE_CHECKER_CACHE_MB" in os.environ:
            env["KERNELGATE_CHECKER_CACHE_MB"] = os.environ["KERNELGATE_CHECKER_CACHE_MB"]
        scratch.mkdir(parents=True, exist_ok=True)
        (scratch / "tmp").mkdir(exist_ok=True)
        self._stderr = CappedBuffer()
        self.procs = [subprocess.Popen(
            [sys.executable, "-m", "harness.execute.checker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=env, cwd=scratch, start_new_session=True,
        ) for _ in range(max(1, size))]
        self._cv = threading.Condition()
        self._free: list[subprocess.Popen] = list(self.procs)
        self._last: dict[str, subprocess.Popen] = {}  # workload key -> the process that computed its references
        for proc in self.procs:
            threading.Thread(target=_drain, args=(proc.stderr, self._stderr), daemon=True).start()

    def _take(self, key: str) -> subprocess.Popen:
        with self._cv:
            while not self._free:
                self._cv.wait()
            proc = self._last.get(key)
            if proc not in self._free:
                proc = self._free[0]
            self._free.remove(proc)
            self._last[key] = proc
            return proc

    def _give(self, proc: subprocess.Popen) -> None:
        with self._cv:
            self._free.append(proc)
            self._cv.notify()

    def compare(self, req: dict) -> dict:
        """The checker's reply to ``req``, plus ``queue_s``: how long it waited for a free checker process."""
        t0 = time.monotonic()
        proc = self._take(json.dumps([req.get("problem_path"), req.get("params"), req.get("dtype")], sort_keys=True))
        queue_s = round(time.monotonic() - t0, 4)
        try:
            assert proc.stdin and proc.stdout
            proc.stdin.write((json.dumps(req) + "\n").encode())
            proc.stdin.flush()
            line = proc.stdout.readline()
        except (BrokenPipeError, OSError):
            line = b""
        finally:
            self._give(proc)
        if not line:
            return {"ok": False, "status": "HARNESS_ERROR", "detail": "reference checker died: " + self._stderr.text()[-2000:],
                    "queue_s": queue_s}
        return {**json.loads(line), "queue_s": queue_s}

    def close(self, timeout_s: float = 10.0) -> None:
        """End every checker: close their stdin, give them ``timeout_s`` in all, then kill the rest."""
        for proc in self.procs:
            if proc.poll() is None and proc.stdin:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
        deadline = time.monotonic() + timeout_s
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                kill_group(proc)


SCRATCH_DIRS = ("tmp", "handoff", "triton-cache", "tilelang-cache", "cache")


def make_scratch(root: Path, tag: str) -> Path:
    """A fresh scratch folder (TMPDIR, compiler caches, output hand-off) for one worker."""
    scratch = root / f"kg-{tag}-{secrets.token_hex(3)}"
    for sub in SCRATCH_DIRS:
        (scratch / sub).mkdir(parents=True, exist_ok=True)
    return scratch


def wait_briefly(proc: subprocess.Popen) -> int | None:
    """The exit code, after at most 30 s (then SIGKILL and another 30 s)."""
    try:
        return proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(timeout=30)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the worker's whole process group (it runs in its own session) and reap it."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    wait_briefly(proc)


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

    def discard(self) -> None:
        """Kill it and free its pipes and scratch (a pre-started worker nobody took)."""
        kill_group(self.proc)
        for fd in (self.p2c_w, self.c2p_r):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.scratch, ignore_errors=True)


def spawn_worker(scratch: Path, device: str, gpu: int | None, prestart: dict | None = None) -> WorkerProc:
    """Start ``python -m harness.execute.worker`` in ``scratch``: fresh interpreter, scrubbed env, own session."""
    p2c_r, p2c_w = os.pipe()
    c2p_r, c2p_w = os.pipe()
    argv = [sys.executable, "-m", "harness.execute.worker", "--in-fd", str(p2c_r), "--out-fd", str(c2p_w)]
    if prestart is not None:
        argv += ["--prestart", json.dumps(prestart)]
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(p2c_r, c2p_w),
        cwd=scratch, env=scrubbed_env(scratch, device, gpu), start_new_session=True,
    )
    os.close(p2c_r)
    os.close(c2p_w)
    out_buf, err_buf = CappedBuffer(), CappedBuffer()
    drains = [threading.Thread(target=_drain, args=(proc.stdout, out_buf), daemon=True),
              threading.Thread(target=_drain, args=(proc.stderr, err_buf), daemon=True)]
    for t in drains:
        t.start()
    return WorkerProc(proc, scratch, p2c_w, c2p_r, out_buf, err_buf, drains, prestarted=prestart is not None)


class Demand:
    """How many candidates of the run still need a worker, shared by the devices' pools: a pool
    never keeps more workers ready than candidates are left (a small run starts no spares)."""

    def __init__(self, candidates: int):
        self._left = max(0, candidates)
        self._lock = threading.Lock()

    @property
    def left(self) -> int:
        return self._left

    def take(self) -> None:
        with self._lock:
            self._left = max(0, self._left - 1)


class WorkerPool:
    """Pre-started workers for one device, so a candidate does not wait for an interpreter.

    A pre-started worker has already applied its resource limits and Landlock
    sandbox (granting read access to every problem folder of the run), then
    imported torch and Triton (and TileLang when the run has TileLang
    candidates), built Triton's driver helpers and created its CUDA context; it waits for one
    candidate's spec, serves that candidate only, and exits like any worker.
    Every worker taken is replaced at once, up to ``size`` idle or starting.
    Nothing about the candidate is known to the worker before its spec, so
    the isolation guarantees are those of a freshly spawned worker.
    """

    def __init__(self, opts: "RunOptions", gpu: int | None, root: Path, tag: str, problem_paths: list[Path], size: int,
                 tilelang: bool = False, demand: "Demand | None" = None):
        self.o, self.gpu, self.root, self.tag, self.size = opts, gpu, root, tag, max(0, size)
        self.demand = demand or Demand(1 << 30)
        self.prestart = {
            "device": opts.device, "sandbox": opts.sandbox, "max_file_bytes": opts.max_file_bytes,
            "problem_paths": sorted({str(Path(p)) for p in problem_paths}), "tilelang": tilelang,
        }
        self._idle: list[WorkerProc] = []
        self._starting = 0
        self._closed = False
        self._lock = threading.Condition()
        for _ in range(self.size):
            self._start_one()

    def _start_one(self) -> None:
        with self._lock:
            if self._closed or len(self._idle) + self._starting >= min(self.size, self.demand.left):
                return
            self._starting += 1
        threading.Thread(target=self._spawn, daemon=True).start()

    def _spawn(self) -> None:
        w = None
        try:
            w = spawn_worker(make_scratch(self.root, f"{self.tag}-pool"), self.o.device, self.gpu, self.prestart)
        except OSError:
            pass
        with self._lock:
            self._starting -= 1
            if w is not None and not self._closed:
                self._idle.append(w)
                w = None
            self._lock.notify_all()
        if w is not None:
            w.discard()

    def take(self, wait_s: float = 120.0) -> WorkerProc | None:
        """A pre-started worker (oldest first), or None; either way a replacement starts.

        When none is idle but some are starting, waits for one (up to ``wait_s``): it
        started earlier than a worker spawned now would, so waiting is never slower.
        """
        self.demand.take()
        got = None
        deadline = time.monotonic() + wait_s
        with self._lock:
            while got is None and not self._closed:
                while self._idle and got is None:
                    w = self._idle.pop(0)
                    if w.proc.poll() is None:
                        got = w
                    else:
                        threading.Thread(target=w.discard, daemon=True).start()
                left = deadline - time.monotonic()
                if got is not None or self._starting == 0 or left <= 0:
                    break
                self._lock.wait(timeout=left)
        self._start_one()
        return got

    def close(self, timeout_s: float = 30.0) -> None:
        """Kill every idle worker at once and reap them side by side (a worker with a CUDA
        context can take a second or two to exit; one after the other, eight took > 9 s)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            self._lock.notify_all()
        reapers = [threading.Thread(target=w.discard, daemon=True) for w in idle]
        for t in reapers:
            t.start()
        deadline = time.monotonic() + timeout_s
        for t in reapers:
            t.join(timeout=max(0.0, deadline - time.monotonic()))


def gpu_healthy(gpu: int) -> bool:
    """A tiny probe in a fresh process: is the GPU usable after a crash or a kill?"""
    code = "import torch; x = torch.ones(1024, device='cuda'); torch.cuda.synchronize(); assert float((x + 1).sum()) == 2048.0"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu)}
    try:
        return subprocess.run([sys.executable, "-c", code], env=env, timeout=120, capture_output=True).returncode == 0
    except subprocess.TimeoutExpired:
        return False


class _Timeout(Exception):
    pass


class _Died(Exception):
    pass


class Session:
    """Runs one candidate in one worker process and turns its reports into records."""

    def __init__(self, cand: Candidate, problem: Problem, workloads: list[Workload], opts: RunOptions, env: EnvSnapshot,
                 run_id: str, checker: Checker, device_lock: DeviceGate, gpu: int | None,
                 diagnostics: tuple[dict, ...], screen: Callable[..., Any] | None, pool: WorkerPool | None = None):
        self.c, self.p, self.workloads, self.o = cand, problem, workloads, opts
        self.env, self.run_id, self.checker, self.lock, self.gpu = env, run_id, checker, device_lock, gpu
        self.diagnostics, self.screen, self.pool = diagnostics, screen, pool
        self.results: dict[str, JobResult] = {}
        self.lock_held = ""  # "", "shared" (correctness) or "exclusive" (timing, probe)
        self._probe: tuple[bool, float] | None = None
        self._clock = time.monotonic()
        self._phases: dict[str, dict[str, float]] = {"*": {}}

    # ------------------------------------------------------------------ records
    def _record(self, w: Workload, status: Status, *, error: dict | ErrorInfo | None = None,
                correctness: CorrectnessStats | None = None, timing: TimingStats | None = None,
                library_timing: TimingStats | None = None, warnings: tuple[str, ...] = (), screening: Any = None,
                extra_diag: tuple[dict, ...] = ()) -> None:
        if w.name in self.results:
            return
        if isinstance(error, dict):
            error = ErrorInfo(error.get("type", "Error"), error.get("message", ""), error.get("traceback_tail", ""))
        self.results[w.name] = JobResult(
            job_id=job_id(self.c, self.p, w, self.env), run_id=self.run_id, candidate=self.c.rel_path,
            candidate_sha256=self.c.sha256, generator=self.c.generator, generator_version=self.c.generator_version,
            problem_id=self.p.id, category=self.p.category, workload=w.name, dtype=w.dtype, dsl=self.c.dsl,
            status=status, flops=w.flops, min_bytes=w.min_bytes, env=self.env, created_at=_now(), error=error,
            correctness=correctness, timing=timing, library_timing=library_timing, screening=screening,
            diagnostics=self.diagnostics + extra_diag, warnings=warnings, problem_version=self.p.version,
            allow_tf32=w.allow_tf32, base_seed=self.o.base_seed,
        )

    def _lap(self, key: str, phase: str) -> None:
        """Charge the wall time since the last lap to ``phase`` of ``key`` (a workload, or '*' for the candidate)."""
        now = time.monotonic()
        self._phases.setdefault(key, {})[phase] = round(now - self._clock, 4)
        self._clock = now

    def _add(self, key: str, phase: str, seconds: object) -> None:
        """Add ``seconds`` to the running total ``phase`` of ``key`` (a part of a lapped phase, for diagnostics)."""
        if isinstance(seconds, (int, float)) and 0 <= seconds < 1e6:
            ph = self._phases.setdefault(key, {})
            ph[phase] = round(ph.get(phase, 0.0) + float(seconds), 4)

    def _fail_rest(self, status: Status, error: dict) -> None:
        for w in self.workloads:
            self._record(w, status, error=error)

    # ------------------------------------------------------------------ process
    def run(self) -> list[JobResult]:
        self._clock = time.monotonic()
        worker = self.pool.take() if self.pool is not None else None
        if worker is None:
            root = Path(self.o.scratch_root or os.environ.get("TMPDIR", "/tmp")).resolve()
            worker = spawn_worker(make_scratch(root, f"{self.run_id[:8]}-{self.c.sha256[:12]}"), self.o.device, self.gpu)
        proc, scratch, p2c_w, out_buf, err_buf, drains = (worker.proc, worker.scratch, worker.p2c_w, worker.out_buf,
                                                          worker.err_buf, worker.drains)
        cand_file = scratch / self.c.path.name
        shutil.copyfile(self.c.path, cand_file)
        key = secrets.token_bytes(32)
        self._reader = os.fdopen(worker.c2p_r, "rb", buffering=0)
        chan = Endpoint(self._reader, p2c_w, key)
        try:
            send_raw_json(p2c_w, self._spec(cand_file, scratch, key))
            self._converse(chan)
        except _Timeout as exc:
            kill_group(proc)
            self._fail_rest(Status.TIMEOUT, {"type": "Timeout", "message": str(exc), "traceback_tail": err_buf.text()[-2000:]})
        except (_Died, ChannelError, BrokenPipeError, OSError) as exc:
            code = wait_briefly(proc)
            how = f"killed by {_signame(-code)}" if code is not None and code < 0 else f"exit code {code}"
            status = Status.CRASHED if not isinstance(exc, ChannelError) else Status.REWARD_HACK
            msg = f"worker ended unexpectedly ({how}): {exc}" if status is Status.CRASHED else f"result channel tampered: {exc}"
            self._fail_rest(status, {"type": type(exc).__name__, "message": msg, "traceback_tail": err_buf.text()[-3000:]})
        finally:
            kill_group(proc)
            self._probe_after_fault()  # still holding the device: nothing is timed on a GPU being probed
            self._release()
            for t in drains:
                t.join(timeout=5)
            for fd_obj in (self._reader,):
                try:
                    fd_obj.close()
                except OSError:
                    pass
            try:
                os.close(p2c_w)
            except OSError:
                pass
            if not self.o.keep_scratch:
                shutil.rmtree(scratch, ignore_errors=True)
        self._fail_rest(Status.HARNESS_ERROR, {"type": "NoReport", "message": "the worker reported nothing for this workload"})
        shared = self._phases["*"]
        records = [self.results[w.name].replace(phase_s={**shared, **self._phases.get(w.name, {})})
                   for w in self.workloads]
        if self._probe is not None:
            healthy, seconds = self._probe
            note = (f"GPU {self.gpu or 0} health probe after this fault: {'passed' if healthy else 'FAILED'} "
                    f"in {seconds:.1f} s")
            records = [r.replace(warnings=r.warnings + (note,)) for r in records]
            if not healthy:
                from harness.execute.scheduler import DeviceUnhealthy

                raise DeviceUnhealthy(f"GPU {self.gpu} failed its health probe after {self.c.rel_path}", records)
        return records

    def _probe_after_fault(self) -> None:
        """After a crash, kill or CUDA error on a GPU, check in a fresh process that the GPU still works."""
        faulted = any(r.status in (Status.CRASHED, Status.TIMEOUT, Status.RUNTIME_ERROR) for r in self.results.values())
        if not faulted or self.o.device != "cuda":
            return
        self._acquire("exclusive")
        t0 = time.monotonic()
        self._probe = (gpu_healthy(self.gpu or 0), time.monotonic() - t0)

    def _spec(self, cand_file: Path, scratch: Path, key: bytes) -> dict:
        return {
            "key": key.hex(), "candidate_path": str(cand_file), "problem_path": str(self.p.path), "device": self.o.device,
            "handoff_dir": str(scratch / "handoff"), "library_aten": list(self.p.library_aten),
            "input_transform": self.p.input_transform, "in_place": self.p.in_place, "timing": self.o.timing.to_dict(),
            "precompile": self.o.precompile, "dsl": self.c.dsl, "sandbox": self.o.sandbox,
            "max_file_bytes": self.o.max_file_bytes, "gpu_memory_fraction": self.o.gpu_memory_fraction,
            "handoff": self.o.handoff,
            "workloads": [{
                "name": w.name, "params": w.params, "dtype": w.dtype, "allow_tf32": w.allow_tf32,
                "model_seed": round_seed(self.o.base_seed, w.name, -1),
                "warm_seed": round_seed(self.o.base_seed, w.name, -2),
                "rounds": self.o.rounds,
            } for w in self.workloads],
        }

    def _recv(self, chan: Endpoint, timeout_s: float, what: str) -> dict:
        ready, _, _ = select.select([chan], [], [], timeout_s) if not chan.has_buffered else ([chan], [], [])
        if not ready:
            raise _Timeout(f"no progress for {timeout_s:.0f} s while {what}")
        msg = chan.recv()
        if msg is None:
            raise _Died(f"channel closed while {what}")
        return msg

    def _acquire(self, mode: str) -> None:
        """Hold the GPU gate in ``mode`` ('shared' or 'exclusive'), giving back any other hold first."""
        if self.lock_held == mode:
            return
        self._release()
        (self.lock.acquire_shared if mode == "shared" else self.lock.acquire_exclusive)()
        self.lock_held = mode

    def _release(self) -> None:
        held, self.lock_held = self.lock_held, ""
        if held == "shared":
            self.lock.release_shared()
        elif held == "exclusive":
            self.lock.release_exclusive()

    def _converse(self, chan: Endpoint) -> None:
        o = self.o
        msg = self._recv(chan, o.compile_timeout_s, "starting the worker")
        if msg.get("event") == "fatal":
            self._fail_rest(Status(msg["status"]), msg["error"])
            return
        if msg.get("event") != "ready":
            raise _Died(f"unexpected first message {msg}")
        self.env = dataclasses.replace(self.env, sandbox=str(msg.get("sandbox", "none"))[:200])
        self._lap("*", "startup_s")
        msg = self._recv(chan, o.compile_timeout_s, "importing the candidate")
        self._lap("*", "import_s")
        if msg.get("event") == "fatal":
            self._fail_rest(Status(msg["status"]), msg["error"])
            return
        by_name = {w.name: w for w in self.workloads}
        while True:
            msg = self._recv(chan, o.compile_timeout_s, "building the model")
            ev = msg.get("event")
            if ev == "done":
                return
            if ev == "workload_fatal":
                self._record(by_name[msg["workload"]], Status(msg["status"]), error=msg["error"])
                continue
            if ev != "want_device":
                raise _Died(f"unexpected message {ev!r}")
            w = by_name[msg["workload"]]
            self._lap(w.name, "build_s")
            # a candidate whose first forward autotunes gets the GPU alone for round 0
            self._acquire("exclusive" if msg.get("exclusive_first_round") else "shared")
            self._lap(w.name, "wait_s")
            try:
                chan.send({"cmd": "go", "seed": round_seed(self.o.base_seed, w.name, 0)})
                self._workload(chan, w)
            finally:
                self._release()

    def _workload(self, chan: Endpoint, w: Workload) -> None:
        o = self.o
        rounds_passed, max_abs, max_excess, lib_excess = 0, 0.0, 0.0, 0.0
        warnings: list[str] = []
        failed: tuple[Status, str, dict | None] | None = None
        lowered: list[str] = []
        for r in range(o.rounds):
            msg = self._recv(chan, o.round_timeout_s + (o.compile_timeout_s if r == 0 else 0), f"running round {r} of '{w.name}'")
            if msg.get("event") != "round":
                raise _Died(f"unexpected message {msg.get('event')!r}")
            if self.lock_held == "exclusive":  # the autotuning round is over: share the GPU again
                t_gate = time.monotonic()
                self._acquire("shared")
                self._add(w.name, "queue_s", time.monotonic() - t_gate)
            if "lowered_sources" in msg:
                lowered = msg["lowered_sources"]
                break
            # parts of correctness_s: the worker's own report of its forward and output hand-off
            # (untrusted, diagnostics only) and the trusted checker's reference and compare
            self._add(w.name, "forward_s", msg.get("forward_s"))
            self._add(w.name, "handoff_s", msg.get("handoff_s"))
            failed = self._judge_round(msg, w)
            if failed is None:
                t_check = time.monotonic()
                res = self.checker.compare({
                    "op": "compare", "problem_path": str(self.p.path), "params": w.params, "dtype": w.dtype,
                    "device": "cuda" if o.device == "cuda" else "cpu", "model_seed": round_seed(o.base_seed, w.name, -1),
                    "seed": round_seed(o.base_seed, w.name, r), "round": r, "input_transform": self.p.input_transform,
                    "atol": w.atol, "rtol": w.rtol, "reduction_length": w.reduction_length, "allow_tf32": w.allow_tf32,
                    **{k: msg[k] for k in ("output_path", "output_ipc") if k in msg},
                })
                self._add(w.name, "check_s", time.monotonic() - t_check)
                self._add(w.name, "queue_s", res.pop("queue_s", 0.0))
                self._add(w.name, "reference_s", res.get("ref_s"))
                if res.get("max_abs_err") is not None:
                    max_abs = max(max_abs, res["max_abs_err"])
                    max_excess = max(max_excess, res["max_excess"])
                    lib_excess = max(lib_excess, res.get("library_max_excess") or 0.0)
                if not res.get("ok"):
                    failed = (Status(res["status"]), f"round {r}: {res.get('detail', '')}", None)
            try:
                os.unlink(msg["output_path"])
            except (KeyError, OSError):
                pass
            if failed is not None:
                self._lap(w.name, "correctness_s")
                if "error" not in msg:  # after a clean forward the worker waits for our word
                    chan.send({"cmd": "stop"})
                corr = CorrectnessStats(r + 1, rounds_passed, max_abs, max_excess, w.atol, w.rtol, r, failed[1])
                self._record(w, failed[0], error=failed[2] or {"type": failed[0].value, "message": failed[1]}, correctness=corr)
                self._recv(chan, o.round_timeout_s, "finishing the workload")
                return
            rounds_passed += 1
            if r + 1 < o.rounds:
                chan.send({"cmd": "next", "seed": round_seed(o.base_seed, w.name, r + 1)})
            else:
                chan.send({"cmd": "last"})
        if lowered:
            from harness.diagnose.lint import lint_cuda_source

            self._lap(w.name, "correctness_s")

            findings = tuple(f.to_dict() for src in lowered for f in lint_cuda_source(src))
            digest = hashlib.sha256("".join(lowered).encode()).hexdigest()[:16]
            self._record(w, Status.LOWERED, warnings=(f"lowered {len(lowered)} TileLang kernel(s) to CUDA source (sha256 {digest}); "
                                                      "not executed: no GPU",), extra_diag=findings)
            self._recv(chan, o.round_timeout_s, "finishing the workload")
            return
        corr = CorrectnessStats(o.rounds, rounds_passed, max_abs, max_excess, w.atol, w.rtol)
        self._lap(w.name, "correctness_s")
        if lib_excess > 1.0:
            warnings.append(f"the library's own output exceeds the tolerance by {lib_excess:.2f}x against float64; "
                            "the tolerance was widened to 1.5x the library's error")
        if not o.time_kernels:
            chan.send({"cmd": "skip"})
            self._recv(chan, o.round_timeout_s, "finishing the workload")
            self._record(w, Status.PASSED, correctness=corr, warnings=tuple(warnings))
            return
        self._acquire("exclusive")  # nothing else runs on this GPU while it is timed
        self._lap(w.name, "timing_wait_s")
        chan.send({"cmd": "time"})
        msg = self._recv(chan, o.timing_timeout_s, f"timing '{w.name}'")
        self._lap(w.name, "timing_s")
        if msg.get("event") == "timing_error":
            self._record(w, Status.RUNTIME_ERROR, error=msg["error"], correctness=corr)
            return
        if msg.get("event") != "timing":
            raise _Died(f"unexpected message {msg.get('event')!r}")
        for note in msg.get("notes") or []:
            # the launch hold is routine; a long one means a host-heavy forward, worth a line
            if not note.startswith("launch queue held") or float(note.split()[3]) >= 1000:
                warnings.append(str(note)[:300])
        kt = self._stats(msg["samples_ms"]["candidate"], msg["timer"])
        lt = self._stats(msg["samples_ms"]["library"], msg["timer"])
        for label, st in (("kernel", kt), ("library", lt)):
            if st.relative_iqr > NOISY_IQR:
                warnings.append(f"{label} timing is noisy: IQR/median = {st.relative_iqr:.0%} (> {NOISY_IQR:.0%})")
        if o.device == "cpu" and self.c.dsl == "triton":
            warnings.append("timed under the Triton interpreter on the CPU: E_lib, U_roof and the verdict describe "
                            "the CPU path, not GPU performance")
        screening = self.screen(w, kt, lt) if self.screen else None
        status = Status.PASSED
        err = None
        if screening is not None and screening.verdict.value == "reward_hack":
            status = Status.REWARD_HACK
            err = {"type": "BelowPhysicalMinimum", "message": screening.reason}
        self._record(w, status, error=err, correctness=corr, timing=kt, library_timing=lt, screening=screening,
                     warnings=tuple(warnings))

    @staticmethod
    def _stats(samples: list[float], timer: str) -> TimingStats:
        s = summarize(samples)
        return TimingStats(s["median_ms"], s["iqr_ms"], s["min_ms"], s["mean_ms"], tuple(samples), timer,
                           l2_flush=True)

    def _judge_round(self, msg: dict, w: Workload) -> tuple[Status, str, dict | None] | None:
        """Facts reported by the worker -> a failing status, or None to go on to the numeric check."""
        if "error" in msg:
            return Status.RUNTIME_ERROR, f"forward raised {msg['error']['type']}: {msg['error']['message'][:300]}", msg["error"]
        if msg.get("aten_forbidden"):
            return (Status.REWARD_HACK, f"library fallback: forward called {msg['aten_forbidden']}, the library op this "
                    f"problem replaces ({self.p.library_op})", None)
        if msg.get("launches", 0) == 0 and self.c.dsl in ("triton", "tilelang"):
            return Status.REWARD_HACK, f"no {self.c.dsl} kernel was launched during forward: the result did not come from a DSL kernel", None
        if msg.get("mutated_inputs"):
            return Status.REWARD_HACK, f"forward modified its input(s) {msg['mutated_inputs']} (the problem is not in-place)", None
        if msg.get("new_threads"):
            return Status.REWARD_HACK, f"forward left {msg['new_threads']} thread(s) running after it returned", None
        if msg.get("new_children"):
            return Status.REWARD_HACK, f"forward left {msg['new_children']} child process(es) running after it returned", None
        bad_types = [t for t in msg.get("output_types", []) if t != "torch.Tensor"]
        if bad_types:
            return Status.INCORRECT_DTYPE, f"forward returned {bad_types}; expected plain torch.Tensor", None
        if "output_path" not in msg and "output_ipc" not in msg:
            return Status.INCORRECT_DTYPE, "forward returned no tensor output", None
        return None
