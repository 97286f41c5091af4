"""RMSNorm over the last dimension (affine weight, no bias), one row per program.

The row stays in registers (BLOCK = next_power_of_2(cols), num_warps =
BLOCK / 512 clamped to 4..16): one read, one fp32 sum of squares reduced with
tl.sum, and the scale-by-rsqrt and weight multiply fused before the single
write. DRAM traffic is the minimum 2 * rows * cols * ELEM.
The row length is a compile-time constant (one specialization per width),
so the alignment analysis keeps 16-byte vector loads for any width that is
a multiple of 8 elements.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, y_ptr, eps, N_COLS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N_COLS
    x = tl.load(x_ptr + row * N_COLS + cols, mask=mask, other=0.0).to(tl.float32)
    ms = tl.sum(x * x, axis=0) / N_COLS
    rstd = 1.0 / tl.sqrt(ms + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = x * rstd * w
    tl.store(y_ptr + row * N_COLS + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, cols: int):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(cols))
        self.eps = 1e-6

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_cols = x.shape[-1]
        rows = x.numel() // n_cols
        y = torch.empty_like(x)
        block = triton.next_power_of_2(n_cols)
        num_warps = min(16, max(4, block // 512))
        _rmsnorm_kernel[(rows,)](x, self.weight, y, self.eps, N_COLS=n_cols, BLOCK=block, num_warps=num_warps)
        return y
