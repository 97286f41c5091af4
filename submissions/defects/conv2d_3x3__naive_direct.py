"""3x3 convolution as a naive direct loop on CUDA cores (Triton): defect ``naive_direct``.

What it does: one program per output row ``(n, k, oh)``; the program holds the
row's ``W`` outputs as a vector (``BLOCK_W = next_pow2(W)``) and loops over the
input channels at run time and over the 3 x 3 taps at compile time. Each step
skips rows that fall in the zero padding, loads one shifted input row (masked
at the left and right edges), loads one scalar weight ``w[k, c, r, s]`` and
does a float32 multiply-add; the bias is added at the end. Every product is
accumulated in float32, so the result is correct.

Why it is slow: convolution is a matrix multiply in disguise
(``N*H*W x K`` outputs, ``C*9`` reduction), and this loop never lets it be
one. There is no tensor-core instruction (every multiply-add is a scalar FMA
on the CUDA cores, about 15x less peak on an H200 than dense fp16 tensor
cores); each input row is re-read from cache once per output channel ``k``
(128-256 times) instead of being staged in shared memory and reused across a
tile of output channels; and the weight is fetched one scalar at a time inside
the innermost loop.

Measured by KernelGate on an H200 (``kernelgate run --quick``, the bundled suite
at commit 8448562, evidence/h200-results/2026-12-03-8448562; torch 2.11, Triton
3.6), workload fp16-64x128x112x112-k128: 50.1 ms against 0.987 ms for PyTorch
(50.7x slower, E_lib 0.02), 0.326 ms at the compute-bound roofline floor (U_roof
0.0065): verdict authoring_defect. Two runs at commit 6becf33 on another H200
agreed within 1%.

The fix (see ``submissions/triton-reference/conv2d_3x3.py``): an implicit
GEMM: a program computes a ``BLOCK_M`` pixels x ``BLOCK_N`` output channels
tile, loads ``BLOCK_M x BLOCK_K`` input patches and ``BLOCK_K x BLOCK_N``
weight tiles for each of the 9 taps and accumulates them with ``tl.dot``
(tensor cores), with a tuned tile size and pipelining.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _conv3x3_direct_kernel(x_ptr, w_ptr, b_ptr, y_ptr, C, K, H, W, BLOCK_W: tl.constexpr):
    nk = tl.program_id(0)
    oh = tl.program_id(1)
    n = nk // K
    k = nk % K
    ow = tl.arange(0, BLOCK_W)
    acc = tl.zeros((BLOCK_W,), dtype=tl.float32)
    x_img = x_ptr + n.to(tl.int64) * C * H * W
    w_k = w_ptr + k * C * 9
    for c in range(0, C):
        x_chan = x_img + c * H * W
        for r in tl.static_range(3):
            ih = oh + r - 1
            if (ih >= 0) & (ih < H):
                for s in tl.static_range(3):
                    iw = ow + s - 1
                    xv = tl.load(x_chan + ih * W + iw, mask=(iw >= 0) & (iw < W), other=0.0).to(tl.float32)
                    wv = tl.load(w_k + c * 9 + r * 3 + s).to(tl.float32)
                    acc += xv * wv
    acc += tl.load(b_ptr + k).to(tl.float32)
    y_row = y_ptr + (n.to(tl.int64) * K + k) * H * W + oh * W
    tl.store(y_row + ow, acc.to(y_ptr.dtype.element_ty), mask=ow < W)


class ModelNew(nn.Module):
    """Drop-in for the problem's Model: keeps ``self.conv`` for its parameters, never calls it."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=1, padding=1, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n, c, h, w = x.shape
        k = self.conv.out_channels
        weight = self.conv.weight.contiguous()
        y = torch.empty((n, k, h, w), dtype=x.dtype, device=x.device)
        block_w = triton.next_power_of_2(w)
        _conv3x3_direct_kernel[(n * k, h)](x, weight, self.conv.bias, y, c, k, h, w, BLOCK_W=block_w,
                                           num_warps=max(1, min(4, block_w // 32)))
        return y
