"""Triton kernel rules (harness/diagnose/lint/triton.py): heuristics that must stay quiet on good code."""

from __future__ import annotations

import textwrap

from harness.diagnose.findings import Finding
from harness.diagnose.lint import lint_source

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


def test_lane_index_divided_down_is_a_broadcast_not_a_strided_walk():
    # oc = offs // HW changes once per HW lanes: the weight load is (nearly) one address per block
    findings = _lint(
        """
        @triton.jit
        def scale_by_channel(x_ptr, w_ptr, y_ptr, total, HW, C, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tmp = offs // HW
            oc = tmp % C
            w = tl.load(w_ptr + oc * HW, mask=offs < total)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < total) * w, mask=offs < total)

        class ModelNew(nn.Module):
            def forward(self, x, w):
                N, C, H, W = x.shape
                y = torch.empty_like(x)
                scale_by_channel[(triton.cdiv(x.numel(), 256),)](x, w, y, x.numel(), x.shape[-1], C, BLOCK=256)
                return y
        """
    )
    assert not [f for f in findings if f.rule == "non-coalesced-access"]


def test_single_lane_load_is_not_non_coalesced():
    findings = _lint(
        """
        @triton.jit
        def per_channel(x_ptr, w_ptr, y_ptr, HW, n_cols, BLOCK_C: tl.constexpr, BLOCK_HW: tl.constexpr):
            co = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
            hw = tl.program_id(1) * BLOCK_HW + tl.arange(0, BLOCK_HW)
            w = tl.load(w_ptr + co * n_cols)
            x = tl.load(x_ptr + co[None, :] * HW + hw[:, None])
            tl.store(y_ptr + co[None, :] * HW + hw[:, None], x * w[None, :])

        class ModelNew(nn.Module):
            def forward(self, x, w):
                y = torch.empty_like(x)
                per_channel[(x.shape[0], 4)](x, w, y, x.shape[1], w.shape[-1], BLOCK_C=1, BLOCK_HW=128)
                return y
        """
    )
    assert not [f for f in findings if f.rule == "non-coalesced-access"]


def test_column_walk_by_row_stride_is_still_non_coalesced():
    findings = _lint(
        """
        @triton.jit
        def col_sum(x_ptr, y_ptr, M, row_stride, BLOCK: tl.constexpr):
            col = tl.program_id(0)
            rows = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + rows * row_stride + col, mask=rows < M, other=0.0)
            tl.store(y_ptr + col, tl.sum(x, axis=0))
        """
    )
    assert [f.rule for f in findings] == ["non-coalesced-access"]
