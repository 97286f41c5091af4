"""Tall-skinny GEMM with ``tl.sum(a * b)`` instead of ``tl.dot`` (Triton): defect ``no_tensor_cores``.

What it does: a tiled matmul whose inner product is written out by hand. Each
program owns a 32 x 32 tile of ``C``; for every step of 8 along ``K`` it loads
a 32 x 8 tile of ``A`` and an 8 x 32 tile of ``B``, converts both to float32,
forms the 32 x 8 x 32 broadcast product ``a[:, :, None] * b[None, :, :]`` and
reduces it over the middle axis with ``tl.sum``. The arithmetic is float32
multiply-adds, so the result is correct (more accurate than fp16 tensor
cores, in fact).

Why it is slow: ``tl.sum(a[:, :, None] * b[None, :, :], axis=1)`` is a matrix
product the compiler cannot recognise, so it never becomes an MMA/wgmma
instruction. Every multiply-add runs on the CUDA cores (on an H200 dense fp16
tensor cores are about 15x the FP32 FMA rate), the 3-D product tensor lives in
registers and its reduction needs cross-lane shuffles, and the small
``BLOCK_K = 8`` steps keep the loads narrow. For this shape (``N`` = 192, so
each row of ``A`` is used by only 6 column tiles) the GEMM would be close to
memory-bound with tensor cores; without them it is compute-bound many times
over.

Measured by KernelGate on an H200 (``kernelgate run --quick``, the bundled suite
at commit 8448562, evidence/h200-results/2026-12-03-8448562; torch 2.11, Triton
3.6), workload fp16-32768x192x4096: 1.34 ms against 0.0921 ms for PyTorch (14.5x
slower, E_lib 0.069), 0.0709 ms at the compute-bound roofline floor (U_roof
0.053): verdict authoring_defect. Two runs at commit 6becf33 on another H200
agreed within 1%.

The fix (see ``submissions/triton-reference/gemm_tall_skinny.py``):
``acc = tl.dot(a, b, acc)`` on tiles of e.g. 128 x 64 (or 128 x 192/256 to
cover all of ``N``) x 64 in the input dtype, with a float32 accumulator.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_M = 32
BLOCK_N = 32
BLOCK_K = 8


@triton.jit
def _matmul_sum_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                       stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_ok = offs_m < M
    n_ok = offs_n < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + offs_k
        k_ok = kk < K
        a = tl.load(a_ptr + offs_m[:, None].to(tl.int64) * stride_am + kk[None, :] * stride_ak,
                    mask=m_ok[:, None] & k_ok[None, :], other=0.0).to(tl.float32)
        b = tl.load(b_ptr + kk[:, None].to(tl.int64) * stride_bk + offs_n[None, :] * stride_bn,
                    mask=k_ok[:, None] & n_ok[None, :], other=0.0).to(tl.float32)
        acc += tl.sum(a[:, :, None] * b[None, :, :], axis=1)
    c_ptrs = c_ptr + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


class ModelNew(nn.Module):
    """Drop-in for the problem's Model (no parameters): ``C = A @ B``."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        m, k = a.shape
        n = b.shape[1]
        c = torch.empty((m, n), dtype=a.dtype, device=a.device)
        grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
        _matmul_sum_kernel[grid](a, b, c, m, n, k,
                                 a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                                 BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=4)
        return c
