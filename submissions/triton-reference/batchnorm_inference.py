"""Inference BatchNorm over NCHW with running statistics, one fused flat pass.

y = x * scale[c] + shift[c] with scale = weight * rsqrt(running_var + eps)
and shift = bias - running_mean * scale, computed per program from the
channel parameters (a few scalar loads, L2-resident) so no extra kernel or
temporary is needed. The tensor is streamed as a flat array in blocks of
BLOCK = min(4096, largest power of two <= H*W) elements (8 warps, 16-byte
vector accesses). Because BLOCK <= H*W a block touches at most two (n, c)
planes, so each element picks between two precomputed (scale, shift) pairs
with one compare instead of an integer division per element. Traffic is one
read and one write of x.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _bn_infer_kernel(x_ptr, w_ptr, b_ptr, rm_ptr, rv_ptr, y_ptr, n_elements, C, HW, eps,
                     BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    start = pid.to(tl.int64) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    mask = offs < n_elements
    plane0 = start // HW
    c0 = plane0 % C
    c1 = (plane0 + 1) % C
    w0 = tl.load(w_ptr + c0).to(tl.float32)
    w1 = tl.load(w_ptr + c1).to(tl.float32)
    s0 = w0 / tl.sqrt(tl.load(rv_ptr + c0).to(tl.float32) + eps)
    s1 = w1 / tl.sqrt(tl.load(rv_ptr + c1).to(tl.float32) + eps)
    t0 = tl.load(b_ptr + c0).to(tl.float32) - tl.load(rm_ptr + c0).to(tl.float32) * s0
    t1 = tl.load(b_ptr + c1).to(tl.float32) - tl.load(rm_ptr + c1).to(tl.float32) * s1
    second = offs >= (plane0 + 1) * HW
    scale = tl.where(second, s1, s0)
    shift = tl.where(second, t1, t0)
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = x * scale + shift
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(channels))
        self.bias = nn.Parameter(0.5 * torch.randn(channels))
        self.register_buffer("running_mean", 0.5 * torch.randn(channels))
        self.register_buffer("running_var", 0.5 + torch.rand(channels))
        self.eps = 1e-5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        C = x.shape[1]
        HW = x[0, 0].numel()
        n = x.numel()
        y = torch.empty_like(x)
        block = min(4096, 1 << (HW.bit_length() - 1))
        num_warps = min(8, max(1, block // 256))
        _bn_infer_kernel[(triton.cdiv(n, block),)](
            x, self.weight, self.bias, self.running_mean, self.running_var, y, n, C, HW, self.eps,
            BLOCK=block, num_warps=num_warps)
        return y
