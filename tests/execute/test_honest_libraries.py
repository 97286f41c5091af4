"""Honest real-world code (tests/execute/fixtures/honest) on the CPU path: every record must be PASSED.

A false accusation is a defect as serious as a missed cheat. The folder holds what users submit: wrappers of
production Triton libraries (Liger-Kernel, flash-linear-attention), kernels in modules that import
``torch._dynamo`` or use ``torch.compiler.disable`` / ``torch.compiler.is_compiling``, an autotuned kernel, and
kernels that finish with the library's own op on a small tensor of partial results. Each file's docstring names
the pattern and says ``expect: PASSED``.

So that a failure here can only be the harness's, the first test runs every fixture outside KernelGate (in a
plain interpreter under ``TRITON_INTERPRET=1``, autotuners run with each config once) and compares it with the
problem's ``Model`` in float64. What accused them before: PyTorch's Dynamo wraps ``torch.manual_seed`` when it is
imported, which a tamper check of torch's namespace called patching; the interpreter cannot benchmark an
autotuner; and any use of the library op counted as a fallback, whatever its share of the work.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness import env as envmod
from harness.execute.parent.options import RunOptions
from harness.measure.timing import TimingConfig
from harness.pipeline import EvalRequest, evaluate
from harness.problems.registry import load_registry

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures" / "honest"
NEEDS = {"softmax__liger_softmax.py": "liger_kernel", "logsumexp__fla_logsumexp.py": "fla"}
"""Fixtures that need an optional package (liger-kernel is in the ``dev`` extras; flash-linear-attention is not:
``pip install fla-core einops`` to run its case)."""

INDEPENDENT = r'''
import importlib.util, json, sys
from pathlib import Path
import torch
import triton.runtime.autotuner as autotuner


def bench_once(fn, quantiles):
    fn()
    return [1.0, 1.0, 1.0]


autotuner.Autotuner.do_bench = property(lambda self: bench_once)  # the interpreter has no benchmarker
root, folder, names = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


out = {}
for name in names:
    pid = name.split("__")[0]
    prob = load(next(root.glob(f"problems/*/{pid}.py")), f"problem_{pid}")
    smoke = next(w for w in prob.KERNELGATE["workloads"] if "smoke" in w["tags"])
    for key, value in smoke["set"].items():
        setattr(prob, key, value)
    try:
        cand = load(folder / name, f"candidate_{pid}")
        torch.manual_seed(0)
        ref = prob.Model(*prob.get_init_inputs())
        new = cand.ModelNew(*prob.get_init_inputs())
        new.load_state_dict(ref.state_dict(), strict=False)
        ref64 = prob.Model(*prob.get_init_inputs()).double()
        ref64.load_state_dict({k: v.double() for k, v in ref.state_dict().items()})
        worst = 0.0
        for seed in range(3):
            torch.manual_seed(100 + seed)
            inputs = prob.get_inputs()
            got = new(*inputs)
            want = ref64(*[x.double() for x in inputs])
            if got.shape != want.shape or got.dtype != inputs[0].dtype:
                raise AssertionError(f"shape {tuple(got.shape)} dtype {got.dtype}, want {tuple(want.shape)}")
            worst = max(worst, (got.double() - want).abs().max().item())
        out[name] = worst
    except Exception as exc:
        out[name] = f"{type(exc).__name__}: {exc}"[:400]
print("RESULT " + json.dumps(out))
'''


def _expect(path: Path) -> str:
    m = re.search(r"expect: ([A-Z_]+)", path.read_text())
    assert m, f"{path.name}: the docstring has no 'expect: STATUS' line"
    return m.group(1)


def _missing(name: str) -> str | None:
    module = NEEDS.get(name)
    return module if module is not None and importlib.util.find_spec(module) is None else None


NAMES = sorted(p.name for p in FIXTURES.glob("*.py"))


def _cases() -> list:
    out = []
    for name in NAMES:
        marks = []
        if _missing(name):
            marks.append(pytest.mark.skip(reason=f"needs the optional package '{_missing(name)}'"))
        out.append(pytest.param(name, marks=marks))
    return out


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """The folder (less the fixtures whose package is missing) evaluated as ``kernelgate run`` does."""
    folder = tmp_path_factory.mktemp("honest") / "honest"
    folder.mkdir()
    (folder / "manifest.json").write_text((FIXTURES / "manifest.json").read_text())
    for name in NAMES:
        if not _missing(name):
            (folder / name).write_text((FIXTURES / name).read_text())
    opts = RunOptions(device="cpu", timing=TimingConfig.for_device("cpu"), jobs=2, compile_timeout_s=120,
                      round_timeout_s=60, timing_timeout_s=120)
    req = EvalRequest(submissions=[folder], registry=load_registry(), out_dir=tmp_path_factory.mktemp("honest-out"),
                      options=opts, env=envmod.snapshot("cpu"), workload_tags=("smoke",), progress=False)
    return {r.candidate.split("/")[-1]: r for r in evaluate(req)}


def test_every_fixture_is_correct_outside_the_harness():
    """Each fixture, in a plain interpreter, matches the problem's Model in float64 on three inputs: an honest
    candidate, so any other verdict of the harness is a false accusation."""
    names = [n for n in NAMES if not _missing(n)]
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([sys.executable, "-c", INDEPENDENT, str(ROOT), str(FIXTURES), json.dumps(names)],
                          capture_output=True, text=True, env=env, timeout=600)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, proc.stderr[-3000:]
    worst = json.loads(line[len("RESULT "):])
    bad = {n: e for n, e in worst.items() if not isinstance(e, float) or e > 1e-4}
    assert not bad, bad
    assert set(worst) == set(names)


def test_every_fixture_says_it_must_pass():
    for name in NAMES:
        assert _expect(FIXTURES / name) == "PASSED", name
    assert set(NEEDS) <= set(NAMES)


@pytest.mark.parametrize("name", _cases())
def test_honest_candidate_is_passed(records, name):
    rec = records[name]
    detail = (f"{rec.error.type}: {rec.error.message[:400]}" if rec.error else "", rec.evidence)
    assert rec.status.value == "PASSED", (rec.status.value, detail)
