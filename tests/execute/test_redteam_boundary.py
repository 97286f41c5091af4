"""Red-team candidates against the worker's OS boundary, the commit of outputs and the frozen read
(tests/execute/fixtures/redteam) on the CPU path, and honest code those defences accuse.

Each fixture's docstring names the attack, the statuses a correct harness gives (``expect:``) and what it gets
now. Every test asserts both: the fixture's record has an expected status, and the attack's effect did not happen
(a time claim believed that the parent's clock contradicts, a connection reaching a socket of the test's, a
checker that hangs until the parent gives up on it). Attacks that still work are marked ``xfail`` with what must
change (:data:`XFAIL`); CI stays green, and a fix turns them into XPASS.

Runs happen in a subprocess that plays the harness (:data:`RUNNER`, a file), as in test_boundary_exploits.py, next
to honest neighbours (the reference kernels of the same problems), which must pass in every run: no attack may
cost anyone else. The freeze, its check that nothing ran, the count of live children and the seccomp filter are
also tested directly (:mod:`harness.execute.parent.freeze`, :mod:`harness.execute.parent.confinement`,
:mod:`harness.execute.boundary.seccomp`), on helper programs this test starts and ends (the fixtures whose names
start with an underscore).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _support import run_runner

from harness.execute.boundary.landlock import landlock_abi

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(landlock_abi() < 4, reason="needs Landlock ABI >= 4 (filesystem + TCP rules)")]

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures" / "redteam"
REFERENCE = ROOT / "submissions" / "triton-reference"
RUN_BOUND_S = 240
"""Wall seconds one runner may take on the 2-core CI machine (every wait of the parent has a deadline)."""
FIFO_REPLY_TIMEOUT_S = 10.0
"""The checker reply timeout in the FIFO fixture's run (900 s by default): long enough for every honest check of
the smoke workloads, short enough that a hang costs the test seconds, not half an hour."""
BAIT = "/tmp/kernelgate-redteam-bait.sock"
"""The pathname socket gelu__pathname_socket_reach connects to (named in the fixture)."""
CLAIM_RATIO = 0.75
"""A claim below this share of the parent's own clock over the same candidate's batches claims speed the kernel does
not have (honest kernels on the CPU path claim 0.85-1.0 of it: cold single calls against back-to-back ones; the
relay fixture claims about 0.55)."""

XFAIL: dict[str, str] = {
}
"""What must change for each attack that still works (and each honest case still accused). The other fixtures are
stopped (the lease and the FIFO by the checker's non-blocking open and the freeze's CPU-time check, the padded
view and the tqdm thread by rules that no longer accuse them, the two relays by the parent's check of the worker's
descriptor table at each freeze): their tests guard that."""

RUNNER = r'''
import json, sys, time
from pathlib import Path

args = json.loads(sys.argv[1])
sys.path.insert(0, args["root"])
if args.get("reply_timeout_s"):
    import harness.execute.parent.checker_client as checker_client
    checker_client.REPLY_TIMEOUT_S = float(args["reply_timeout_s"])
from harness import env as envmod
from harness.execute.parent.options import RunOptions
from harness.measure.timing import TimingConfig
from harness.pipeline import EvalRequest, evaluate
from harness.problems.registry import load_registry

opts = RunOptions(device="cpu", timing=TimingConfig.for_device("cpu"), jobs=2, time_kernels=args["time_kernels"],
                  compile_timeout_s=60, round_timeout_s=30, timing_timeout_s=60)
req = EvalRequest(submissions=[Path(p) for p in args["folders"]], registry=load_registry(), out_dir=Path(args["out"]),
                  options=opts, env=envmod.snapshot("cpu"), workload_tags=("smoke",), progress=False)
t0 = time.monotonic()
results = evaluate(req)
records = {}
for r in results:
    if r.workload != "smoke":
        continue
    tt = r.trusted_timing
    records[r.candidate] = {
        "status": r.status.value, "error_type": r.error.type if r.error else "",
        "error": f"{r.error.type}: {r.error.message}" if r.error else "",
        "warnings": list(r.warnings),
        "claimed_ms": r.timing.median_ms if r.timing else None,
        "trusted_ms_per_call": tt.kernel_ms_per_call if tt else None,
        "trusted_source": tt.source if tt else None,
        "round_trip_ms": tt.round_trip_ms if tt else None,
    }
Path(args["report"]).write_text(json.dumps({"records": records, "wall_s": time.monotonic() - t0}))
'''


def _expect(path: Path) -> set[str]:
    m = re.search(r"expect: ([A-Z_|]+)", path.read_text())
    assert m, f"{path.name}: the docstring has no 'expect: STATUS[|STATUS]' line"
    return set(m.group(1).split("|"))


def _neighbours(folder: Path, problems: tuple[str, ...]) -> Path:
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"generator": "neighbours", "version": "1", "dsl": "triton"}))
    for pid in problems:
        (folder / f"{pid}.py").write_text((REFERENCE / f"{pid}.py").read_text())
    return folder


def _run(tmp: Path, names: list[str], neighbours: tuple[str, ...], time_kernels: bool,
         reply_timeout_s: float | None = None) -> tuple[dict | None, str, float]:
    """Evaluate ``names`` (redteam fixtures) beside the reference kernels of ``neighbours`` in a runner subprocess;
    (report or None, the runner's output tail, wall seconds)."""
    hostile = tmp / "redteam"
    hostile.mkdir(parents=True)
    (hostile / "manifest.json").write_text((FIXTURES / "manifest.json").read_text())
    for name in names:
        (hostile / name).write_text((FIXTURES / name).read_text())
    report = tmp / "report.json"
    args = {"root": str(ROOT), "folders": [str(hostile), str(_neighbours(tmp / "neighbours", neighbours))],
            "out": str(tmp / "out"), "report": str(report), "time_kernels": time_kernels,
            "reply_timeout_s": reply_timeout_s}
    script = tmp / "runner.py"
    script.write_text(RUNNER)
    return run_runner(script, args, report, RUN_BOUND_S, ROOT)


EFFECT_ONLY = {"gelu__pathname_socket_reach.py"}
"""Fixtures whose status is right either way (their kernel is honest): the attack shows in a test of its own."""


def _case(name: str):
    if name in XFAIL and name not in EFFECT_ONLY:
        return pytest.param(name, marks=pytest.mark.xfail(reason=XFAIL[name], strict=False))
    return name


def _record(report: dict | None, text: str, wall: float, name: str, neighbours: tuple[str, ...]) -> dict:
    """The fixture's record, after what every run must show: it ended in time, and the neighbours passed."""
    assert report is not None, f"the run did not finish: {text}"
    assert wall < RUN_BOUND_S, f"the run took {wall:.0f} s"
    records = report["records"]
    for pid in neighbours:
        nb = records.get(f"neighbours/{pid}.py")
        assert nb is not None and nb["status"] == "PASSED", (pid, nb)
    rec = records.get(f"redteam/{name}")
    assert rec is not None, f"no record for {name}: {sorted(records)}"
    return rec


# --------------------------------------------------------------------------- the timed run: the parent's clock

TIMED = ("softmax__report_relay_deferred.py",)
TIMED_NEIGHBOURS = ("softmax",)


@pytest.fixture(scope="module")
def timed_run(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("redteam-timed"), list(TIMED), TIMED_NEIGHBOURS, time_kernels=True)


@pytest.mark.parametrize("name", [_case(n) for n in TIMED])
def test_work_deferred_past_the_workers_clock_is_not_believed(timed_run, name):
    report, text, wall = timed_run
    rec = _record(report, text, wall, name, TIMED_NEIGHBOURS)
    honest = report["records"]["neighbours/softmax.py"]
    assert honest["trusted_ms_per_call"] and honest["claimed_ms"], ("the honest twin was not timed", honest)
    assert honest["claimed_ms"] >= CLAIM_RATIO * honest["trusted_ms_per_call"], (
        "the honest twin's claim is already below the ratio this test calls a false claim: the measure proves "
        "nothing on this run", honest)
    if rec["status"] == "PASSED":
        disagreed = any("disagrees" in w for w in rec["warnings"])
        assert disagreed or rec["claimed_ms"] >= CLAIM_RATIO * rec["trusted_ms_per_call"], (
            f"a claim of {rec['claimed_ms']:.3g} ms per call was recorded as the kernel's time "
            f"({rec['trusted_source']}) while the parent's clock over its batches says "
            f"{rec['trusted_ms_per_call']:.3g} ms")
    assert rec["status"] in _expect(FIXTURES / name), (rec["status"], rec["error"][:600])


# --------------------------------------------------------------------------- the shared run (no timing phase)

SHARED = ("softmax__relay_edits_reports.py", "softmax__lease_resumes_frozen_worker.py",
          "gelu__pathname_socket_reach.py", "gemm_tall_skinny__padded_output_view.py", "gelu__tqdm_config_sweep.py")
SHARED_NEIGHBOURS = ("gelu", "softmax", "gemm_tall_skinny")


def _leases_enabled() -> bool:
    try:
        return Path("/proc/sys/fs/leases-enable").read_text().strip() == "1"
    except OSError:
        return False


@pytest.fixture(scope="module")
def bait():
    """A listening socket at :data:`BAIT`, in this (the test's) process; nothing of a worker may reach it."""
    if os.path.exists(BAIT):
        os.unlink(BAIT)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(BAIT)
    os.chmod(BAIT, 0o600)
    s.listen(8)
    s.setblocking(False)
    yield s
    s.close()
    if os.path.exists(BAIT):
        os.unlink(BAIT)


@pytest.fixture(scope="module")
def shared_run(tmp_path_factory, bait):
    return _run(tmp_path_factory.mktemp("redteam-shared"), list(SHARED), SHARED_NEIGHBOURS, time_kernels=False)


@pytest.mark.parametrize("name", [_case(n) for n in SHARED])
def test_shared_run_fixture_gets_its_expected_status(shared_run, name):
    if name == "softmax__lease_resumes_frozen_worker.py" and not _leases_enabled():
        pytest.skip("file leases are disabled on this host (/proc/sys/fs/leases-enable): the attack cannot run")
    report, text, wall = shared_run
    rec = _record(report, text, wall, name, SHARED_NEIGHBOURS)
    assert rec["status"] in _expect(FIXTURES / name), (rec["status"], rec["error"][:600])


def test_no_worker_reaches_a_socket_file_outside_its_sandbox(shared_run, bait):
    report, text, wall = shared_run
    _record(report, text, wall, "gelu__pathname_socket_reach.py", SHARED_NEIGHBOURS)
    assert os.path.exists(BAIT), "the bait socket was gone during the run: the test proves nothing"
    try:
        conn, _ = bait.accept()
    except BlockingIOError:
        return
    conn.setblocking(True)
    conn.settimeout(2)
    try:
        said = conn.recv(200)
    finally:
        conn.close()
    pytest.fail(f"a worker connected to {BAIT}, a socket of the test process, and said {said!r}")


# --------------------------------------------------------------------------- the FIFO: a run of its own

FIFO = "gelu__fifo_for_committed_file.py"
FIFO_NEIGHBOURS = ("gelu", "silu")


@pytest.fixture(scope="module")
def fifo_run(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("redteam-fifo"), [FIFO], FIFO_NEIGHBOURS, time_kernels=False,
                reply_timeout_s=FIFO_REPLY_TIMEOUT_S)


@pytest.mark.parametrize("name", [_case(FIFO)])
def test_fifo_commit_is_the_candidates_fault_at_once(fifo_run, name):
    report, text, wall = fifo_run
    rec = _record(report, text, wall, name, FIFO_NEIGHBOURS)
    stalled = [w for w in rec["warnings"] if "run again alone" in w] + (
        [rec["error"][:300]] if rec["error_type"] == "TrustedSideFailure" else [])
    assert not stalled, ("the checker hung on the committed path until the parent gave up on it (each time a "
                         f"{FIFO_REPLY_TIMEOUT_S:.0f} s reply timeout here, 900 s by default)", stalled)
    assert rec["status"] in _expect(FIXTURES / name), (rec["status"], rec["error"][:600])


# --------------------------------------------------------------------------- the freeze on an honest tree

FREEZES = 30
"""Freezes of the tree: one in five to one in two lands in a vfork window (13 of 30 on the 2-core machine), so 30
miss it with odds below 1 in 1000."""


def test_freeze_stops_an_honest_tree_that_starts_processes_in_the_background():
    from harness.execute.parent import freeze

    proc = subprocess.Popen([sys.executable, str(FIXTURES / "_freeze_subprocess_thread.py")], stdout=subprocess.PIPE,
                            start_new_session=True)
    failures = []
    try:
        assert proc.stdout.readline().strip() == b"ready", "the tree did not start"
        for i in range(FREEZES):
            try:
                stopped = freeze.freeze(proc.pid, timeout_s=1.0)
            except freeze.FreezeError as exc:
                failures.append(f"freeze {i}: {exc}")
                freeze.thaw(freeze.tree(proc.pid))
                continue
            states = {pid: freeze._state(pid, tid) for pid in stopped for tid in freeze._tasks(pid)}
            # stopped, or asleep in the kernel (the thread in vfork wait): none runs user code
            assert all(s in "TtZXxD" for s in states.values()), ("freeze returned with tasks running", states)
            time.sleep(0.02)
            assert not stopped.ran(), ("an honest stopped tree was said to have run", stopped.ran(), states)
            freeze.thaw(stopped)
            time.sleep(0.05)
    finally:
        for pid in reversed(freeze.tree(proc.pid)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait(timeout=10)
    assert not failures, (f"{len(failures)} of {FREEZES} freezes of an honest tree failed (recorded as REWARD_HACK "
                          "'Unstoppable' in a session)", failures[:3])


def _helper(name: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(FIXTURES / name), *args], stdout=subprocess.PIPE,
                            start_new_session=True)


def _end_tree(proc: subprocess.Popen) -> None:
    from harness.execute.parent import freeze

    for pid in reversed(freeze.tree(proc.pid)):
        try:
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=10)


