"""How one run evaluates its candidates: every knob in one place, with its default.

The CLI (``kernelgate run``) reads its defaults from :data:`DEFAULTS` rather
than restating them, so a default lives here only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.execute.shared.inputs import N_ROUNDS_MIN
from harness.measure.timing import TimingConfig


@dataclass(frozen=True, slots=True)
class RunOptions:
    device: str = "cpu"
    """``cpu`` or ``cuda``; the parent itself never touches the GPU."""
    gpus: tuple[int, ...] = (0,)
    rounds: int = N_ROUNDS_MIN
    """Correctness rounds per workload (at least :data:`N_ROUNDS_MIN`)."""
    base_seed: int = 0
    """The run's secret base seed: every seed a worker sees is derived from it, one call at a time."""
    compile_timeout_s: float = 300.0
    """Seconds for a worker to start, import the candidate, build its models and compile (dry) its kernels."""
    round_timeout_s: float = 120.0
    """Seconds for one call (a forward, or a hand-off) before the worker is killed."""
    timing_timeout_s: float = 300.0
    """Seconds for one batch of back-to-back calls in the timing phase."""
    timing: TimingConfig = field(default_factory=TimingConfig)
    time_kernels: bool = True
    jobs: int = 1
    keep_scratch: bool = False
    scratch_root: Path | None = None
    precompile: bool = True
    """GPU: run one dry forward (compile, no launches) before asking for the device (overlaps compiles)."""
    sandbox: bool = True
    """Confine each worker (False: ``isolation="off"``, whatever :attr:`isolation` says)."""
    isolation: str = "strict"
    """How much of the worker's OS boundary (:mod:`harness.execute.boundary.enter`) a run requires: ``strict``
    (all of it: the run refuses to start on a machine that cannot give it), ``available`` (what this machine
    allows, recorded in every record), ``off`` (resource limits only; for debugging the harness)."""
    max_file_bytes: int = 4 << 30
    """RLIMIT_FSIZE of the worker: no single file it writes (outputs included) may exceed this."""
    gpu_memory_fraction: float = 0.5
    """GPU: share of the device's memory one worker's caching allocator may hold."""
    prestart: bool = True
    """Keep pre-started workers ready (interpreter, sandbox, torch, CUDA context) so candidates do not wait for them."""
    spawn: str = "fork"
    """How workers start: ``fork`` (from this run's fork server, a process that has already imported torch:
    :mod:`harness.execute.parent.forks`; ``exec`` where it cannot) or ``exec`` (a fresh interpreter each)."""
    check_slots: int = 3
    context_starts: int = 0
    """GPU: pre-started workers making their CUDA context at once on one device (0: no limit;
    :class:`harness.execute.parent.gate.DeviceGate` ``background_max``)."""
    """GPU: candidates whose correctness rounds may share one device at once (timing is always exclusive)."""
    handoff: str = "ipc"
    """GPU: 'ipc' (outputs reach the checker through CUDA IPC handles) or 'file' (harness.execute.wire.handoff)."""
    mode: str | None = None
    """``train`` or ``eval`` for every problem; None: each problem's default (KernelBench files: train, as
    KernelBench's evaluator; annotated problems: eval)."""
    baseline: str = "eager"
    """The library baseline: ``eager`` (the problem's Model) or ``compile`` (``torch.compile(Model)``)."""
    check_share: float = 0.1
    """Share of the timed calls whose outputs the checker verifies (at secret positions; at least
    :data:`MIN_TIMED_CHECKS` per workload)."""
    batch_target_ms: float = 10.0
    """GPU time one trusted batch of back-to-back calls aims at (the parent's wall clock over it)."""
    batch_reps: int = 2
    """Trusted batches per side and workload."""
    cpu_threads: int = 1
    """OpenMP/intra-op threads of every worker and checker: one, so a CPU timing measures the op and not
    thread wake-ups on a loaded machine (and a candidate cannot change the library's)."""
    memory_margin: float = 0.1
    """GPU: share of device memory never reserved by admission (fragmentation, CUDA contexts' growth)."""
    heldout_shapes: int = 2
    """Held-out shapes per workload (:mod:`harness.problems.heldout`), drawn per run from the secret seed; 0: none."""
    heldout_rounds: int = 1
    """Correctness rounds per held-out shape: the shapes of a workload take turns through the standard value profile,
    then its fair ones in a drawn order (a tail or a hard-coded shape fails at any profile; every round of a held-out
    shape is one more forward of the candidate, which on the CPU path runs in the interpreter)."""
    heldout_gate: bool = False
    """A held-out shape that fails makes its PASSED workload fail with that status. Off by default: KernelBench's
    semantics allow a kernel specialised to its one shape; the result is reported beside the verdict
    (``JobResult.heldout``, the leaderboard's ``generalizes``, the reward's ``heldout_weight``)."""

    def __post_init__(self) -> None:
        if self.context_starts < 0:
            raise ValueError(f"RunOptions.context_starts: {self.context_starts} is negative (0 means no limit)")
        if self.spawn not in ("fork", "exec"):
            raise ValueError(f"RunOptions.spawn: {self.spawn!r} is neither 'fork' nor 'exec'")
        if self.isolation not in ("strict", "available", "off"):
            raise ValueError(f"RunOptions.isolation: {self.isolation!r} is not one of 'strict', 'available', 'off'")

    @property
    def isolation_level(self) -> str:
        """The level workers are started with: :attr:`isolation`, or ``off`` without :attr:`sandbox`."""
        return self.isolation if self.sandbox else "off"


POOL_MAX = 16
"""Pre-started workers per device, at most (twice the jobs below that). A worker takes one warm-up, 5-6 s on the
H200 host, and serves one candidate, so the pool can hand out at most POOL_MAX / warm-up workers a second: at 8,
the service's load test (smoke workloads) waited a median 1.6 s for each worker at about one candidate
a second. Each idle worker holds a CUDA context (:data:`~harness.execute.parent.memory.CONTEXT_BYTES`, admitted)."""


MIN_TIMED_CHECKS = 3
DEFAULTS = RunOptions()
