"""The pull scheduler with fake devices: load balance, exclusivity per device, retirement."""

from __future__ import annotations

import threading
import time

from harness.execute.parent.gate import DeviceGate
from harness.execute.parent.scheduler import DeviceUnhealthy, run_pull


def test_fast_device_takes_more_work_than_slow_one():
    speed = {"fast": 0.01, "slow": 0.08}
    ran = []

    def run_task(task, dev):
        time.sleep(speed[dev])
        return [(task, dev)]

    report = run_pull(range(20), ["fast", "slow"], 1, run_task, lambda t, recs: ran.extend(recs))
    assert sorted(t for t, _ in ran) == list(range(20)) and report.done == 20 and not report.not_run
    assert report.per_device["fast"] > 2 * report.per_device["slow"]


class _Observer:
    """Counts, per device, the tasks inside each gated phase (entered after the gate admits them, left before
    they release it, so the counts never exceed what the gate let in) and notes every moment a timing phase
    shared its device with anything."""

    def __init__(self, devices):
        self.inside = {d: {"shared": 0, "exclusive": 0} for d in devices}
        self.shared_peak = dict.fromkeys(devices, 0)
        self.violations: list[tuple] = []
        self._lock = threading.Lock()

    def enter(self, dev, phase):
        with self._lock:
            n = self.inside[dev]
            n[phase] += 1
            self.shared_peak[dev] = max(self.shared_peak[dev], n["shared"])
            if n["exclusive"] and (n["exclusive"] > 1 or n["shared"]):
                self.violations.append((dev, dict(n)))

    def leave(self, dev, phase):
        with self._lock:
            self.inside[dev][phase] -= 1


class _GateWithoutExclusivity(DeviceGate):
    """A broken gate: its timing phase waits for nobody."""

    def acquire_exclusive(self) -> None:
        return None

    def release_exclusive(self) -> None:
        return None


def _run_gated(gate_cls):
    """24 tasks on two devices with three slots each; every task compiles ungated, runs its correctness rounds
    in a shared slot of its device's gate and its timing phase in the exclusive one, as Session does."""
    gates = {d: gate_cls(shared_max=3) for d in (0, 1)}
    seen = _Observer(gates)

    def run_task(task, dev):
        time.sleep(0.005)  # "compile", overlapping freely
        gate = gates[dev]
        gate.acquire_shared()
        seen.enter(dev, "shared")
        time.sleep(0.01)
        seen.leave(dev, "shared")
        gate.release_shared()
        gate.acquire_exclusive()
        seen.enter(dev, "exclusive")
        time.sleep(0.005)
        seen.leave(dev, "exclusive")
        gate.release_exclusive()
        return [task]

    report = run_pull(range(24), [0, 1], 3, run_task, lambda t, r: None)
    return report, seen


def test_one_timing_phase_per_device_with_several_slots():
    """The scheduler runs three tasks per device at once, and the device's gate keeps each timing phase alone on
    it: no other timing phase and no correctness round beside it, while correctness rounds do share the device.
    The exclusivity observed here is the gate's (the test takes no lock of its own around a phase); the broken
    gate below shows the observer sees a phase that is not alone."""
    report, seen = _run_gated(DeviceGate)
    assert report.done == 24 and min(report.per_device.values()) >= 6
    assert not seen.violations, seen.violations[:5]
    assert max(seen.shared_peak.values()) >= 2  # the slots really overlapped


def test_the_observer_sees_a_timing_phase_that_is_not_alone():
    _, seen = _run_gated(_GateWithoutExclusivity)
    assert seen.violations


def test_unhealthy_device_is_retired_and_others_finish():
    def run_task(task, dev):
        if dev == "bad" and task == 0:
            raise DeviceUnhealthy("probe failed", records=[("crash", task)])
        time.sleep(0.005)
        return [("ok", task)]

    seen = []
    report = run_pull(range(10), ["bad", "good"], 1, run_task, lambda t, r: seen.extend(r))
    assert "bad" in report.retired and not report.not_run
    assert ("crash", 0) in seen and len(seen) == 10


def test_all_devices_retired_leaves_tasks_not_run():
    def run_task(task, dev):
        raise DeviceUnhealthy("probe failed")

    report = run_pull(range(5), [0], 2, run_task, lambda t, r: None)
    assert report.retired and len(report.not_run) == 5 - report.done


