"""Lint fixtures: each defect fixture gets exactly its rule, good kernels get none, lowered CUDA likewise."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.diagnose.findings import Finding, format_findings
from harness.diagnose.lint import HINTS, lint_cuda_source, lint_path, lint_source

FIXTURES = Path(__file__).parent / "fixtures" / "lint"

# fixture -> (the only rule it may get, the most serious severity expected)
DEFECTS = {
    "tilelang_layernorm_serial_row.py": ("sequential-reduction", "defect"),
    "tilelang_rowsum_thread_per_row.py": ("sequential-reduction", "defect"),
    "triton_sum_scalar_loop.py": ("sequential-reduction", "defect"),
    "triton_softmax_fp64.py": ("fp64-promotion", "defect"),
    "triton_gelu_one_element.py": ("one-element-per-program", "defect"),
    "triton_add_block1.py": ("one-element-per-program", "defect"),
    "triton_layernorm_3pass.py": ("unfused-multipass", "defect"),
    "triton_sum_fp16_accumulator.py": ("cast-in-inner-loop", "defect"),
    "triton_scale_cast_in_loop.py": ("cast-in-inner-loop", "warning"),
    "triton_relu_tiny_block.py": ("tiny-tile", "defect"),
    "tilelang_scale_tiny_threads.py": ("tiny-tile", "defect"),
    "triton_scale_host_sync.py": ("host-sync-in-forward", "defect"),
    "triton_colsum_strided.py": ("non-coalesced-access", "warning"),
    "triton_matmul_outer_product.py": ("matmul-without-tensor-cores", "defect"),
    "tilelang_conv1x1_channel_loop.py": ("matmul-without-tensor-cores", "defect"),
    "tilelang_sum_fp64.py": ("fp64-promotion", "defect"),
    "tilelang_scale_cast_in_loop.py": ("cast-in-inner-loop", "warning"),
    "tilelang_add_one_element.py": ("one-element-per-program", "defect"),
    "triton_layernorm_2pass.py": ("unfused-multipass", "warning"),
    "triton_gemv_broadcast_sum.py": ("matmul-without-tensor-cores", "warning"),
}
# lowered CUDA C (hand-written in the form TileLang emits) -> (its only rule, its severity)
CUDA_DEFECTS = {
    "rowsum_serial.cu": ("sequential-reduction", "defect"),
    "exp_double.cu": ("fp64-promotion", "defect"),
    "tiny_block.cu": ("tiny-tile", "defect"),
    "one_warp_long_loop.cu": ("tiny-tile", "warning"),
}
GOOD = sorted(p.name for p in (FIXTURES / "good").glob("*.py"))


def _lint_fixture(kind: str, name: str) -> list[Finding]:
    path = FIXTURES / kind / name
    return lint_source(path.read_text(), filename=str(path))


def test_every_defect_fixture_is_listed():
    assert sorted(DEFECTS) == sorted(p.name for p in (FIXTURES / "defect").glob("*.py"))
    assert len(GOOD) >= 4


@pytest.mark.parametrize("name", sorted(DEFECTS))
def test_defect_fixture_gets_exactly_its_rule(name):
    rule, severity = DEFECTS[name]
    findings = _lint_fixture("defect", name)
    assert {f.rule for f in findings} == {rule}, format_findings(findings, name)
    assert severity in {f.severity for f in findings}
    if severity == "warning":
        assert all(f.severity == "warning" for f in findings)
    for f in findings:
        assert f.line is not None and f.line > 0
        assert f.hint == HINTS[rule]
        assert "\n" not in f.message and "\n" not in f.hint


@pytest.mark.parametrize("name", GOOD)
def test_good_fixture_gets_no_defect(name):
    findings = _lint_fixture("good", name)
    assert not [f for f in findings if f.severity in ("defect", "warning")], format_findings(findings, name)


@pytest.mark.parametrize("name", sorted(CUDA_DEFECTS))
def test_cuda_fixture_gets_exactly_its_rule(name):
    assert sorted(CUDA_DEFECTS) == sorted(p.name for p in (FIXTURES / "cuda").glob("*.cu"))
    rule, severity = CUDA_DEFECTS[name]
    findings = lint_cuda_source((FIXTURES / "cuda" / name).read_text())
    assert [(f.rule, f.severity) for f in findings] == [(rule, severity)], format_findings(findings, name)
    assert findings[0].hint == HINTS[rule]


def test_lint_path_file_and_folder():
    folder = lint_path(FIXTURES / "defect")
    assert sorted(Path(p).name for p in folder) == sorted(DEFECTS)
    assert all(isinstance(v, list) for v in folder.values())
    one = lint_path(FIXTURES / "defect" / "triton_softmax_fp64.py")
    assert [f.rule for f in next(iter(one.values()))] == ["fp64-promotion"]
