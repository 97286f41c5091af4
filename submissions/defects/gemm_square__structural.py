"""Tiled ``tl.dot`` GEMM with one fixed, untuned configuration (Triton): defect ``structural``.

What it does: the textbook Triton matmul. A 2-D grid of
``cdiv(M, 64) x cdiv(N, 64)`` programs; each program owns a 64 x 64 tile of
``C``, walks ``K`` in steps of 32 loading a 64 x 32 tile of ``A`` and a
32 x 64 tile of ``B``, and accumulates ``tl.dot`` into a float32 accumulator
(``num_warps = 4``, ``num_stages = 2``). float32 inputs use
``input_precision="ieee"`` (no TF32). It is correct and reasonably fast.

Why it is slower than cuBLAS (the "structural residual", not a blunder):

* 64 x 64 tiles are small for an H100/H200: each loaded byte is reused 64
  times, so the kernel needs twice the shared-memory and L2 bandwidth per FLOP
  of a 128 x 256 tile, and one warpgroup per tile cannot keep the wgmma units
  busy;
* ``num_stages = 2`` leaves a single load in flight behind the math, too
  shallow to hide HBM/L2 latency;
* the grid is walked in plain row-major program order (no grouped or
  swizzled ordering), so consecutive programs share few ``A``/``B`` tiles in
  L2;
* no autotuning over tile shape, warps and stages for the problem size, and
  no persistent/TMA/warp-specialised schedule of the kind cuBLAS uses.

Measured by KernelGate on an H200 (``kernelgate run --quick``, the bundled suite
at commit 8448562, evidence/h200-results/2026-12-03-8448562; torch 2.11, Triton
3.6), workload fp16-8192x8192x8192: 3.33 ms against 1.43 ms for PyTorch (2.3x
slower, E_lib 0.43), 1.51 ms at the compute-bound roofline floor, the calibrated
fp16 tensor-core peak (U_roof 0.45): verdict structural_residual. Two runs at
commit 6becf33 on another H200 agreed within 1%.

The fix (see ``submissions/triton-reference/gemm_square.py``): 128 x 128 (or
128 x 256) tiles with ``BLOCK_K = 64``, 3-4 stages, 8 warps, grouped
("super-grouped") program ordering, chosen with ``triton.autotune`` per shape.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_M = 64
BLOCK_N = 64
BLOCK_K = 32


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                   stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, IEEE: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None].to(tl.int64) * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None].to(tl.int64) * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = offs_k < K - k0
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & (offs_n[None, :] < N), other=0.0)
        if IEEE:
            acc = tl.dot(a, b, acc, input_precision="ieee")
        else:
            acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


class ModelNew(nn.Module):
    """Drop-in for the problem's Model (no parameters): ``C = A @ B``."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        m, k = a.shape
        n = b.shape[1]
        c = torch.empty((m, n), dtype=a.dtype, device=a.device)
        grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
        _matmul_kernel[grid](a, b, c, m, n, k,
                             a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                             BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                             IEEE=a.dtype == torch.float32, num_warps=4, num_stages=2)
        return c
