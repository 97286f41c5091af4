"""Pointwise (1x1) convolution as per-output-channel scalar loops (Triton): defect ``scalar_channel_loop``.

What it does: one program per ``(n, k, block of BLOCK = 256 pixels)``. It
loops over the ``C`` input channels at run time; each step loads one scalar
weight ``w[k, c]`` and the ``BLOCK`` pixels of input channel ``c`` and does a
float32 multiply-add, i.e. each output channel is its own dot product over
``C`` computed with vector FMAs. The bias is added at the end; accumulation is
float32, so the result is correct.

Why it is slow: a 1x1 convolution over NCHW is exactly a batched GEMM,
``Y[n] (K x HW) = W (K x C) @ X[n] (C x HW)``, and this kernel computes it as
``K`` independent matrix-vector products. There are no tensor cores (scalar
FMAs only), the input image ``X[n]`` is re-read from L2 once per output
channel (256 times) instead of once per tile of output channels, and each
loop step waits on its own loads.

Measured by KernelGate on an H200 (``kernelgate run --quick``, the bundled suite
at commit 8448562, evidence/h200-results/2026-12-03-8448562; torch 2.11, Triton
3.6), workload fp16-128x256x56x56-k256: 6.04 ms against 0.427 ms for PyTorch
(14.1x slower, E_lib 0.071), 0.0985 ms at the memory-bound roofline floor
(U_roof 0.016): verdict authoring_defect. Two runs at commit 6becf33 on another
H200 agreed within 2%.

The fix (see ``submissions/triton-reference/conv2d_1x1.py``): treat it as the
GEMM it is: a program computes a ``BLOCK_K`` output channels x ``BLOCK_P``
pixels tile with ``tl.dot`` over ``BLOCK_C`` channel chunks, so every loaded
input value is reused ``BLOCK_K`` times from shared memory and the math runs
on tensor cores.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 256


@triton.jit
def _conv1x1_scalar_kernel(x_ptr, w_ptr, b_ptr, y_ptr, C, K, HW, BLOCK: tl.constexpr):
    nk = tl.program_id(0)
    n = nk // K
    k = nk % K
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < HW
    x_img = x_ptr + n.to(tl.int64) * C * HW
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for c in range(0, C):
        wv = tl.load(w_ptr + k * C + c).to(tl.float32)
        xv = tl.load(x_img + c * HW + offs, mask=mask, other=0.0).to(tl.float32)
        acc += wv * xv
    acc += tl.load(b_ptr + k).to(tl.float32)
    y_row = y_ptr + (n.to(tl.int64) * K + k) * HW
    tl.store(y_row + offs, acc.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    """Drop-in for the problem's Model: keeps ``self.conv`` for its parameters, never calls it."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=1, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n, c, h, w = x.shape
        k = self.conv.out_channels
        weight = self.conv.weight.reshape(k, c).contiguous()
        y = torch.empty((n, k, h, w), dtype=x.dtype, device=x.device)
        hw = h * w
        grid = (n * k, triton.cdiv(hw, BLOCK))
        _conv1x1_scalar_kernel[grid](x, weight, self.conv.bias, y, c, k, hw, BLOCK=BLOCK, num_warps=4)
        return y
