"""Softmax as three separate kernels with full-size fp32 intermediates (Triton): defect ``three_pass``.

What it does, in three launches:

1. ``_row_max_kernel``: one program per row loops over the row in chunks of
   ``BLOCK`` columns and writes the row maximum to a ``(ROWS,)`` fp32 buffer.
2. ``_exp_sum_kernel``: one program per row re-reads the row, writes
   ``exp(x - max)`` to a full ``ROWS x COLS`` fp32 buffer in HBM and the row
   sum to a ``(ROWS,)`` buffer.
3. ``_normalize_kernel``: a flat elementwise kernel over all ``ROWS*COLS``
   elements reads the fp32 exponentials and the row sums and writes
   ``e / sum`` in the output dtype.

Max subtraction keeps it numerically safe, and every step is fp32, so the
result is correct.

Why it is slow: softmax is memory-bound, and the minimum traffic is one read
of ``x`` and one write of ``y``. This version reads ``x`` twice, writes and
reads back a full-size fp32 intermediate (twice the bytes of an fp16 input
each way) and launches three kernels: about 3.5x the minimum DRAM traffic for
fp16 inputs, before counting the flat kernel's per-element integer division
to find its row.

Measured by KernelGate on an H200 (``kernelgate run --quick``, the bundled suite
at commit 8448562, evidence/h200-results/2026-12-03-8448562; torch 2.11, Triton
3.6), workload fp16-32768x4096: 0.461 ms against 0.421 ms for PyTorch (1.10x
slower, E_lib 0.91), 0.129 ms at the memory-bound roofline floor (U_roof 0.28):
verdict authoring_defect. Two runs at commit 6becf33 on another H200 agreed
within 1%. PyTorch's own softmax is far from the roof at this shape (U_roof
0.31); against the 0.129 ms that the minimum traffic takes at the calibrated
4.17 TB/s this kernel is 3.6x off. Its E_lib above 0.8 does not change the
verdict: a kernel this far from the roof that does not beat PyTorch is scored
authoring_defect.

The fix (see ``submissions/triton-reference/softmax.py``): one fused kernel,
one program per row: load the row once into registers (or stream it with an
online max/sum in one pass and a second, cached pass for the output), and
write only ``y``.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024
FLAT_BLOCK = 1024


@triton.jit
def _row_max_kernel(x_ptr, max_ptr, n_cols, stride_x, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    row_ptr = x_ptr + row.to(tl.int64) * stride_x
    best = tl.full((BLOCK,), float("-inf"), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(row_ptr + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        best = tl.maximum(best, x)
    tl.store(max_ptr + row, tl.max(best, axis=0))


@triton.jit
def _exp_sum_kernel(x_ptr, max_ptr, e_ptr, sum_ptr, n_cols, stride_x, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    row_ptr = x_ptr + row.to(tl.int64) * stride_x
    e_row_ptr = e_ptr + row.to(tl.int64) * n_cols
    row_max = tl.load(max_ptr + row)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(row_ptr + cols, mask=mask, other=float("-inf")).to(tl.float32)
        e = tl.exp(x - row_max)
        tl.store(e_row_ptr + cols, e, mask=mask)
        acc += e
    tl.store(sum_ptr + row, tl.sum(acc, axis=0))


@triton.jit
def _normalize_kernel(e_ptr, sum_ptr, y_ptr, n_cols, n_elements, FLAT_BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * FLAT_BLOCK + tl.arange(0, FLAT_BLOCK)
    mask = offs < n_elements
    rows = offs // n_cols
    e = tl.load(e_ptr + offs, mask=mask, other=0.0)
    s = tl.load(sum_ptr + rows, mask=mask, other=1.0)
    tl.store(y_ptr + offs, (e / s).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    """Drop-in for the problem's Model (no parameters): softmax over the last dimension."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x2 = x.reshape(-1, shape[-1]).contiguous()
        rows, cols = x2.shape
        row_max = torch.empty(rows, dtype=torch.float32, device=x.device)
        row_sum = torch.empty(rows, dtype=torch.float32, device=x.device)
        exps = torch.empty((rows, cols), dtype=torch.float32, device=x.device)
        y = torch.empty_like(x2)
        _row_max_kernel[(rows,)](x2, row_max, cols, x2.stride(0), BLOCK=BLOCK, num_warps=4)
        _exp_sum_kernel[(rows,)](x2, row_max, exps, row_sum, cols, x2.stride(0), BLOCK=BLOCK, num_warps=4)
        n = rows * cols
        _normalize_kernel[(triton.cdiv(n, FLAT_BLOCK),)](exps, row_sum, y, cols, n, FLAT_BLOCK=FLAT_BLOCK,
                                                          num_warps=4)
        return y.reshape(shape)
