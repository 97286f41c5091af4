"""relu(x + y) as one flat, vectorized Triton pass.

Both inputs are read once and the result written once (3 * n * ELEM bytes,
the minimum). Each program owns BLOCK = 4096 contiguous elements with 8 warps,
i.e. 16 elements per thread: two 16-byte loads per input for fp16/bf16, four
for fp32. The sum is formed in fp32 and rounded once to the output dtype.
Offsets are 64-bit so the kernel is safe beyond 2**31 elements.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 4096
NUM_WARPS = 8


@triton.jit
def _add_relu_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=mask).to(tl.float32)
    out = tl.maximum(x + y, 0.0)
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = y.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        _add_relu_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK, num_warps=NUM_WARPS)
        return out
