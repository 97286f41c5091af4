"""The thread every piece of candidate code runs on, away from the worker's trusted loop.

The worker's main thread holds what must not be rewritten: the signed
channel, the timer, the profiler, the kept outputs and the facts it reports.
Candidate code (its import, ``ModelNew(...)``, ``forward``) runs only on this
thread. So the frames a candidate can walk from its own (``f_back``, a
traceback, a generator's frame) end here, in :func:`_serve`, whose globals
are this small module: the main thread's locals are not on that stack, and
the routes to another thread's frames (``sys._current_frames``, ``gc``) are
refused by the audit hooks (:mod:`harness.execute.worker.rules.audit`).

Grad mode and dispatch modes are per thread in PyTorch: :func:`forward` turns
off autograd on this thread, as the reference does.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable

THREAD_NAME = "kg-candidate"


def _serve(requests: "queue.Queue", replies: "queue.Queue") -> None:
    """Serve requests until ``None``. Nothing of a request outlives it here: between requests this frame holds no
    reference to its callable, arguments or result. Leak it stops: the frame kept the last request's arguments
    until the next one came, and a checker keeps one such thread per library context (up to eight), so each
    held its last inputs, a timed batch's among them (up to 6 GiB each); on the H200 three checkers held 27-39
    GiB each and a neighbour's batch ran out of memory."""
    while True:
        item = requests.get()
        if item is None:
            return
        fn, args = item
        del item
        try:
            reply = (True, fn(*args))
        except BaseException as exc:  # noqa: BLE001 - SystemExit/KeyboardInterrupt from candidate code too
            reply = (False, exc)
        del fn, args
        replies.put(reply)
        del reply


class CandidateThread:
    """Runs callables on the candidate's thread, one at a time, and waits for each."""

    def __init__(self) -> None:
        self._requests: queue.Queue = queue.Queue()
        self._replies: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=_serve, args=(self._requests, self._replies), name=THREAD_NAME,
                                       daemon=True)
        self.thread.start()

    @property
    def ident(self) -> int | None:
        return self.thread.ident

    def run(self, fn: Callable, *args: Any) -> Any:
        """``fn(*args)`` on the candidate's thread; re-raises what it raised."""
        self._requests.put((fn, args))
        ok, value = self._replies.get()
        if not ok:
            raise value
        return value

    def stop(self) -> None:
        self._requests.put(None)


def run_all(fn: Callable, calls: list) -> tuple[list, BaseException | None]:
    """``fn(*args)`` for each ``args`` of a batch, back to back on this thread (one hand-over for the batch, so
    the parent's clock over it measures the forwards, not a thread switch per call): (the results so far, the
    exception that stopped the batch or None)."""
    outs: list = []
    try:
        for args in calls:
            outs.append(fn(*args))
    except BaseException as exc:  # noqa: BLE001 - reported with the count of calls that ran
        return outs, exc
    return outs, None


def forward(model: Any, inputs: list, seed: int | None) -> list:
    """One forward of ``model`` without autograd (run on the candidate's thread), its outputs as a plain list
    (:func:`harness.execute.shared.inputs.flatten_outputs`'s rule: a tuple or list is flattened one level).

    ``seed`` seeds torch's generator right before the forward, as the checker
    does before the reference's: a training-mode forward that draws random
    numbers (dropout) then draws the same ones on both sides.
    """
    import torch

    from harness.execute.shared.inputs import flatten_outputs

    if seed is not None:
        torch.manual_seed(seed)
    with torch.no_grad():
        out = model(*inputs)
    # flattened here, and the candidate's own container dropped on this thread: the worker's trusted thread then
    # never frees it. Exploit it stops: a list subclass with a weakref.finalize whose callback (the library's
    # gelu.out, a C function) filled the output when the trusted thread dropped the list, after the call's
    # clock, where the dispatch recorder does not look
    return flatten_outputs(out)
