"""GPU paths of the engine, run with ``pytest -m gpu`` on the device (skipped without a GPU).

Covers what the CPU path cannot: the CUDA timer and its sleep calibration,
the kernel profiler's attribution with the hold/end markers, the IPC
hand-off's bounds check against a live exporter, and whole runs of the GPU
fixtures and of a few bundled kernels with the trusted protocol (library in
the checker, verification, the parent's clock, kernel attribution).
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"


def test_timer_calibrates_the_sleep_kernel_and_times_it():
    from harness.measure.timing import DeviceTimer

    timer = DeviceTimer("cuda", 64 << 20)
    rate = timer.calibrate()
    assert rate > 100, rate  # cycles per microsecond: an H200 runs about 1.98 GHz
    import torch

    _, stream_ms, device_ms, enq, idle_ms = timer.timed_call(lambda: torch.cuda._sleep(int(500 * rate)), 50.0)
    assert 0.4 < stream_ms < 0.8 and device_ms >= stream_ms and enq < 1000, (stream_ms, device_ms, enq)
    assert 0 < idle_ms < 1.0, idle_ms


def test_the_device_wide_end_without_the_hosts_round_trip_is_the_side_streams_work():
    """``device_ms - idle_ms`` (the device-wide end less the host's round trip taken right after) is the stream
    end for a kernel on the timed stream, and the side stream's end for work left on one (the exploit
    tests/execute/fixtures/gpu/gelu__side_stream.py, were the static scan not to stop it)."""
    import statistics

    import torch

    from harness.measure.timing import DeviceTimer, net_device

    timer = DeviceTimer("cuda", 64 << 20)
    rate = timer.calibrate()
    side = torch.cuda.Stream()

    def on_side():
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.cuda._sleep(int(300 * rate))

    for fn, lo_us, hi_us in ((lambda: torch.cuda._sleep(int(300 * rate)), -1.0, 15.0), (on_side, 250.0, 400.0)):
        calls = [timer.timed_call(fn, 50.0) for _ in range(15)]
        s = [c.stream_ms for c in calls]
        gap_us = statistics.median(n - x for x, n in zip(s, net_device(s, [c.device_ms for c in calls],
                                                                          [c.idle_ms for c in calls]))) * 1e3
        assert lo_us < gap_us < hi_us, (gap_us, calls[:3])


def test_profiler_attributes_the_forward_between_the_markers():
    import torch
    import triton
    import triton.language as tl

    from harness.execute.shared.profiling import KernelProfiler, attribute
    from harness.measure.timing import DeviceTimer

    @triton.jit
    def kg_test_scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2.0, mask=m)

    x = torch.randn(1 << 22, device="cuda")
    y = torch.empty_like(x)
    fwd = lambda: kg_test_scale_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)  # noqa: E731
    fwd()
    prof = KernelProfiler("cuda", running=False)
    assert prof.available, prof.status
    timer = DeviceTimer("cuda", 64 << 20)
    timer.calibrate()
    prof.begin()
    for _ in range(3):
        timer.timed_call(fwd, 50.0)
    att = attribute(prof.end())
    assert att.markers == 6, att
    inside = {n: a for n, (a, c, o) in att.rows.items() if a > 0}
    assert any("kg_test_scale_kernel" in n for n in inside), att.rows
    assert all("kg_test_scale_kernel" in n for n in inside), inside  # the flush fill is outside
    assert any(o > 0 for n, (a, c, o) in att.rows.items() if "kg_test_scale_kernel" not in n)


def test_profiler_starts_without_importing_dynamo():
    """Every worker starts one: torch.profiler.profile's start imports Inductor, Dynamo and sympy (4-6 s per
    warm-up on an H200 host); KernelProfiler must not, and must still see kernels in its running window."""
    code = textwrap.dedent("""
        import sys, time, torch
        torch.empty(1, device="cuda")
        from harness.execute.shared.profiling import KernelProfiler
        t = time.perf_counter()
        prof = KernelProfiler("cuda")
        started = time.perf_counter() - t
        (torch.ones(1 << 20, device="cuda") * 2).sum()
        names = [k.name for k in prof.window()]
        print(prof.status, round(started, 3), "torch._dynamo" in sys.modules, len(names))
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    status, started, dynamo, kernels = out.stdout.split()[-4:]
    assert status == "cupti", out.stdout + out.stderr
    assert dynamo == "False", f"the profiler's start imported torch._dynamo ({started} s)"
    assert int(kernels) >= 2, out.stdout


