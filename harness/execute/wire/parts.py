"""Records shared by both conversations of :mod:`harness.execute.wire.protocol` (the worker's and the checker's):
an error as text, a workload's spec, a kernel row, where committed outputs lie."""

from __future__ import annotations

from dataclasses import dataclass

@dataclass(frozen=True, slots=True)
class Error:
    """An exception that crossed the boundary, as text."""

    type: str
    message: str
    traceback_tail: str = ""


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """What a worker needs to rebuild one workload: the problem's constants, dtype, seeds of the weights."""

    name: str
    params: dict
    dtype: str
    allow_tf32: bool
    model_seed: int
    warm_seed: int


@dataclass(frozen=True, slots=True)
class KernelRow:
    """One kernel name's GPU time in a profiled window, as the worker's profiler saw it (a claim)."""

    name: str
    inside_us: float
    """Microseconds of this kernel that ran inside a forward's window (between the harness's markers) or on
    a stream other than the harness's."""
    count: int
    outside_us: float = 0.0
    """Microseconds outside every forward window on the harness's stream (inputs, flush, poison: the harness's own)."""


@dataclass(frozen=True, slots=True)
class Committed:
    """Where one call's outputs (or inputs) lie for the checker, as the worker committed them: exactly one of
    ``ipc`` (CUDA IPC descriptors, :func:`harness.execute.wire.outputs.check_descriptors`), ``path`` (a raw file
    in the worker's hand-off folder, :mod:`harness.execute.wire.outputs`) or ``error`` (the worker will not read
    them by address: not plain tensors)."""

    ipc: tuple[dict, ...] | None = None
    path: str | None = None
    error: Error | None = None
