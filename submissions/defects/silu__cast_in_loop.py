"""SiLU with tiny blocks and a float64 cast inside the inner loop (Triton): defect ``cast_in_loop``.

What it does: each program owns ``INNER * BLOCK`` = 4 x 32 consecutive
elements and walks them in a runtime loop of 32-element steps (``BLOCK = 32``,
``num_warps = 1``, one element per lane). Inside the loop every chunk is cast
to float64, ``x / (1 + exp(-x))`` is evaluated in float64, and the result is
cast back to float32 and then to the output dtype. Float64 is more than accurate enough, so the
result is correct.

Why it is slow: three habits compound. (1) The blocks are tiny: one warp and
one element per lane per step, so each load is a 64-byte (fp16) request
instead of a vectorised 16-byte-per-lane one, and a 16384 x 8192 tensor
needs a million programs. (2) The loop is a real ``scf.for`` with a load at
the top and a store at the bottom, so each step waits on its own load; there
is nothing in flight while the math runs. (3) The per-step cast to float64
makes ``exp`` a long double-precision software sequence instead of one
``ex2.approx`` instruction.

Measured by KernelGate on an H200 (``kernelgate run --quick``, the bundled suite
at commit 8448562, evidence/h200-results/2026-12-03-8448562; torch 2.11, Triton
3.6), workload fp16-16384x8192: 0.676 ms against 0.139 ms for PyTorch (4.9x
slower, E_lib 0.21), 0.129 ms at the memory-bound roofline floor (U_roof 0.19):
verdict authoring_defect. Two runs at commit 6becf33 on another H200 agreed
within 3%.

The fix (see ``submissions/triton-reference/silu.py``): one flat step per
program with ``BLOCK`` 1024-4096 and ``num_warps`` 4-8, math in float32
(``x.to(tl.float32)`` once, ``tl.sigmoid`` or ``1 / (1 + tl.exp(-x))``), cast
once on the store.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 32
INNER = 4


@triton.jit
def _silu_cast_loop_kernel(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr, INNER: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * (BLOCK * INNER)
    for i in range(0, INNER):
        offs = base + i * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n_elements
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float64)
        y = x / (1.0 + tl.exp(-x))
        tl.store(y_ptr + offs, y.to(tl.float32).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    """Drop-in for the problem's Model (no parameters): elementwise SiLU."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x.contiguous()
        y = torch.empty_like(xc)
        n = xc.numel()
        grid = (triton.cdiv(n, BLOCK * INNER),)
        _silu_cast_loop_kernel[grid](xc, y, n, BLOCK=BLOCK, INNER=INNER, num_warps=1)
        return y.view(x.shape)