def _faulted_session(monkeypatch, states: list[str]):
    """A Session after a TIMEOUT on 'cuda', with the probe faked (no GPU here): it answers ``states`` in order."""
    from types import SimpleNamespace

    from harness.execute.parent import session as session_mod
    from harness.execute.parent.gate import DeviceGate
    from harness.execute.parent.process import ProbeResult
    from harness.records import Status

    calls = []
    gate = DeviceGate(3)

    def probe(gpu):
        calls.append((gpu, gate.state()))
        return ProbeResult(states[min(len(calls), len(states)) - 1], 0.1, "")

    monkeypatch.setattr(session_mod, "gpu_probe", probe)
    monkeypatch.setattr(session_mod.time, "sleep", lambda s: None)
    s = session_mod.Session.__new__(session_mod.Session)
    s.cuda, s.lock_held, s._probe = True, "", None
    s.t = SimpleNamespace(alone=False)
    s.dev = SimpleNamespace(gpu=1, gate=gate)
    s.results = {"w": SimpleNamespace(status=Status.TIMEOUT)}
    return s, calls


def test_gpu_probed_after_fault_while_holding_the_device(monkeypatch):
    s, calls = _faulted_session(monkeypatch, ["healthy"])
    s._probe_after_fault()
    assert calls == [(1, (0, True))]  # nothing else runs on the GPU while it is probed
    assert s._probe.healthy and s.lock_held == "exclusive"
    s._release()
    assert s.dev.gate.state() == (0, False)


def test_a_full_gpu_is_probed_again_not_retired(monkeypatch):
    """Bug it stops: a probe that failed for lack of memory retired the run's only GPU (40 candidates never ran)."""
    s, calls = _faulted_session(monkeypatch, ["full", "full", "healthy"])
    s._probe_after_fault()
    assert len(calls) == 3 and s._probe.state == "healthy"


def test_no_probe_without_fault_or_on_cpu(monkeypatch):
    from types import SimpleNamespace

    from harness.records import Status

    s, calls = _faulted_session(monkeypatch, ["healthy"])
    s.results = {"w": SimpleNamespace(status=Status.PASSED)}
    s._probe_after_fault()
    s.results = {"w": SimpleNamespace(status=Status.CRASHED)}
    s.cuda = False
    s._probe_after_fault()
    assert calls == [] and s._probe is None


def test_the_last_device_is_rechecked_before_it_is_retired():
    """One transient probe failure must not end a run with candidates unrun while the GPU is usable."""
    ran = []

    def run_task(task, dev):
        ran.append(task)
        if task == 0:
            raise DeviceUnhealthy("probe failed once")
        return [task]

    report = run_pull(range(4), [0], 1, run_task, lambda t, r: None, recheck=lambda dev: True)
    assert not report.retired and not report.not_run and sorted(ran) == [0, 1, 2, 3]
    report = run_pull(range(4), [0], 1, run_task, lambda t, r: None, recheck=lambda dev: False)
    assert report.retired and len(report.not_run) == 3


def test_slow_compiling_candidates_are_queued_first():
    """TileLang (nvcc) and autotuned Triton candidates start first: on the H200 a TileLang
    candidate queued last ended the run alone while the other GPU sat idle."""
    from pathlib import Path

    from harness.candidates.discover import discover
    from harness.pipeline import expected_cost_class

    root = Path(__file__).resolve().parents[2] / "submissions"
    classes = {}
    for folder in ("triton-reference", "tilelang-reference"):
        for c in discover(root / folder)[1]:
            classes[c.rel_path] = expected_cost_class(c.path.read_text(), c.dsl)
    assert classes["tilelang-reference/layernorm.py"] == 2
    assert classes["triton-reference/gemm_square.py"] == 1  # @triton.autotune
    assert classes["triton-reference/layernorm.py"] == 0


def test_on_drained_is_told_once_when_the_last_task_starts_not_when_it_ends():
    """The service starts its next batch in the running one's tail: run_pull must say when every task has
    started (here: before the last one, still running, is let finish), and say it only once."""
    import threading

    from harness.execute.parent.scheduler import run_pull

    told: list[float] = []
    release = threading.Event()
    started: list[int] = []

    def run_task(task, device):
        started.append(task)
        if task == 4:
            assert release.wait(10)
        return [task]

    def on_drained():
        told.append(len(started))
        release.set()  # the last task may finish only after the drain was told

    done: list = []
    report = run_pull(range(5), [0], 1, run_task, lambda t, r: done.append(t), on_drained=on_drained)
    assert told == [4] and sorted(done) == [0, 1, 2, 3, 4] and report.done == 5
    told.clear()
    run_pull([], [0], 2, run_task, lambda t, r: None, on_drained=on_drained)
    assert len(told) == 1  # no task at all: told once, at the end