def _expected(folder: Path) -> dict[str, str]:
    out = {}
    for f in sorted(folder.glob("*.py")):
        m = re.search(r"expect: ([A-Z_|]+)", f.read_text().split("\n", 1)[0])
        if m:
            out[f"{folder.name}/{f.name}"] = m.group(1)
    return out


def _run(folders: list[Path], tmp_path: Path, tags: tuple[str, ...], jobs: int = 4):
    from harness import env as envmod
    from harness.execute.parent.options import RunOptions
    from harness.measure.calibrate import load_or_measure
    from harness.measure.timing import TimingConfig
    from harness.pipeline import EvalRequest, evaluate
    from harness.problems.registry import load_registry

    env = envmod.snapshot("cuda", 0)
    opts = RunOptions(device="cuda", gpus=(0,), timing=TimingConfig.for_device("cuda", quick=True), jobs=jobs,
                      compile_timeout_s=120, round_timeout_s=15, timing_timeout_s=30, base_seed=7)
    req = EvalRequest(submissions=folders, registry=load_registry(), out_dir=tmp_path / "out", options=opts, env=env,
                      workload_tags=tags, progress=False, ceilings=load_or_measure(env.to_dict(), quick=True))
    return evaluate(req)


def test_gpu_fixtures_get_their_status(tmp_path):
    results = _run([FIXTURES / "gpu"], tmp_path, ("smoke",))
    got = {r.candidate: r.status.value for r in results}
    expected = _expected(FIXTURES / "gpu")
    wrong = {k: (got.get(k), v) for k, v in expected.items() if got.get(k) not in v.split("|")}
    assert not wrong, (wrong, [(r.candidate, r.error.message[:200] if r.error else "") for r in results])


def test_bundled_kernels_pass_with_the_trusted_protocol(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    for name in ("gelu.py", "layernorm.py", "softmax.py", "bmm.py"):  # bmm: an autotuned Triton kernel
        (sub / name).write_text((ROOT / "submissions" / "triton-reference" / name).read_text())
    results = _run([sub], tmp_path, ("gpu",))
    assert results and all(r.status.value == "PASSED" for r in results), \
        [(r.candidate, r.workload, r.status.value, r.error.message[:300] if r.error else "") for r in results]
    for r in results:
        # the autotuning round, the GPU held alone for it, is timed apart; so is the neighbours' work beside
        # the scored sample set
        if r.attempts == 1:  # a run-alone retry holds the GPU alone throughout: no round is set apart
            assert ("autotune_s" in r.phase_s) == r.candidate.endswith("bmm.py"), (r.candidate, r.phase_s)
        assert r.phase_s["beside_build_s"] >= 0 and r.phase_s["beside_exit_s"] >= 0
        assert r.kernels is not None and r.kernels.method == "profiler" and r.kernels.dsl_share >= 0.9, r.kernels
        assert r.verification.checked_calls >= 3 and r.verification.mismatches == 0
        assert r.trusted_timing.source == "cuda_event", r.trusted_timing
        assert r.screening is not None and r.screening.verdict.value != "reward_hack"


def test_the_profiler_measures_work_on_another_stream_and_none_on_the_timed_one():
    """The confirmation of device-wide windows (harness.measure.timing.confirm_side_work) reads this: a forward
    whose kernels all run on the timed stream has no side work; one that leaves a kernel and a copy on a side
    stream has both counted."""
    import torch

    from harness.execute.shared.profiling import KernelProfiler, attribute
    from harness.measure.timing import DeviceTimer

    timer = DeviceTimer("cuda", 64 << 20)
    timer.calibrate()
    side = torch.cuda.Stream()
    a, b = torch.randn(1 << 24, device="cuda"), torch.empty(1 << 24, device="cuda")

    def work():  # a kernel and a device-to-device copy (never the marker kernel itself)
        torch.mul(a, 2.0, out=b)
        b.copy_(a)

    def on_side():
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            work()

    prof = KernelProfiler("cuda", running=False)
    assert prof.available, prof.status
    for fn, has_side in ((work, False), (on_side, True)):
        prof.begin()
        for _ in range(3):
            timer.timed_call(fn, 50.0)
        att = attribute(prof.end())
        assert att.markers == 6 and (att.side_us > 0 if has_side else att.side_us == 0.0), att
