"""Problem loading: KernelBench files unchanged, --set overrides, helpful errors."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from harness.problems.loader import ProblemError, eval_expr, load_problem
from harness.problems.registry import UnknownProblem, load_registry, parse_set_options

KB = Path(__file__).parents[1] / "fixtures" / "kernelbench"


def test_plain_kernelbench_file_loads_with_derived_cost():
    p = load_problem(KB / "1_Square_matrix_multiplication_.py")
    assert p.derived and p.category == "gemm" and p.id == "1_Square_matrix_multiplication_"
    (w,) = p.workloads
    assert w.flops == 2 * 2048**3
    assert w.min_bytes == 3 * 2048 * 2048 * 4


def test_plain_elementwise_file_has_memory_only_cost():
    p = load_problem(KB / "19_ReLU.py")
    (w,) = p.workloads
    assert p.category == "elementwise" and w.flops == 0 and w.min_bytes == 2 * 16 * 16384 * 4


def test_set_overrides_module_constants():
    p = load_problem(KB / "1_Square_matrix_multiplication_.py", overrides={"N": 256})
    assert p.workloads[0].flops == 2 * 256**3


def test_set_unknown_constant_names_the_constants():
    with pytest.raises(ProblemError, match=r"no constant 'M'.*\['N'\]"):
        load_problem(KB / "1_Square_matrix_multiplication_.py", overrides={"M": 256})


def test_registry_on_a_kernelbench_folder_and_did_you_mean():
    reg = load_registry(KB)
    assert len(reg) == 8 and not reg.errors  # the two at the top and six under levels/level1, level2
    with pytest.raises(UnknownProblem, match="did you mean '19_ReLU'"):
        reg.get("19_Relu")


def test_bundled_unknown_id_suggests():
    with pytest.raises(UnknownProblem, match="did you mean 'layernorm'"):
        load_registry().get("layer_norm")


@pytest.mark.parametrize("body,field", [
    ("KERNELGATE = {'category': 'nope'}", "category"),
    ("KERNELGATE = {'flops': 'N *', 'bytes': '1', 'category': 'gemm'}", "flops"),
    ("KERNELGATE = {'flops': '__import__(\"os\")', 'bytes': '1', 'category': 'gemm'}", "flops"),
    ("KERNELGATE = {'category': 'gemm', 'workloads': [{'name': 'a', 'dtype': 'float8'}]}", "workloads[0].dtype"),
    ("KERNELGATE = {'category': 'gemm', 'colour': 1}", "KERNELGATE"),
])
def test_malformed_metadata_names_file_and_field(tmp_path, body, field):
    f = tmp_path / "bad.py"
    f.write_text(textwrap.dedent("""
        import torch
        N = 8
        class Model(torch.nn.Module):
            def forward(self, x):
                return x * 2
        def get_inputs(): return [torch.randn(N)]
        def get_init_inputs(): return []
    """) + body + "\n")
    with pytest.raises(ProblemError) as exc:
        load_problem(f)
    assert exc.value.field == field and str(f) in str(exc.value)


def test_broken_file_does_not_stop_the_others(tmp_path):
    (tmp_path / "good.py").write_text((KB / "19_ReLU.py").read_text())
    (tmp_path / "broken.py").write_text("import torch\nraise RuntimeError('boom')\n")
    (tmp_path / "missing.py").write_text("import torch\n")
    reg = load_registry(tmp_path)
    assert list(reg.problems) == ["good"]
    fields = sorted(e.field for e in reg.errors)
    assert fields == ["<module>", "Model"]


def test_duplicate_ids_are_refused(tmp_path):
    src = (KB / "19_ReLU.py").read_text() + "\nKERNELGATE = {'id': 'relu'}\n"
    (tmp_path / "a.py").write_text(src)
    (tmp_path / "b.py").write_text(src)
    reg = load_registry(tmp_path)
    assert len(reg) == 1 and "duplicate problem id 'relu'" in str(reg.errors[0])


def test_parse_set_options():
    ov = parse_set_options(["N=256", "EPS=1e-5", "MODE=fast", "K=(3, 5)", "19_ReLU:dim=64"])
    assert ov.common == {"N": 256, "EPS": 1e-5, "MODE": "fast", "K": (3, 5)}
    assert ov.scoped == {"19_ReLU": {"dim": 64}}
    with pytest.raises(ValueError, match="NAME=VALUE"):
        parse_set_options(["N"])


def test_eval_expr_is_arithmetic_only():
    assert eval_expr("2 * M * N", {"M": 3, "N": 4}, path=Path("x"), field_name="flops") == 24
    with pytest.raises(ProblemError):
        eval_expr("M.bit_length()", {"M": 3}, path=Path("x"), field_name="flops")
