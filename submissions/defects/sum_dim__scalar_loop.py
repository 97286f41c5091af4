"""Row sum with one scalar load per loop iteration (Triton): defect ``scalar_loop``.

What it does: one program per row; a Python ``for`` loop over the columns
loads one element at a time (``tl.load(ptr + j)``, no ``tl.arange``) and adds
it to a float32 scalar accumulator; the total is cast to the output dtype.

Why it is slow: Triton's unit of parallelism is the block of a program, and
this program's block is a single scalar: all 32 lanes of the warp load the
same address and add the same number, so 31 of 32 lanes do redundant work,
each iteration waits on its own load (the loop-carried sum gives the compiler
nothing to vectorise or pipeline), and a row of 8192 elements costs 8192
dependent memory round trips. Total parallelism is one warp per row.

Measured by KernelGate on an H200 (``kernelgate run --quick``, the bundled suite
at commit 8448562, evidence/h200-results/2026-12-03-8448562; torch 2.11, Triton
3.6), workload fp16-32768x8192: 1.83 ms against 0.197 ms for PyTorch (9.3x
slower, E_lib 0.11), 0.13 ms at the memory-bound roofline floor (U_roof 0.071):
verdict authoring_defect. Two runs at commit 6becf33 on another H200 agreed
within 2%.

The fix (see ``submissions/triton-reference/sum_dim.py``): load a vector of
``BLOCK`` columns per iteration with ``tl.arange`` (several thousand elements,
``num_warps`` 4-8), accumulate a float32 vector and reduce it once with
``tl.sum`` at the end; for short, many rows put several rows in one program.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _sum_scalar_loop_kernel(x_ptr, y_ptr, n_cols, stride_x):
    row = tl.program_id(0)
    row_ptr = x_ptr + row.to(tl.int64) * stride_x
    acc = 0.0
    for j in range(0, n_cols):
        acc += tl.load(row_ptr + j).to(tl.float32)
    tl.store(y_ptr + row, acc.to(y_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    """Drop-in for the problem's Model (no parameters): sum over the last dimension."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x2 = x.reshape(-1, shape[-1]).contiguous()
        rows, cols = x2.shape
        y = torch.empty(rows, dtype=x.dtype, device=x.device)
        _sum_scalar_loop_kernel[(rows,)](x2, y, cols, x2.stride(0), num_warps=1)
        return y.reshape(shape[:-1])
