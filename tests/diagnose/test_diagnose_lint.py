"""Authoring-defect linter: each defect fixture gets exactly its rule, good kernels get none."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.diagnose.findings import Finding, format_findings
from harness.diagnose.lint import HINTS, RULES, detect_dsl, lint_path, lint_source

FIXTURES = Path(__file__).parent / "fixtures" / "lint"
REPO = Path(__file__).resolve().parents[2]

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


@pytest.mark.parametrize(
    ("name", "dsl"),
    [
        ("good/triton_gemm_tiled.py", "triton"),
        ("good/tilelang_gemm_pipelined.py", "tilelang"),
        ("defect/tilelang_layernorm_serial_row.py", "tilelang"),
    ],
)
def test_detect_dsl(name, dsl):
    assert detect_dsl((FIXTURES / name).read_text()) == dsl


def test_detect_dsl_torch_and_unparsable():
    assert detect_dsl("import torch\nclass ModelNew(torch.nn.Module):\n    pass\n") == "torch"
    # imports triton but has no @triton.jit kernel
    assert detect_dsl("import triton\nimport torch\n") == "torch"
    assert detect_dsl("import tilelang\ndef broken(:\n") == "tilelang"


def test_parse_error_is_one_info_finding():
    (f,) = lint_source("def forward(self:\n", filename="bad.py")
    assert (f.rule, f.severity) == ("parse-error", "info")


def test_dsl_argument_is_validated_and_respected():
    src = (FIXTURES / "defect" / "triton_sum_scalar_loop.py").read_text()
    assert lint_source(src, dsl="tilelang") == []  # Triton kernel rules skipped
    with pytest.raises(ValueError):
        lint_source(src, dsl="cuda")


def test_candidate_code_is_never_executed(tmp_path):
    marker = tmp_path / "ran"
    src = f"open({str(marker)!r}, 'w').write('x')\nraise SystemExit(3)\n"
    assert lint_source(src) == []
    assert not marker.exists()


# -- heuristics that must stay quiet on good code ------------------------------------------------

_HEADER = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n"


def _lint(body: str) -> list[Finding]:
    return lint_source(_HEADER + textwrap.dedent(body))


def test_block_reduction_inside_a_loop_is_not_sequential():
    findings = _lint(
        """
        @triton.jit
        def k(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            acc = 0.0
            for off in range(0, N, BLOCK):
                cols = off + tl.arange(0, BLOCK)
                x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0)
                acc += tl.sum(x, axis=0)
                w = tl.load(out_ptr + row)      # a scalar load that is not accumulated
            tl.store(out_ptr + row, acc)
        """
    )
    assert not [f for f in findings if f.rule == "sequential-reduction"]


def test_rescaled_fresh_value_is_not_an_accumulator():
    findings = _lint(
        """
        @triton.jit
        def k(x_ptr, w_ptr, out_ptr, T):
            pid = tl.program_id(0)
            for t in range(0, T):
                loss = tl.load(x_ptr + pid * T + t)
                loss = loss * tl.load(w_ptr + t)
                tl.store(out_ptr + pid * T + t, loss)
        """
    )
    assert not [f for f in findings if f.rule == "sequential-reduction"]


def test_launches_in_exclusive_branches_are_not_multipass():
    findings = _lint(
        """
        @triton.jit
        def small_k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

        @triton.jit
        def big_k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

        class ModelNew(nn.Module):
            def forward(self, x):
                y = torch.empty_like(x)
                n = x.numel()
                if n < 4096:
                    small_k[(1,)](x, y, n, BLOCK=4096)
                else:
                    big_k[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
                return y
        """
    )
    assert findings == []


def test_two_pass_stats_then_apply_is_only_a_warning():
    findings = _lint(
        """
        @triton.jit
        def stats(x_ptr, s_ptr, N, BLOCK: tl.constexpr):
            r = tl.program_id(0)
            c = tl.arange(0, BLOCK)
            tl.store(s_ptr + r, tl.sum(tl.load(x_ptr + r * N + c, mask=c < N, other=0.0), axis=0))

        @triton.jit
        def apply(x_ptr, s_ptr, y_ptr, N, BLOCK: tl.constexpr):
            r = tl.program_id(0)
            c = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + r * N + c, mask=c < N, other=0.0)
            tl.store(y_ptr + r * N + c, x / tl.load(s_ptr + r), mask=c < N)

        class ModelNew(nn.Module):
            def forward(self, x):
                M, N = x.shape
                s = torch.empty(M, device=x.device)
                y = torch.empty_like(x)
                stats[(M,)](x, s, N, BLOCK=1024)
                apply[(M,)](x, s, y, N, BLOCK=1024)
                return y
        """
    )
    assert [(f.rule, f.severity) for f in findings] == [("unfused-multipass", "warning")]


def test_cpu_side_item_and_dtype_comparisons_are_quiet():
    findings = _lint(
        """
        class ModelNew(nn.Module):
            def forward(self, x):
                n = torch.tensor(x.shape).prod().item()   # CPU tensor: no device sync
                if x.dtype == torch.float64:               # a check, not a promotion
                    raise TypeError("fp64 unsupported")
                return x.view(n)
        """
    )
    assert findings == []


def test_host_sync_and_fp64_in_forward_helpers():
    findings = _lint(
        """
        def helper(x):
            torch.cuda.synchronize()
            return x.double()

        class ModelNew(nn.Module):
            def forward(self, x):
                return helper(x).float()
        """
    )
    assert {f.rule for f in findings} == {"host-sync-in-forward", "fp64-promotion"}


def test_gemm_with_transposed_operand_is_not_non_coalesced():
    findings = _lint(
        """
        @triton.jit
        def mm(a_ptr, b_ptr, c_ptr, M, N, K, s_am, s_ak, s_bk, s_bn, s_cm, s_cn,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
            rm = tl.program_id(0) * BM + tl.arange(0, BM)
            rn = tl.program_id(1) * BN + tl.arange(0, BN)
            rk = tl.arange(0, BK)
            acc = tl.zeros((BM, BN), dtype=tl.float32)
            for k in range(0, K, BK):
                a = tl.load(a_ptr + rm[:, None] * s_am + (k + rk)[None, :] * s_ak)
                b = tl.load(b_ptr + (k + rk)[:, None] * s_bk + rn[None, :] * s_bn)
                acc += tl.dot(a, b)
            tl.store(c_ptr + rm[:, None] * s_cm + rn[None, :] * s_cn, acc)

        class ModelNew(nn.Module):
            def forward(self, a, w):
                M, K = a.shape
                N = w.shape[0]
                c = torch.empty((M, N), device=a.device, dtype=a.dtype)
                # b = w.T: strides swapped
                mm[(M // 64, N // 64)](a, w, c, M, N, K, a.stride(0), a.stride(1), w.stride(1), w.stride(0),
                                       c.stride(0), c.stride(1), BM=64, BN=64, BK=32)
                return c
        """
    )
    assert findings == []


# -- API surface -----------------------------------------------------------------------------------

def test_finding_record_round_trips_and_is_frozen():
    f = Finding("tiny-tile", "defect", 3, "msg", "hint")
    assert Finding.from_dict(f.to_dict()) == f
    assert f.to_dict() == {"rule": "tiny-tile", "severity": "defect", "line": 3, "message": "msg", "hint": "hint"}
    with pytest.raises(Exception):
        f.rule = "x"  # type: ignore[misc]
    with pytest.raises(ValueError):
        Finding("r", "critical", None, "m", "h")
    with pytest.raises(ValueError):
        Finding.from_dict({**f.to_dict(), "extra": 1})


def test_format_findings_lines():
    fs = [Finding("tiny-tile", "defect", 7, "small block", "grow it"), Finding("parse-error", "info", None, "m", "h")]
    text = format_findings(fs, "cand.py")
    assert text.splitlines() == ["cand.py: [parse-error] m -- h", "cand.py:7: [tiny-tile] small block -- grow it"]
    assert format_findings({"b.py": fs[:1], "a.py": []}) == "b.py:7: [tiny-tile] small block -- grow it"
    assert format_findings([]) == ""


def test_lint_path_file_and_folder():
    folder = lint_path(FIXTURES / "defect")
    assert sorted(Path(p).name for p in folder) == sorted(DEFECTS)
    assert all(isinstance(v, list) for v in folder.values())
    one = lint_path(FIXTURES / "defect" / "triton_softmax_fp64.py")
    assert [f.rule for f in next(iter(one.values()))] == ["fp64-promotion"]


def test_rules_and_hints_are_consistent():
    assert set(RULES) == set(HINTS)


def test_package_import_does_no_work():
    code = (
        "import sys, harness.diagnose as d\n"
        "assert 'harness.diagnose.lint' not in sys.modules\n"
        "assert 'harness.diagnose.anticheat' not in sys.modules\n"
        "assert 'triton' not in sys.modules and 'tilelang' not in sys.modules and 'torch' not in sys.modules\n"
        "assert callable(d.lint_source) and callable(d.scan_source) and callable(d.format_findings)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_device_helper_with_block_arguments_is_not_sequential():
    findings = _lint(
        """
        @triton.jit
        def _row_dot(x_ptr, w_ptr, offs, K):
            acc = tl.zeros_like(offs).to(tl.float32)
            for k in range(0, K):
                acc += tl.load(x_ptr + offs * K + k) * tl.load(w_ptr + k)
            return acc

        @triton.jit
        def gemv_kernel(x_ptr, w_ptr, y_ptr, M, K, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, _row_dot(x_ptr, w_ptr, offs, K), mask=offs < M)
        """
    )
    assert not [f for f in findings if f.rule == "sequential-reduction"]


_TL_HEADER = "import torch\nimport tilelang\nimport tilelang.language as T\n\n"


def test_tilelang_split_combine_serial_loop_next_to_parallel_work_is_quiet():
    src = _TL_HEADER + textwrap.dedent(
        """
        @tilelang.jit(out_idx=[-1])
        def combine(batch, heads, num_split, dim):
            @T.prim_func
            def main(lse: T.Tensor((batch, heads, num_split), "float32"),
                     part: T.Tensor((batch, heads, num_split, dim), "float32"),
                     out: T.Tensor((batch, heads, dim), "float32")):
                with T.Kernel(heads, batch, threads=128) as (by, bz):
                    m = T.alloc_local([1], "float32")
                    acc = T.alloc_fragment([dim], "float32")
                    m[0] = -T.infinity("float32")
                    for k in T.serial(num_split):
                        m[0] = T.max(m[0], lse[bz, by, k])
                    T.clear(acc)
                    for k in T.serial(num_split):
                        for i in T.Parallel(dim):
                            acc[i] += part[bz, by, k, i] * T.exp2(lse[bz, by, k] - m[0])
                    for i in T.Parallel(dim):
                        out[bz, by, i] = acc[i]
            return main
        """
    )
    assert lint_source(src) == []


def test_tilelang_naive_gemm_thread_per_output_is_a_matmul_without_tensor_cores():
    # a thread walking K for one output is also a sequential reduction; the tensor-core finding subsumes it
    src = _TL_HEADER + textwrap.dedent(
        """
        @tilelang.jit(out_idx=[-1])
        def naive_mm(M, N, K, block_M=16, block_N=16):
            @T.prim_func
            def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
                with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
                    acc = T.alloc_fragment((block_M, block_N), "float32")
                    for i, j in T.Parallel(block_M, block_N):
                        acc[i, j] = 0.0
                        for k in T.serial(K):
                            acc[i, j] += A[by * block_M + i, k] * B[k, bx * block_N + j]
                        C[by * block_M + i, bx * block_N + j] = acc[i, j]
            return main
        """
    )
    assert [(f.rule, f.severity) for f in lint_source(src)] == [("matmul-without-tensor-cores", "defect")]
