"""Hostile candidates against the OS-level containment (Landlock sandbox, rlimits, process groups).

The fixtures evade the static scan on purpose (names built at run time), so
what stops them here is the sandbox each worker applies to itself before it
imports candidate code. Each must get its ``expect:`` status, the host must be
unchanged, and the run must go on.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from harness import env as envmod
from harness.execute.parent.options import RunOptions
from harness.execute.parent.children import PROJECT_ROOT
from harness.execute.boundary.landlock import landlock_abi
from harness.measure.timing import TimingConfig
from harness.pipeline import EvalRequest, evaluate
from harness.problems.registry import load_registry

FIXTURES = Path(__file__).parent / "fixtures" / "hostile"
SENTINEL = FIXTURES / "_sentinel.txt"

pytestmark = pytest.mark.skipif(landlock_abi() < 4, reason="needs Landlock ABI >= 4 (filesystem + TCP rules)")


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("hostile")
    before = set((PROJECT_ROOT / "leaderboards").rglob("*"))
    opts = RunOptions(device="cpu", timing=TimingConfig.for_device("cpu"), jobs=2, time_kernels=False,
                      compile_timeout_s=60, round_timeout_s=30, max_file_bytes=32 << 20)
    req = EvalRequest(submissions=[FIXTURES], registry=load_registry(), out_dir=out, options=opts,
                      env=envmod.snapshot("cpu"), workload_tags=("smoke",), progress=False)
    results = evaluate(req)
    return out, results, before


def test_each_hostile_candidate_is_contained(hostile_run):
    _, results, _ = hostile_run
    expected = {f"hostile/{f.name}": re.search(r"expect: ([A-Z_]+)", f.read_text()).group(1)
                for f in FIXTURES.glob("*.py")}
    got = {r.candidate: r.status.value for r in results}
    assert got == expected, {k: (got.get(k), v) for k, v in expected.items() if got.get(k) != v}


@pytest.mark.parametrize("name", ["write_leaderboards", "chdir_and_write", "delete_project_file"])
def test_blocked_by_the_sandbox_not_by_luck(hostile_run, name):
    _, results, _ = hostile_run
    rec = next(r for r in results if r.candidate == f"hostile/gelu__{name}.py")
    text = f"{rec.error.type} {rec.error.message}"
    assert "Permission denied" in text or "PermissionError" in text or "Operation not permitted" in text, text
    assert "landlock-abi" in rec.env.sandbox and "ns:user,pid" in rec.env.sandbox, rec.env.sandbox


def test_a_memory_file_is_refused_by_the_audit_hooks(hostile_run):
    """/proc/PID/mem of another process is Landlock's to refuse (tests/execute/test_sandbox.py), but the worker's
    own /proc/self/task/TID/mem is writable under the sandbox; the hooks refuse every memory file."""
    _, results, _ = hostile_run
    rec = next(r for r in results if r.candidate == "hostile/gelu__read_parent_memory.py")
    assert rec.evidence["mechanism"] == "audit_hook" and "mem" in rec.error.message, rec.error.message


def test_network_is_refused_by_the_audit_hooks_first(hostile_run):
    _, results, _ = hostile_run
    rec = next(r for r in results if r.candidate == "hostile/gelu__tcp_connect.py")
    assert rec.evidence["mechanism"] == "audit_hook" and "socket" in rec.error.message, rec.error.message


def test_host_is_unchanged(hostile_run):
    _, _, before = hostile_run
    assert SENTINEL.exists(), "a candidate deleted a project file"
    assert set((PROJECT_ROOT / "leaderboards").rglob("*")) == before, "a candidate wrote into leaderboards/"
    assert not Path("/tmp/kernelgate-pwned.txt").exists()


def test_disk_filler_is_killed_and_its_scratch_removed(hostile_run):
    out, results, _ = hostile_run
    rec = next(r for r in results if r.candidate == "hostile/gelu__fill_disk.py")
    assert "File too large" in rec.error.message
    assert not any((out / ".scratch").glob("kg-*")), "scratch folders must be removed after each candidate"


def test_forked_children_do_not_survive_the_job(hostile_run):
    """Children a candidate forks are in the worker's process group, which is killed after the job."""
    out, _, _ = hostile_run
    time.sleep(1)
    scratch = str(out / ".scratch")
    survivors = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if cwd.startswith(scratch):
            survivors.append((pid, cwd))
    assert not survivors, f"processes of this run outlived their job: {survivors}"


@pytest.mark.parametrize("name, why", [("typing_annotation_exec", "<string>"),
                                       ("renamed_code_object", "run by other than importlib's loader")])
def test_code_under_a_borrowed_name_is_refused_by_the_audit_hooks(hostile_run, name, why):
    """Both candidates run their payload as code named after something other than their file (without the
    borrowed-name rules in harness/execute/worker/rules/audit.py they were PASSED)."""
    _, results, _ = hostile_run
    rec = next(r for r in results if r.candidate == f"hostile/gelu__{name}.py")
    assert rec.evidence["mechanism"] == "audit_hook" and why in rec.error.message, rec.error.message


def test_a_library_handed_the_forbidden_call_is_refused_by_the_audit_hooks(hostile_run):
    """torch's pytree ``tree_map`` calls ``gc.get_objects`` and ``os.system`` for the candidate: a library frame owns
    an event only when it names the operation (harness/execute/worker/rules/audit.py)."""
    _, results, _ = hostile_run
    rec = next(r for r in results if r.candidate == "hostile/gelu__library_trampoline.py")
    assert rec.evidence["mechanism"] == "audit_hook", rec.error.message
    assert "gc.get_objects" in rec.error.message and "os.system" in rec.error.message, rec.error.message


def test_no_thread_of_a_worker_is_left_unconfined(hostile_run):
    """Landlock before ABI 8 confines the thread that asks and the threads it starts later. A parent-watch thread
    started in the worker before the lock-down stayed unconfined, and a candidate that replaced ``select.select``
    ran its code there, writing outside its folder (``gelu__lifeline_hijack.py``). The worker crosses the whole
    boundary single-threaded now, and its lifeline is its keeper, outside it."""
    _, results, _ = hostile_run
    sandboxes = {r.env.sandbox for r in results if r.env is not None}
    assert sandboxes and not any("unconfined" in s for s in sandboxes), sandboxes
    rec = next(r for r in results if r.candidate == "hostile/gelu__lifeline_hijack.py")
    assert rec.status.value == "PASSED", rec.error


def test_the_workers_own_memory_file_is_refused_through_a_link(hostile_run):
    """``/proc/self/task/TID/mem`` lies under the folder Landlock must leave writable; a candidate can write its own
    process's bytes through a link to it in its folder (refused by harness/execute/worker/rules/audit.py)."""
    _, results, _ = hostile_run
    rec = next(r for r in results if r.candidate == "hostile/gelu__write_own_memory.py")
    assert rec.evidence["mechanism"] == "audit_hook" and "innocent.bin" in rec.error.message, rec.error.message


def test_a_process_started_past_the_audit_hooks_is_confined_with_its_worker(hostile_run):
    """``_posixsubprocess.fork_exec`` raises no audit event, so a candidate that calls it starts a process the hooks
    never see: it inherits the worker's namespaces, seccomp filter and Landlock domain (no capabilities), and the
    run's other checks (nothing left of it after forward, the host unchanged: test_host_is_unchanged) hold."""
    _, results, _ = hostile_run
    rec = next(r for r in results if r.candidate == "hostile/gelu__fork_exec_unaudited.py")
    assert rec.status.value == "PASSED" and "ns:user,pid" in rec.env.sandbox, (rec.status, rec.error)
