"""Lanes: threads that claim batches of queued tasks and run them through the engine.

One lane per GPU (``gpu0``, ``gpu1``, ...), or one ``cpu`` lane, or
``--ray-lanes`` lanes of the Ray executor. A lane loops::

    claim up to B queued tasks of one group (same preset and workload selection)
    engine.run(batch) -> each record: store.add_record (SQLite, then results.jsonl); a task whose
                         last workload arrives is done, and waiting clients are woken
    anything the run did not record (the engine raised): HARNESS_ERROR records

A lane starts its next batch once every task of the running one has begun
(the engine's ``on_drained``): the two runs overlap in the first's tail, so
the GPU is not left idle while the last candidates of one batch finish and
the first of the next compile. At most two runs per lane at once, and they
share the lane's kept executor (:class:`harness.execute.parent.local.KeptExecutor`):
one device gate (timing stays exclusive across both runs), one memory
admission, one set of job slots. Two executors on one GPU would time each
other's kernels, so a run that cannot share it waits for it. (Ray lanes
overlap the same way: Ray gives each candidate a GPU of its own.)
B is ``min(batch_max, ceil(queued / lanes))``,
so a burst of submissions spreads over the lanes; after an idle spell a lane
lingers ``linger_s`` before claiming, so candidates that arrive together
(many clients of one RL step) share a run and its start-up.

A task claimed more than ``max_attempts`` times (the service stopped while
running it, again and again) is not run again: it gets HARNESS_ERROR records
saying so. A lane whose engine raised three runs in a row retires (health
shows it and why); its batches' tasks get HARNESS_ERROR records, never silence.
"""

from __future__ import annotations

import math
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable, Sequence

from harness.records import ErrorInfo, JobResult
from harness.serve.engine import Engine, EvalItem, Selection
from harness.serve.presets import get_preset
from harness.serve.store import Store, Task

RETIRE_AFTER_FAILURES = 3
RUNS_PER_LANE = 2
"""Engine runs of one lane at once: the running batch's tail and the next batch."""
BATCH_MAX = 128
"""Most tasks in one engine run of one lane (``kernelgate serve --batch-max``). Each run fills and drains its
pipeline (its first records wait for a build, the correctness rounds and the GPU gate; its last ones leave jobs
idle): an H200 load test with runs of 64 had 10-13 s between runs, each 34-40 s long (part of it the pools' warm-ups,
see harness.execute.parent.local.KeptExecutor), so a burst is run in fewer, longer runs. The cost: a task queued while its
lane runs waits for that run to end."""


@dataclass
class LaneState:
    """What health shows about one lane."""

    name: str
    device: str
    gpus: tuple[int, ...]
    device_name: str = ""
    """The model of the lane's device (its records' env.device_name)."""
    device_uuid: str | None = None
    state: str = "idle"
    """idle, running, retired or stopped."""
    batch: int = 0
    """Tasks in the engine run now."""
    runs: int = 0
    tasks_done: int = 0
    records: int = 0
    failures_in_a_row: int = 0
    last_error: str = ""
    busy_since: float | None = None

    def to_dict(self) -> dict:
        return {"lane": self.name, "device": self.device, "gpus": list(self.gpus), "device_name": self.device_name,
                "device_uuid": self.device_uuid, "state": self.state,
                "batch": self.batch, "runs": self.runs, "tasks_done": self.tasks_done, "records": self.records,
                "last_error": self.last_error,
                "busy_s": round(time.time() - self.busy_since, 1) if self.busy_since else None}


def group_of(task: Task) -> tuple:
    """Tasks that may share one engine run: same preset and workload selection (a partial re-run: its rest)."""
    spec = task.spec
    if task.recorded:
        sel = Selection(names=task.remaining)
    else:
        sel = Selection(tuple(spec["workloads"]), tuple(spec["tags"]))
    return (spec["preset"], sel.names, sel.tags)


