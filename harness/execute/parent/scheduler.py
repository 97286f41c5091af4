"""Pull scheduler: every device takes the next candidate from one shared queue.

Each device gets ``slots`` threads; a thread pulls the next task, runs it
pinned to its device (the worker subprocess is spawned with that device
visible), and pulls again when done. A device therefore never waits for a
slow candidate assigned to another one (no lock-step batches, no round-robin
assignment at submission time). Several slots per device let imports and
compiles overlap; the per-device gate taken by the session
(:class:`harness.execute.parent.gate.DeviceGate`) lets a few correctness phases share
a device and keeps each timing phase exclusive.

A device whose health probe finds it *broken* after a crash is retired: its
threads stop pulling and the other devices carry on. The last device left is
never retired on one probe: ``recheck`` probes it again (after its neighbours
have drained) and only a second failure retires it; then the remaining tasks
are reported as not run.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterable


class DeviceUnhealthy(RuntimeError):
    """Raised by a task runner when its device failed the post-fault health probe (broken, not full)."""

    def __init__(self, message: str, records: list | None = None):
        super().__init__(message)
        self.records = records or []


@dataclass
class ScheduleReport:
    done: int = 0
    retired: dict = field(default_factory=dict)
    """device -> reason, for devices taken out of service."""
    not_run: list = field(default_factory=list)
    per_device: dict = field(default_factory=dict)
    """device -> number of tasks it ran."""


def run_pull(tasks: Iterable[Any], devices: list[Hashable], slots_per_device: int,
             run_task: Callable[[Any, Hashable], list], on_done: Callable[[Any, list], None],
             recheck: Callable[[Hashable], bool] | None = None, stop: threading.Event | None = None,
             on_drained: Callable[[], None] | None = None) -> ScheduleReport:
    """Run every task on some device; ``on_done(task, records)`` is called under a lock, in completion order.

    ``recheck(device)`` (optional) re-probes a device that failed its probe when it is the last one in
    service; True keeps it. ``stop`` (optional) ends the pulling early (an interrupted run).
    ``on_drained()`` (optional) is called once, when every task has been started (the run's tail begins:
    a caller with more work may start it beside this run).
    """
    q: "queue.Queue[Any]" = queue.Queue()
    for t in tasks:
        q.put(t)
    report = ScheduleReport(per_device={d: 0 for d in devices})
    lock = threading.Lock()
    retired: set = set()
    drained = threading.Event()

    def tell_drained() -> None:
        with lock:
            first = not drained.is_set()
            drained.set()
        if first and on_drained is not None:
            on_drained()

    def loop(device: Hashable) -> None:
        while device not in retired and not (stop is not None and stop.is_set()):
            try:
                task = q.get_nowait()
            except queue.Empty:
                tell_drained()
                return
            if q.empty():
                tell_drained()
            try:
                records = run_task(task, device)
            except DeviceUnhealthy as exc:
                with lock:
                    report.per_device[device] += 1
                    report.done += 1
                    on_done(task, exc.records)
                    last = len(retired) == len(devices) - 1
                if last and recheck is not None and recheck(device):
                    continue
                with lock:
                    retired.add(device)
                    report.retired[device] = str(exc)
                return
            with lock:
                report.per_device[device] += 1
                report.done += 1
                on_done(task, records)

    threads = [threading.Thread(target=loop, args=(d,), name=f"kg-slot-{d}-{k}", daemon=True)
               for d in devices for k in range(max(1, slots_per_device))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    tell_drained()  # no task at all, or every device retired before the queue emptied
    while True:
        try:
            report.not_run.append(q.get_nowait())
        except queue.Empty:
            break
    return report
