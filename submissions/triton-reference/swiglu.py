"""SwiGLU gate silu(a) * b fused into one flat, vectorized Triton pass.

The library computes silu(a) into a temporary and multiplies in a second
kernel (5 passes over memory); here both inputs are read once and the result
written once (3 passes). fp32 math, one rounding to the output dtype.
BLOCK = 4096 elements per program with 8 warps (16 elements per thread,
16-byte vector accesses).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 4096
NUM_WARPS = 8


@triton.jit
def _swiglu_kernel(a_ptr, b_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    a = tl.load(a_ptr + offs, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask).to(tl.float32)
    out = a / (1.0 + tl.exp(-a)) * b
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a = a.contiguous()
        b = b.contiguous()
        out = torch.empty_like(a)
        n = a.numel()
        _swiglu_kernel[(triton.cdiv(n, BLOCK),)](a, b, out, n, BLOCK=BLOCK, num_warps=NUM_WARPS)
        return out
