"""3x3 convolution as an implicit GEMM with one fixed, modest configuration (Triton): defect ``implicit_gemm_untuned``.

What it does: the convolution is computed as the GEMM
``Y (N*H*W pixels x K) = patches (N*H*W x C*9) @ weights (C*9 x K)`` without
materialising the patches. A 2-D grid of ``cdiv(N*H*W, 64) x cdiv(K, 64)``
programs; each program owns 64 output pixels x 64 output channels, loops over
the 9 taps (unrolled) and over the input channels in chunks of 32, gathers a
64 x 32 patch tile straight from the NCHW input (masked for the zero padding)
and a 32 x 64 weight tile, and accumulates them with ``tl.dot`` in float32
(``num_warps = 4``, ``num_stages = 2``); the bias is added in the epilogue. It
is correct and uses tensor cores.

Why it trails cuDNN (the convolution "structural residual"):

* NCHW layout: along the reduction (channel) axis consecutive elements are
  ``H*W`` apart, so every patch tile is a 32-way gather of short pixel runs
  rather than a contiguous (NHWC) block that a TMA or vectorised load could
  fetch;
* the weight tile ``w[k, c, r, s]`` is read with a stride of 9 elements along
  ``c`` and ``C*9`` along ``k``: uncoalesced, only rescued by the L2;
* 64 x 64 x 32 tiles with 2 stages: little reuse per loaded byte and too
  shallow a pipeline to hide the gather latency; no autotuning, no grouped
  program ordering.

Measured by KernelGate on an H200 (``kernelgate run --quick``, the bundled suite
at commit 8448562, evidence/h200-results/2026-12-03-8448562; torch 2.11, Triton
3.6), workload fp16-64x128x112x112-k128: 3.24 ms against 0.987 ms for PyTorch
(3.3x slower, E_lib 0.3), 0.326 ms at the compute-bound roofline floor (U_roof
0.1): verdict authoring_defect. Two runs at commit 6becf33 on another H200
agreed within 1%. KernelGate does not score this gap as a structural residual:
that needs U_roof of at least 0.25 for a compute-bound workload, and this kernel
is about 10x off the floor.

The fix (see ``submissions/triton-reference/conv2d_3x3.py``): transform the
input to channels-last (or fuse that transform into the load), pre-pack the
weights to ``(r, s, c, k)`` once, and use 128 x 128 x 64 tiles with 3-4 stages
and grouped ordering, tuned per shape.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_M = 64
BLOCK_N = 64
BLOCK_K = 32


@triton.jit
def _conv3x3_igemm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, NB, C, K, H, W,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                          IEEE: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    HW = H * W
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_c = tl.arange(0, BLOCK_K)
    m_ok = offs_m < NB * HW
    n_ok = offs_n < K
    img = offs_m // HW
    pix = offs_m % HW
    oh = pix // W
    ow = pix % W
    x_img = img.to(tl.int64) * C * HW
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for r in tl.static_range(3):
        for s in tl.static_range(3):
            ih = oh + r - 1
            iw = ow + s - 1
            pix_ok = m_ok & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            x_base = x_img + ih * W + iw
            for c0 in range(0, C, BLOCK_K):
                cc = c0 + offs_c
                c_ok = cc < C
                a = tl.load(x_ptr + x_base[:, None] + cc[None, :] * HW,
                            mask=pix_ok[:, None] & c_ok[None, :], other=0.0)
                b = tl.load(w_ptr + offs_n[None, :] * (C * 9) + cc[:, None] * 9 + (r * 3 + s),
                            mask=c_ok[:, None] & n_ok[None, :], other=0.0)
                if IEEE:
                    acc = tl.dot(a, b, acc, input_precision="ieee")
                else:
                    acc = tl.dot(a, b, acc)
    acc += tl.load(b_ptr + offs_n, mask=n_ok, other=0.0).to(tl.float32)[None, :]
    y_offs = (img.to(tl.int64) * K * HW + pix)[:, None] + offs_n[None, :] * HW
    tl.store(y_ptr + y_offs, acc.to(y_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


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
        grid = (triton.cdiv(n * h * w, BLOCK_M), triton.cdiv(k, BLOCK_N))
        _conv3x3_igemm_kernel[grid](x, weight, self.conv.bias, y, n, c, k, h, w,
                                    BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                                    IEEE=x.dtype == torch.float32, num_warps=4, num_stages=2)
        return y
