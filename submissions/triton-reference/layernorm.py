"""LayerNorm over the last dimension (affine weight and bias), one row per program.

The whole row is held in registers: BLOCK = next_power_of_2(cols) with
num_warps = BLOCK / 512 (clamped to 4..16), i.e. 8-16 elements per thread.
The row is read once and written once, so DRAM traffic is the minimum
2 * rows * cols * ELEM. Statistics are exact two-pass in fp32 on the
register-resident row (mean first, then the centred second moment), which
stays accurate for inputs with a large mean; the affine epilogue is fused.
The row length is a compile-time constant (one specialization per width),
so the alignment analysis keeps 16-byte vector loads for any width that is
a multiple of 8 elements.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, eps, N_COLS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N_COLS
    x = tl.load(x_ptr + row * N_COLS + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N_COLS
    xc = tl.where(mask, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / N_COLS
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = xc * rstd * w + b
    tl.store(y_ptr + row * N_COLS + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, cols: int):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(cols))
        self.bias = nn.Parameter(0.5 * torch.randn(cols))
        self.eps = 1e-5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_cols = x.shape[-1]
        rows = x.numel() // n_cols
        y = torch.empty_like(x)
        block = triton.next_power_of_2(n_cols)
        num_warps = min(16, max(4, block // 512))
        _layernorm_kernel[(rows,)](x, self.weight, self.bias, y, self.eps, N_COLS=n_cols,
                                   BLOCK=block, num_warps=num_warps)
        return y
