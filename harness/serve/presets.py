"""Named evaluation settings: how many correctness rounds and how much timing a request buys.

One place for the mapping, read by :mod:`harness.api`, the service and (if it
wants) the CLI::

    preset     rounds   timing on a GPU (warm-up, samples x trials)   use
    quick      5        3, 15 x 2   (= kernelgate run --quick)         RL steps, refine loops
    standard   5        10, 50 x 3  (= kernelgate run)                  comparisons, reports
    thorough   10       20, 50 x 6                                      final numbers, leaderboards

Why: ``quick`` is the CLI's ``--quick`` protocol, which the H200 throughput
runs used (docs/throughput.md); ``standard`` is the CLI's default; ``thorough``
doubles both the correctness rounds (more fresh seeds) and the timed samples
of ``standard`` for numbers that go into a report.

The CPU path (:func:`timing_default`, one rule for ``kernelgate run``, the
Python API and the service): correctness only unless timing is asked for
(``run --timing``, ``evaluate(..., timing=True)``, ``serve --timing``); then
every preset uses the CPU timing protocol (the Triton interpreter is far too
slow for more samples, and its host-clock times describe the interpreter,
never a GPU kernel); only the rounds differ.

A preset's :meth:`Preset.to_dict` is part of the service's idempotency key,
so changing a preset's settings never returns records measured under the old
ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.measure.timing import QUICK

if TYPE_CHECKING:
    from harness.execute.parent.options import RunOptions
    from harness.measure.timing import TimingConfig

def timing_default(device: str) -> bool:
    """Whether kernels are timed when the caller did not say: on a GPU only (the CLI, the API and the service).

    Why not on the CPU path: its records carry no performance verdict (a
    host-clock time of the Triton interpreter says nothing about a GPU), so
    the timed calls would only repeat the slowest kernels' forwards. Measured
    on a 2-core machine, timing was 28% of the bundled quick start's worker
    time (177 of 637 s), 65 s of it for one naive convolution whose every
    interpreted forward takes about 10 s. Correctness, the static scans and
    the anti-cheat checks of the correctness rounds are unchanged; the
    timing protocol's own checks (verified timed calls, the parent's clock)
    run on the CPU path when timing is asked for, and in the engine's tests.
    """
    return device == "cuda"


def time_kernels(device: str, timing: bool | None) -> bool:
    """``timing`` when the caller chose (True/False), else :func:`timing_default` for ``device``."""
    return timing_default(device) if timing is None else bool(timing)


N_ROUNDS_MIN = 5
"""The engine's minimum (harness.execute.shared.inputs.N_ROUNDS_MIN, checked by a test)."""


@dataclass(frozen=True, slots=True)
class Preset:
    """Correctness rounds and the GPU timing protocol of one named setting."""

    name: str
    rounds: int
    """Correctness rounds per workload (at least the engine's minimum of 5)."""
    warmup: int
    """GPU timing: untimed calls before sampling."""
    reps: int
    """GPU timing: alternating samples per trial (candidate and library each)."""
    trials: int
    budget_ms: float
    """GPU timing: soft cap on one timing phase, in milliseconds (see harness.measure.timing)."""
    description: str

    def timing_config(self, device: str) -> "TimingConfig":
        """The timing protocol on ``device`` (``cuda`` or ``cpu``; the CPU protocol ignores the preset)."""
        from harness.measure.timing import TimingConfig

        if device == "cpu":
            return TimingConfig.for_device("cpu")
        return TimingConfig(warmup=self.warmup, reps=self.reps, trials=self.trials, budget_ms=self.budget_ms)

    def run_options(self, device: str, *, timing: bool | None = None, **options) -> "RunOptions":
        """RunOptions for this preset on ``device``; ``timing``: time kernels (None: :func:`timing_default`);
        ``options`` sets the other RunOptions fields."""
        from harness.execute.parent.options import RunOptions

        return RunOptions(device=device, rounds=self.rounds, timing=self.timing_config(device),
                          time_kernels=time_kernels(device, timing), **options)

    def to_dict(self) -> dict:
        return {"name": self.name, "rounds": self.rounds, "warmup": self.warmup, "reps": self.reps,
                "trials": self.trials, "budget_ms": self.budget_ms, "description": self.description}


PRESETS: dict[str, Preset] = {
    "quick": Preset("quick", rounds=N_ROUNDS_MIN, **QUICK,
                    description="5 correctness rounds, short timing (kernelgate run --quick): RL steps, refine loops"),
    "standard": Preset("standard", rounds=N_ROUNDS_MIN, warmup=10, reps=50, trials=3, budget_ms=20_000.0,
                       description="5 correctness rounds, the default timing protocol of kernelgate run"),
    "thorough": Preset("thorough", rounds=2 * N_ROUNDS_MIN, warmup=20, reps=50, trials=6, budget_ms=40_000.0,
                       description="10 correctness rounds, twice the timed samples of standard: final numbers"),
}
DEFAULT_PRESET = "quick"


def get_preset(name: str) -> Preset:
    """The preset called ``name``; ValueError naming the choices otherwise."""
    try:
        return PRESETS[name]
    except (KeyError, TypeError):
        raise ValueError(f"preset {name!r} is not one of {sorted(PRESETS)} "
                         f"({'; '.join(f'{k}: {p.description}' for k, p in PRESETS.items())})") from None
