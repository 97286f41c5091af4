"""Admission to one GPU: correctness phases share it, timing phases own it.

Only timing needs the GPU to itself; the correctness rounds (inputs, forward,
output hand-off, the checker's float64 reference) are mostly host work and run
side by side, up to ``shared_max`` candidates at once. A timing phase waits
until no correctness phase is running and, while it waits, no new one starts
(writer preference), so a steady stream of correctness work cannot starve the
timer. A Session never upgrades in place: it gives back its shared slot and
then asks for the exclusive one, so two upgraders cannot deadlock.

The start-up of a process's CUDA context (a pre-started worker's warm-up)
touches the GPU briefly and decides nothing: it holds a *background* place,
which keeps timing out like a shared slot but is not counted against
``shared_max`` (dozens of workers warming up must not take the correctness
rounds' slots). A finished worker's exit is not gated: waiting for a place
before it kept a job slot idle a median 0.31 s (up to 4.3 s) per candidate in
an H200 load test of the service.

Bug it stops: with one plain lock per GPU, the correctness rounds (95% of the
locked time in the first H200 bundle run: 422 s of 446 s) serialized the whole
suite behind a GPU that was idle most of that time.
"""

from __future__ import annotations

import threading


class DeviceGate:
    def __init__(self, shared_max: int = 3, background_max: int = 0):
        """``background_max``: context start-ups at once (0: no limit). Forked workers become ready together and
        made their contexts in 1.5-2.0 s median against 0.9-1.0 s for workers started one by one on an H200,
        each holding a background place that keeps a timing phase waiting; a limit trades that for a slower
        first wave (not yet measured on the GPU)."""
        if shared_max < 1:
            raise ValueError(f"shared_max must be >= 1 (got {shared_max})")
        if background_max < 0:
            raise ValueError(f"background_max must be >= 0 (got {background_max})")
        self.shared_max = shared_max
        self.background_max = background_max
        self._cv = threading.Condition()
        self._shared = 0
        self._background = 0
        self._exclusive = False
        self._waiting_exclusive = 0

    # correctness
    def acquire_shared(self) -> None:
        with self._cv:
            while self._exclusive or self._waiting_exclusive or self._shared >= self.shared_max:
                self._cv.wait()
            self._shared += 1

    def release_shared(self) -> None:
        with self._cv:
            if self._shared <= 0:
                raise RuntimeError("release_shared without acquire_shared")
            self._shared -= 1
            self._cv.notify_all()

    # context start-up
    def acquire_background(self) -> None:
        with self._cv:
            while (self._exclusive or self._waiting_exclusive
                   or (self.background_max and self._background >= self.background_max)):
                self._cv.wait()
            self._background += 1

    def release_background(self) -> None:
        with self._cv:
            if self._background <= 0:
                raise RuntimeError("release_background without acquire_background")
            self._background -= 1
            self._cv.notify_all()

    # timing, health probes
    def acquire_exclusive(self) -> None:
        with self._cv:
            self._waiting_exclusive += 1
            try:
                while self._exclusive or self._shared or self._background:
                    self._cv.wait()
            finally:
                self._waiting_exclusive -= 1
            self._exclusive = True

    def release_exclusive(self) -> None:
        with self._cv:
            if not self._exclusive:
                raise RuntimeError("release_exclusive without acquire_exclusive")
            self._exclusive = False
            self._cv.notify_all()

    def state(self) -> tuple[int, bool]:
        """(shared holders, exclusive held) -- for tests and diagnostics."""
        with self._cv:
            return self._shared, self._exclusive

    @property
    def background(self) -> int:
        """Background holders now (context start-ups)."""
        with self._cv:
            return self._background
