"""Exact GELU with one element per program (Triton): defect ``one_elem_per_program``.

What it does: the grid has one program per element (``grid = (numel,)``);
each program loads the single scalar at ``x_ptr + pid`` (no ``tl.arange``),
computes ``0.5 * x * (1 + erf(x / sqrt(2)))`` in float32 and stores it. The
math is the exact erf form, so the result matches ``F.gelu``.

Why it is slow: this is CUDA's "one thread per element" habit carried over to
Triton, where a program is a whole block of threads, not a thread. Every
element becomes its own thread block (one warp, 32 lanes all doing the same
scalar work), so a 16384 x 8192 tensor launches 134 million blocks: the
block scheduler, not HBM, sets the pace, and each block's one 2-byte load
fetches a whole sector.

Measured by KernelGate on an H200 (``kernelgate run --quick``, the bundled suite
at commit 8448562, evidence/h200-results/2026-12-03-8448562; torch 2.11, Triton
3.6), workload fp16-16384x8192: 80.6 ms against 0.172 ms for PyTorch (468x
slower, E_lib 0.0021), 0.129 ms at the memory-bound roofline floor (U_roof
0.0016): verdict authoring_defect. Two runs at commit 6becf33 on another H200
agreed within 1%.

The fix (see ``submissions/triton-reference/gelu.py``): each program handles
a contiguous ``BLOCK`` of 1024-4096 elements with
``offs = pid * BLOCK + tl.arange(0, BLOCK)`` and a mask, ``num_warps`` 4-8,
so loads are vectorised and the grid is a few tens of thousands of programs.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gelu_scalar_kernel(x_ptr, y_ptr):
    pid = tl.program_id(0).to(tl.int64)
    x = tl.load(x_ptr + pid).to(tl.float32)
    y = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
    tl.store(y_ptr + pid, y.to(y_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    """Drop-in for the problem's Model (no parameters): elementwise exact GELU."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x.contiguous()
        y = torch.empty_like(xc)
        _gelu_scalar_kernel[(xc.numel(),)](xc, y, num_warps=1)
        return y.view(x.shape)
