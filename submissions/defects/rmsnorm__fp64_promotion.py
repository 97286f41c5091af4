"""RMSNorm computed on float64 copies of its tensors (Triton): defect ``fp64_promotion``.

What it does: "for numerical stability" the forward upcasts the input and the
weight to float64 tensors (``x.double()``), runs a one-program-per-row Triton
kernel that reads, computes and writes float64, and casts the float64 result
back to the input dtype. Float64 is more accurate than needed, so the result is
correct.

Why it is slow: the dtype round trip happens in memory, not in registers. For
an fp16 input each element costs 2 (read x) + 8 (write x64) + 8 (read x64) +
8 (write y64) + 8 (read y64) + 2 (write y) = 36 bytes of DRAM traffic instead
of 4, plus three extra launches. A memory-bound op pays that ~9x directly. The
computation needs nothing beyond fp32 accumulation: RMSNorm's sum of squares
over a few thousand terms is well within fp32's accuracy. (An earlier version
promoted to fp64 only in registers; on an H200, with half-rate FP64 and no
spills, that cost just 1.17x, which is why this kernel keeps the promotion in
the tensors, as generated code often does.)

The fix (see ``submissions/triton-reference/rmsnorm.py``): load in the input
dtype, accumulate the sum of squares in float32 (``x.to(tl.float32)``), use
float32 ``rsqrt``, and store straight into an output of the input dtype.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

EPS = 1e-6


@triton.jit
def _rmsnorm_fp64_kernel(x_ptr, w_ptr, y_ptr, n_cols, stride_x, stride_y, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    mean_sq = tl.sum(x * x, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(mean_sq + eps)
    tl.store(y_ptr + row * stride_y + cols, x * rstd * w, mask=mask)


class ModelNew(nn.Module):
    """Drop-in for the problem's Model: same ``weight`` parameter, Triton forward."""

    def __init__(self, cols: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(cols))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x64 = x.reshape(-1, shape[-1]).contiguous().double()
        rows, cols = x64.shape
        y64 = torch.empty_like(x64)
        w64 = self.weight.double().contiguous()
        _rmsnorm_fp64_kernel[(rows,)](x64, w64, y64, cols, x64.stride(0), y64.stride(0), EPS,
                                      BLOCK=triton.next_power_of_2(cols), num_warps=8)
        return y64.to(x.dtype).reshape(shape)
