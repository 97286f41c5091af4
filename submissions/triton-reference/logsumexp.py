"""Log-sum-exp over the last dimension of a 2D tensor, one row per program.

Numerically safe form max + log(sum(exp(x - max))) in fp32. Rows up to 16384
columns are loaded whole into registers (BLOCK = next_power_of_2(cols),
num_warps = BLOCK / 512 clamped to 4..16) and reduced with tl.max / tl.sum.
Longer rows (e.g. 30000) stream TILE = 4096 chunks once with an online
(max, rescaled sum) pair updated per chunk, so every element is read exactly
once and exponentiated once. Traffic: rows * cols * ELEM read, rows written.
The row length is a compile-time constant (one specialization per width),
so the alignment analysis keeps 16-byte vector loads for any width that is
a multiple of 8 elements.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_REGISTER_ROW = 16384
TILE = 4096


@triton.jit
def _lse_row_kernel(x_ptr, y_ptr, N_COLS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N_COLS + cols, mask=cols < N_COLS, other=-float("inf")).to(tl.float32)
    row_max = tl.max(x, axis=0)
    total = tl.sum(tl.exp(x - row_max), axis=0)
    tl.store(y_ptr + row, (row_max + tl.log(total)).to(y_ptr.dtype.element_ty))


@triton.jit
def _lse_looped_kernel(x_ptr, y_ptr, N_COLS: tl.constexpr, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    lanes = tl.arange(0, TILE)
    x_row = x_ptr + row * N_COLS
    run_max = tl.full([1], -float("inf"), tl.float32)
    run_sum = tl.zeros([1], dtype=tl.float32)
    for start in range(0, N_COLS, TILE):
        cols = start + lanes
        x = tl.load(x_row + cols, mask=cols < N_COLS, other=-float("inf")).to(tl.float32)
        new_max = tl.maximum(run_max, tl.max(x, axis=0))
        run_sum = run_sum * tl.exp(run_max - new_max) + tl.sum(tl.exp(x - tl.max(new_max, axis=0)), axis=0)
        run_max = new_max
    out = run_max + tl.log(run_sum)
    tl.store(y_ptr + row + tl.arange(0, 1), out.to(y_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_cols = x.shape[-1]
        rows = x.numel() // n_cols
        y = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
        block = triton.next_power_of_2(n_cols)
        if block <= MAX_REGISTER_ROW:
            num_warps = min(16, max(4, block // 512))
            _lse_row_kernel[(rows,)](x, y, N_COLS=n_cols, BLOCK=block, num_warps=num_warps)
        else:
            _lse_looped_kernel[(rows,)](x, y, N_COLS=n_cols, TILE=TILE, num_warps=8)
        return y