@dataclass
class Dispatcher:
    """Runs the lanes (see the module docstring).

    ``engines``: one Engine per lane (built by the service); ``problem_of``:
    the Problem of a task's spec; ``notify``: called after records are
    stored (wakes long-polling clients).
    """

    store: Store
    engines: dict[str, Engine]
    lanes: dict[str, LaneState]
    problem_of: Callable[[dict], object]
    notify: Callable[[], None]
    batch_max: int = BATCH_MAX
    linger_s: float = 0.25
    max_attempts: int = 3
    _cv: threading.Condition = field(default_factory=threading.Condition)
    _stopping: bool = False
    _threads: list = field(default_factory=list)

    def start(self) -> None:
        for name in self.lanes:
            t = threading.Thread(target=self._loop, args=(name,), name=f"kg-lane-{name}", daemon=True)
            t.start()
            self._threads.append(t)

    def wake(self) -> None:
        """New tasks were queued."""
        with self._cv:
            self._cv.notify_all()

    def stop(self, timeout_s: float) -> bool:
        """Stop claiming; wait up to ``timeout_s`` for running batches. True if every lane finished.

        Tasks of a batch still running at the deadline stay ``running`` in the
        store and are re-queued by the next start (their records so far are kept).
        """
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        deadline = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)

    def _active_lanes(self) -> int:
        return max(1, sum(1 for s in self.lanes.values() if s.state not in ("retired", "stopped")))

    def _loop(self, name: str) -> None:
        lane = self.lanes[name]
        runs: list[tuple[threading.Thread, threading.Event]] = []
        try:
            self._claim_loop(lane, runs)
        finally:
            for t, _ in runs:  # stopping or retiring: the runs already started finish (stop() bounds the wait)
                t.join()
            with self._cv:
                lane.state = "retired" if lane.failures_in_a_row >= RETIRE_AFTER_FAILURES else "stopped"

    def _claim_loop(self, lane: LaneState, runs: list[tuple[threading.Thread, threading.Event]]) -> None:
        idle = True
        while True:
            runs[:] = [(t, d) for t, d in runs if t.is_alive()]
            with self._cv:
                if self._stopping or lane.failures_in_a_row >= RETIRE_AFTER_FAILURES:
                    return
                if runs and (len(runs) >= RUNS_PER_LANE or not runs[-1][1].is_set()):
                    self._cv.wait(timeout=1.0)  # the newest run is still starting its tasks (woken when it drains)
                    continue
            if idle and not runs and self.linger_s > 0:
                queued = self.store.counts()["queued"]
                if queued and queued < self.batch_max:
                    time.sleep(self.linger_s)
            queued = self.store.counts()["queued"]
            limit = max(1, min(self.batch_max, math.ceil(queued / self._active_lanes()))) if queued else 1
            with self._cv:
                if self._stopping:
                    return
            batch = self.store.claim(lane.name, limit, group_of) if queued else []
            if not batch:
                idle = not runs
                with self._cv:
                    if not self._stopping:
                        self._cv.wait(timeout=1.0)
                continue
            idle = False
            drained = threading.Event()
            t = threading.Thread(target=self._run, args=(lane, batch, drained), name=f"kg-run-{lane.name}", daemon=True)
            runs.append((t, drained))
            t.start()

    def _drained(self, event: threading.Event) -> None:
        with self._cv:
            event.set()
            self._cv.notify_all()

    def _run(self, lane: LaneState, batch: Sequence[Task], drained: threading.Event | None = None) -> None:
        try:
            self._run_batch(lane, batch, drained)
        finally:
            if drained is not None:
                self._drained(drained)  # a run that ended (or failed) before telling its drain

    def _run_batch(self, lane: LaneState, batch: Sequence[Task], drained: threading.Event | None) -> None:
        engine = self.engines[lane.name]
        with self._cv:
            lane.batch += len(batch)
            lane.state = "running"
            lane.busy_since = lane.busy_since or time.time()
        over = [t for t in batch if t.attempts > self.max_attempts]
        todo = [t for t in batch if t.attempts <= self.max_attempts]
        items: dict[str, tuple[Task, EvalItem]] = {}
        for t in over:
            self._fail(engine, t, ErrorInfo("GaveUp", f"the service stopped {t.attempts - 1} time(s) while evaluating this "
                                            f"task (more than --max-attempts {self.max_attempts}); not run again"))
        for t in todo:
            try:
                prob = self.problem_of(t.spec)
            except (ValueError, KeyError) as exc:
                self._fail(engine, t, ErrorInfo("ProblemUnavailable", str(exc)))
                continue
            spec = t.spec
            items[t.id] = (t, EvalItem(key=t.id, source=spec["source"], problem=prob, generator=spec["generator"],
                                       generator_version=spec["generator_version"], dsl=spec.get("dsl")))
            _keep_code(self.store.results_dir, spec["source"])
        if items:
            first = next(iter(items.values()))[0]
            preset, names, tags = group_of(first)

            def on_record(key: str, rec: JobResult) -> None:
                rec = rec.replace(client=items[key][0].client)  # the authenticated client, whatever the engine wrote
                if self.store.add_record(key, rec):
                    lane.records += 1
                self.notify()

            try:
                engine.run([it for _, it in items.values()], get_preset(preset), Selection(names, tags), on_record,
                           on_drained=(lambda: self._drained(drained)) if drained is not None else None)
                lane.failures_in_a_row = 0
            except Exception as exc:  # noqa: BLE001 - an engine failure becomes records, and the lane carries on
                lane.failures_in_a_row += 1
                lane.last_error = f"{type(exc).__name__}: {exc}"[:500]
                err = ErrorInfo(type(exc).__name__, f"the engine failed on this batch: {exc}",
                                traceback.format_exc()[-2000:])
                for t, _ in items.values():
                    self._fail(engine, t, err)
        for t in batch:
            self._fail(engine, t, ErrorInfo("NoRecord", "the engine returned no record for this workload"))
        with self._cv:
            lane.runs += 1
            lane.tasks_done += len(batch)
            lane.batch -= len(batch)
            if not lane.batch:
                lane.state, lane.busy_since = "idle", None
            self._cv.notify_all()
        self.notify()

    def _fail(self, engine: Engine, task: Task, error: ErrorInfo) -> None:
        """HARNESS_ERROR records for every workload of ``task`` that has none yet (then it is done)."""
        now = self.store.get([task.id]).get(task.id)
        if now is None or now.state == "done":
            return
        try:
            prob = self.problem_of(task.spec)
        except (ValueError, KeyError):
            prob = None
        item = EvalItem(key=task.id, source=task.spec["source"], problem=prob,  # type: ignore[arg-type]
                        generator=task.spec["generator"], generator_version=task.spec["generator_version"],
                        dsl=task.spec.get("dsl"))
        known = {w.name: w for w in prob.workloads} if prob is not None else {}
        wls = [known[w] for w in now.remaining if w in known]
        if wls:
            for rec in engine.failure_records(item, wls, error, run_id=f"serve-{task.id}"):
                self.store.add_record(task.id, rec.replace(client=task.client))
        if len(wls) < len(now.remaining):
            self.store.force_done(task.id, f"{error.type}: {error.message}")
        self.notify()


def _keep_code(results_dir, source: str) -> None:
    """Keep the code a task runs in the results folder (``kernelgate prompt --feedback RESULTS`` shows it)."""
    from harness.pipeline import keep_source
    from harness.prompts.feedback import evaluated_code

    try:
        keep_source(results_dir, evaluated_code(source).encode("utf-8"))
    except (OSError, UnicodeError):
        pass  # a copy for the prompt only: the evaluation does not depend on it


__all__ = ["Dispatcher", "LaneState", "group_of"]
