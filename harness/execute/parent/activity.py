"""What a device's other processes did outside its gate, for the notes on a disturbed sample set.

The gate keeps correctness rounds, warm-ups and the library's timing off a GPU
while a workload is timed there. Two kinds of a worker's GPU work still run
outside it:

    build   from the candidate's import to its first request for the device: the models built on the GPU (the
            reference's weights, ``ModelNew``), the warm inputs made there, the dry forward (torch ops and
            TileLang launches run for real; Triton's only compile)
    exit    from the kill of a finished worker until it is reaped: its CUDA context and memory torn down

Each session logs its own intervals here; a timing phase asks how much of each
overlapped a sample set (:meth:`DeviceActivity.overlap`). Diagnostics only: the
intervals are the parent's own clock, nothing a candidate reports.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass

KINDS = ("build", "exit")
KEEP_S = 120.0
"""Closed intervals older than this are forgotten (a sample set lasts under 2 s)."""


@dataclass(frozen=True, slots=True)
class Overlap:
    """Intervals of one kind that overlapped a window, and their seconds inside it."""

    count: int
    seconds: float


class DeviceActivity:
    """Open and closed intervals of each kind, on ``time.monotonic()``; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._open: dict[int, tuple[str, float]] = {}
        self._closed: list[tuple[str, float, float]] = []

    def begin(self, kind: str) -> int:
        if kind not in KINDS:
            raise ValueError(f"unknown activity kind {kind!r} (one of {', '.join(KINDS)})")
        with self._lock:
            token = next(self._ids)
            self._open[token] = (kind, time.monotonic())
            return token

    def end(self, token: int | None) -> None:
        """Close an interval (a token already closed, or None, is ignored)."""
        if token is None:
            return
        now = time.monotonic()
        with self._lock:
            got = self._open.pop(token, None)
            if got is not None:
                self._closed.append((got[0], got[1], now))
            if self._closed and self._closed[0][2] < now - KEEP_S:
                self._closed = [c for c in self._closed if c[2] >= now - KEEP_S]

    def overlap(self, t0: float, t1: float) -> dict[str, Overlap]:
        """Per kind: the intervals that overlapped ``[t0, t1]`` and their seconds inside it (open ones count up
        to ``t1``)."""
        with self._lock:
            spans = list(self._closed) + [(k, s, t1) for k, s in self._open.values()]
        out: dict[str, Overlap] = {}
        for kind in KINDS:
            parts = [min(e, t1) - max(s, t0) for k, s, e in spans if k == kind and s < t1 and e > t0]
            out[kind] = Overlap(len(parts), round(sum(parts), 6))
        return out


def describe(beside: dict[str, Overlap]) -> str:
    """``"2 neighbours building (0.61 s), 1 worker exiting (0.05 s)"``, or ``"no neighbour building or
    exiting"``."""
    words = {"build": ("neighbour building", "neighbours building"), "exit": ("worker exiting", "workers exiting")}
    parts = [f"{o.count} {words[k][o.count != 1]} ({o.seconds:.2f} s)" for k, o in beside.items() if o.count]
    return ", ".join(parts) if parts else "no neighbour building or exiting"


__all__ = ["DeviceActivity", "KINDS", "Overlap", "describe"]