def test_seccomp_argument_rules_hold_in_every_encoding():
    pytest.importorskip("pyseccomp")
    from harness.execute.boundary import seccomp

    src = Path(seccomp.__file__).read_text()
    if "F_SETSIG" not in src:
        pytest.skip("the filter has no argument rule on F_SETSIG")
    out = subprocess.run([sys.executable, str(FIXTURES / "_seccomp_int_args.py"), str(ROOT)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["setsig_cont"] == "refused", ("the rule is not there", got)
    assert got["connect"] == "refused" and got["sendto_address"] == "refused", ("a socket reaches a host path", got)
    passed = {k: v for k, v in got.items() if k.endswith("high_bits") and v.startswith("allowed")}
    assert not passed, ("a refused call went through with garbage in the upper 32 bits of an int argument", passed)


def test_a_process_that_ran_during_the_read_and_exited_is_seen():
    from harness.execute.parent import freeze

    if not hasattr(freeze, "Frozen"):
        pytest.skip("the freeze does not check whether the tree ran while stopped")
    proc = _helper("_freeze_exiting_child.py")
    try:
        child = int(proc.stdout.readline())
        time.sleep(0.2)
        frozen = freeze.freeze(proc.pid)
        assert child in frozen, ("the child was not stopped with the tree", list(frozen))
        os.kill(child, signal.SIGCONT)  # what a lease break or an I/O signal set to SIGCONT delivers
        for _ in range(100):
            if child not in freeze.tree(proc.pid):
                break
            time.sleep(0.01)
        assert child not in freeze.tree(proc.pid), "the child did not run and exit: the test proves nothing"
        assert frozen.ran(), "a process ran for 50 ms while its tree was stopped, and the check saw nothing"
        freeze.thaw(frozen)
    finally:
        _end_tree(proc)


def test_a_child_whose_leader_thread_ended_is_still_a_live_descendant():
    from harness.execute.parent import confinement, freeze

    proc = _helper("_zombie_leader_helper.py")
    try:
        child = int(proc.stdout.readline())
        time.sleep(0.5)
        tasks = {tid: freeze._state(child, tid) for tid in freeze._tasks(child)}
        assert any(s not in "ZXx" for s in tasks.values()), ("no thread of the child runs: the test proves nothing",
                                                             tasks)
        assert child in confinement.live_descendants(proc.pid), (
            "a child process with a running thread is not counted as alive", tasks)
    finally:
        _end_tree(proc)


def test_every_fixture_names_its_expected_statuses_and_is_tested():
    known = {"PASSED", "REWARD_HACK", "INCORRECT_NUMERICAL", "INCORRECT_SHAPE", "INCORRECT_DTYPE", "TIMEOUT",
             "INVALID_CANDIDATE", "COMPILE_ERROR", "RUNTIME_ERROR"}
    candidates = {p.name for p in FIXTURES.glob("*.py") if not p.name.startswith("_")}
    for name in candidates:
        expected = _expect(FIXTURES / name)
        assert expected <= known, (name, expected - known)
        assert not expected & {"HARNESS_ERROR", "TOO_LARGE", "LOWERED"}, name
    assert candidates == set(TIMED) | set(SHARED) | {FIFO}, candidates ^ (set(TIMED) | set(SHARED) | {FIFO})
    assert set(XFAIL) <= candidates


def test_the_static_scan_refuses_none_of_them():
    """The scan is not what stops these attacks: each gets to run, so the runtime defences are what is tested."""
    from harness.diagnose.anticheat import scan_source

    for path in FIXTURES.glob("*.py"):
        if path.name.startswith("_"):
            continue
        fails = [f for f in scan_source(path.read_text(), filename=str(path)) if f.severity == "fail"]
        assert not fails, (path.name, [(f.rule, f.message) for f in fails])
