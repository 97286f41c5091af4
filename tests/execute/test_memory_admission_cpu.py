"""Memory admission end to end on the CPU path, with a fake device memory (KERNELGATE_FAKE_DEVICE_MEMORY_GB).

Jobs whose estimate is more than the (fake) device has are run alone, each on the whole device, one after the
other, and say so in their records; a capacity that admits one job at a time still finishes every candidate.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import env as envmod
from harness.execute.parent.options import RunOptions
from harness.measure.timing import TimingConfig
from harness.pipeline import EvalRequest, evaluate
from harness.problems.registry import load_registry
from harness.records import Status

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path, monkeypatch, gigabytes: float):
    monkeypatch.setenv("KERNELGATE_FAKE_DEVICE_MEMORY_GB", str(gigabytes))
    sub = tmp_path / "sub"
    sub.mkdir()
    for name in ("gelu.py", "silu.py"):
        (sub / name).write_text((ROOT / "submissions" / "triton-reference" / name).read_text())
    opts = RunOptions(device="cpu", timing=TimingConfig.for_device("cpu"), jobs=2, time_kernels=False,
                      compile_timeout_s=300, round_timeout_s=300)
    req = EvalRequest(submissions=[sub], registry=load_registry(), out_dir=tmp_path / "out", options=opts,
                      env=envmod.snapshot("cpu"), workload_tags=("smoke",), progress=False)
    return evaluate(req)


@pytest.mark.parametrize("gigabytes, alone", [(16.67, True), (18.67, False)])
def test_jobs_are_admitted_against_a_fake_device_memory(tmp_path, monkeypatch, gigabytes, alone):
    # two jobs, two slots: 16.67 GiB leaves less than one job's estimate beside the processes' contexts, the
    # checker's cache and the timed batch's 6 GiB (each runs alone); 18.67 GiB leaves room for one job at a time
    # (they queue)
    results = _run(tmp_path, monkeypatch, gigabytes)
    assert sorted(r.candidate for r in results) == ["sub/gelu.py", "sub/silu.py"]
    assert all(r.status is Status.PASSED for r in results), [(r.candidate, r.status, r.error) for r in results]
    said = [any("run alone: its estimated peak" in w for w in r.warnings) for r in results]
    assert said == [alone, alone]
