"""A lane starts its next batch once every task of the running one has begun, and runs at most two at once.

Cost it stops (an H200 load test): each engine run of a lane filled and drained its pipeline on its
own (the first records waited for builds and correctness rounds, the last ones left jobs idle), and 10-13 s
passed between one run's last record and the next one's first: the service evaluated 4,619 candidates an hour
where `kernelgate run` on the same files did 5,172.
"""

from __future__ import annotations

import threading
import time

from harness.records import ErrorInfo
from harness.serve.dispatcher import RUNS_PER_LANE, Dispatcher, LaneState
from harness.serve.store import NewTask, Store
from serve_fakes import FakeEngine


class GatedEngine(FakeEngine):
    """Each run reports its drain only when the test allows it, then finishes when the test allows it."""

    def __init__(self, scratch):
        super().__init__(scratch)
        self.lock = threading.Lock()
        self.events: list[tuple[str, int]] = []
        self.live = 0
        self.peak = 0
        self.drain = [threading.Event() for _ in range(8)]
        self.finish = [threading.Event() for _ in range(8)]
        self.runs = 0

    def run(self, items, preset, selection, on_record, on_drained=None) -> None:
        with self.lock:
            k = self.runs
            self.runs += 1
            self.live += 1
            self.peak = max(self.peak, self.live)
            self.events.append(("start", k))
        assert self.drain[k].wait(10)
        on_drained()
        assert self.finish[k].wait(10)
        try:
            for it in items:
                for w in selection.resolve(it.problem, "cpu"):
                    on_record(it.key, self.failure_records(it, [w], ErrorInfo("Fake", "-"), run_id="fake")[0])
        finally:
            with self.lock:
                self.live -= 1
                self.events.append(("end", k))


def _wait(cond, timeout=10.0):
    t0 = time.monotonic()
    while not cond():
        assert time.monotonic() - t0 < timeout
        time.sleep(0.02)


def test_the_next_batch_starts_in_the_running_ones_tail_and_never_a_third(tmp_path):
    from harness.api import resolve_problem

    gelu = resolve_problem("gelu")
    store = Store(tmp_path / "results")
    spec = lambda n: {"preset": "quick", "workloads": [], "tags": ["smoke"], "source": f"# {n}\n", "generator": "g",  # noqa: E731
                      "generator_version": "0", "problem": "gelu"}
    store.submit([NewTask(f"t{n}", f"k{n}", "alice", spec(n), ("smoke",), False) for n in range(6)], 100)
    engine = GatedEngine(tmp_path / "scratch")
    lane = LaneState("cpu", "cpu", ())
    d = Dispatcher(store, {"cpu": engine}, {"cpu": lane}, problem_of=lambda s: gelu, notify=lambda: None,
                   batch_max=2, linger_s=0)
    d.start()
    try:
        _wait(lambda: engine.runs == 1)
        time.sleep(0.3)
        assert engine.runs == 1  # the first run has not drained: no second batch yet
        engine.drain[0].set()
        _wait(lambda: engine.runs == 2)  # drained: the next batch starts while the first is still running
        assert ("end", 0) not in engine.events
        engine.drain[1].set()
        time.sleep(0.3)
        assert engine.runs == 2 and engine.peak == RUNS_PER_LANE == 2  # both drained, both running: no third
        assert lane.state == "running" and lane.batch == 4
        engine.finish[0].set()
        _wait(lambda: engine.runs == 3)  # one ended: the third batch starts beside the second
        for k in range(1, 3):
            engine.drain[k].set()
            engine.finish[k].set()
        _wait(lambda: store.counts()["done"] == 6)
        _wait(lambda: lane.state == "idle")
        assert engine.peak == 2 and lane.batch == 0 and lane.runs == 3 and lane.tasks_done == 6
    finally:
        for e in engine.drain + engine.finish:
            e.set()
        assert d.stop(10)
    assert lane.state == "stopped"
