"""Secret workloads: drawn from declared ranges by the run's base seed, or read from a private file."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from harness.problems.loader import DTYPES, ProblemError, build_workload, load_module, load_problem
from harness.problems.registry import load_registry
from harness.problems.secret import load_private_workloads, secret_workloads

REGISTRY = load_registry()
L2_BYTES = 60e6
MAX_WORKLOAD_BYTES = 4e9


def problem_with(tmp_path: Path, secret: str) -> Path:
    path = tmp_path / "scale.py"
    path.write_text(textwrap.dedent("""
        import torch
        ROWS = 64
        COLS = 128
        class Model(torch.nn.Module):
            def forward(self, x):
                return x * 2
        def get_inputs(): return [torch.randn(ROWS, COLS)]
        def get_init_inputs(): return []
        KERNELGATE = {"category": "elementwise", "flops": "ROWS * COLS", "bytes": "2 * ROWS * COLS * ELEM",
                      "secret": %s}
    """) % secret)
    return path


SPEC = '{"count": 3, "ranges": {"ROWS": [64, 4096, 64], "COLS": [128, 1024, 128]}, "dtypes": ["float16", "bfloat16"]}'


def test_draws_are_deterministic_per_seed_and_inside_the_ranges(tmp_path):
    p = load_problem(problem_with(tmp_path, SPEC))
    a, b = secret_workloads(p, 1234), secret_workloads(p, 1234)
    assert a == b and [w.name for w in a] == ["secret-1", "secret-2", "secret-3"]
    c = secret_workloads(p, 4321)
    assert [w.params for w in a] != [w.params for w in c]
    for w in a + c:
        assert w.secret and w.tags == ("gpu",) and w.dtype in ("float16", "bfloat16")
        assert w.params["ROWS"] % 64 == 0 and 64 <= w.params["ROWS"] <= 4096
        assert w.params["COLS"] % 128 == 0 and 128 <= w.params["COLS"] <= 1024
        assert w.flops == w.params["ROWS"] * w.params["COLS"] and w.min_bytes == 2 * w.flops * 2
        assert w.input_bytes == w.flops * 2
    assert len(secret_workloads(p, 1, count=5)) == 5 and secret_workloads(p, 1, count=0) == []


def test_names_say_nothing_about_the_shape(tmp_path):
    p = load_problem(problem_with(tmp_path, SPEC))
    for w in secret_workloads(p, 7):
        assert not any(str(v) in w.name for v in w.params.values())


def test_problem_without_spec_has_no_secret_workloads():
    assert secret_workloads(load_problem(Path(__file__).parents[1] / "fixtures" / "kernelbench" / "19_ReLU.py"), 1) == []


@pytest.mark.parametrize("spec,field", [
    ("[1, 2]", "secret"),
    ('{"count": 0, "ranges": {"ROWS": [1, 2, 1]}}', "secret.count"),
    ('{"ranges": {}}', "secret.ranges"),
    ('{"ranges": {"NOPE": [1, 2, 1]}}', "secret.ranges.NOPE"),
    ('{"ranges": {"ROWS": [8, 4, 1]}}', "secret.ranges.ROWS"),
    ('{"ranges": {"ROWS": [1, 4]}}', "secret.ranges.ROWS"),
    ('{"ranges": {"ROWS": [1, 4, 1]}, "dtypes": ["float8"]}', "secret.dtypes"),
    ('{"ranges": {"ROWS": [1, 4, 1]}, "colour": 1}', "secret"),
])
def test_bad_specs_name_the_field(tmp_path, spec, field):
    with pytest.raises(ProblemError) as exc:
        load_problem(problem_with(tmp_path, spec))
    assert exc.value.field == field


def test_private_workload_file(tmp_path):
    reg = load_registry(problem_with(tmp_path, SPEC))
    private = tmp_path.parent / "private.json"
    private.write_text(json.dumps({"scale": [{"name": "p1", "set": {"ROWS": 3000}, "dtype": "bfloat16",
                                              "tags": ["gpu"]}]}))
    (w,) = load_private_workloads(private, reg)["scale"]
    assert w.secret and w.name == "p1" and w.params == {"ROWS": 3000, "COLS": 128} and w.flops == 3000 * 128


@pytest.mark.parametrize("data,field", [
    ({"scal": [{"name": "a"}]}, "scal"),
    ({"scale": []}, "scale"),
    ({"scale": [{"name": "a", "set": {"X": 1}}]}, "scale[0].set"),
    ({"scale": [{"name": "a", "dtype": "float64"}]}, "scale[0].dtype"),
    ({"scale": [{"name": "a", "shape": 1}]}, "scale[0]"),
    ({"scale": [{"name": "a"}, {"name": "a"}]}, "scale[1].name"),
])
def test_private_file_errors_name_the_entry(tmp_path, data, field):
    reg = load_registry(problem_with(tmp_path, SPEC))
    private = tmp_path.parent / "bad.json"
    private.write_text(json.dumps(data))
    with pytest.raises(ProblemError) as exc:
        load_private_workloads(private, reg)
    assert exc.value.field == field and str(private) in str(exc.value)
    if field == "scal":
        assert "did you mean 'scale'" in str(exc.value)


# --------------------------------------------------------------------------- the bundled problems' ranges

@pytest.mark.parametrize("pid", sorted(REGISTRY.problems))
def test_every_bundled_problem_has_gpu_sized_secret_ranges(pid):
    """Both corners of the ranges: the smallest is several times a 60 MB L2, the largest stays under 4 GB."""
    p = REGISTRY.get(pid)
    spec = p.secret
    assert spec is not None and spec.count >= 1 and set(spec.dtypes) <= set(DTYPES)
    low, high = spec.corners()
    small = min(spec.dtypes, key=lambda d: {"float32": 4}.get(d, 2))
    big = max(spec.dtypes, key=lambda d: {"float32": 4}.get(d, 2))
    w_low = build_workload(p, name="low", set_=low, dtype=small, tags=("gpu",), secret=True)
    w_high = build_workload(p, name="high", set_=high, dtype=big, tags=("gpu",), secret=True)
    assert w_low.min_bytes >= 3 * L2_BYTES, (pid, w_low.min_bytes)
    total = w_high.input_bytes + w_high.output_bytes + w_high.param_bytes
    assert total <= MAX_WORKLOAD_BYTES, (pid, total)


@pytest.mark.parametrize("pid", sorted(REGISTRY.problems))
def test_secret_dtypes_are_ones_the_bundled_kernels_were_run_in(pid):
    """A secret workload may change the shape, not the dtype: only dtypes of the problem's public GPU workloads."""
    p = REGISTRY.get(pid)
    assert set(p.secret.dtypes) <= {w.dtype for w in p.workloads if w.is_gpu}


def test_bundled_secret_ranges_keep_the_bundled_kernels_shape_rules():
    """Shapes the bundled TileLang kernels need: TMA rows of 16 bytes (multiples of 8 elements), GroupNorm's
    group within its 200 KB shared-memory budget, tall-skinny N <= 256, register-resident rows <= 8192 wide
    for the Triton LayerNorm/RMSNorm."""
    for p in REGISTRY:
        for name, (lo, hi, step) in p.secret.ranges.items():
            if p.id in ("gemm_square", "gemm_tall_skinny", "bmm", "gemm_large_k", "conv1d_strided"):
                assert lo % 8 == 0 and step % 8 == 0, (p.id, name)
        if p.id in ("layernorm", "rmsnorm"):
            assert p.secret.ranges["COLS"][1] <= 8192
    g = REGISTRY.get("groupnorm")
    groups = load_module(g.path).G  # the file's value: secret draws do not set G
    cpg_max = g.secret.ranges["C"][1] // groups
    assert cpg_max * g.secret.ranges["H"][1] * g.secret.ranges["W"][1] * 2 <= 200 * 1024
    assert all(c % groups == 0 for c in g.secret.values("C"))
    assert REGISTRY.get("gemm_tall_skinny").secret.ranges["N"][1] <= 256
