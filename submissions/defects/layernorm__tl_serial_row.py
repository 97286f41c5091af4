"""LayerNorm with one GPU thread per row (TileLang): defect ``tl_serial_row``.

What it does: each CUDA thread owns one whole row. It walks the row three
times with ``T.serial`` loops: once to accumulate the mean, once to accumulate
the variance around that mean, once to write ``(x - mean) * rstd * w + b``.
All arithmetic is fp32, so the result is correct within tolerance.

Why it is slow: this is the classic "passes the checker, runs many times
slower than PyTorch" kernel. A row of 4096 elements is reduced by one
thread in 4096 dependent steps, so there is no parallelism inside a row; the
32768 rows give only 32768 threads (256 blocks of 128), a few warps per SM,
far too few to hide memory latency. Neighbouring threads of a warp read
addresses one row (8 KB) apart, so every warp-wide load touches 32 different
cache lines instead of one, and the row is read from memory twice more than
needed (three passes).

Measured by KernelGate on an H200 (``kernelgate run --quick``, the bundled suite
at commit 8448562, evidence/h200-results/2026-12-03-8448562; torch 2.11,
TileLang 0.1.15), workload fp16-32768x4096: 3.14 ms against 0.202 ms for PyTorch
(15.5x slower, E_lib 0.064), 0.129 ms at the memory-bound roofline floor (U_roof
0.041): verdict authoring_defect. Two runs at commit 6becf33 on another H200
agreed within 1%. (KernelBench's original of this pattern was reported >300x
slower; the H200's large L1 absorbs part of the uncoalesced traffic here.)

The fix (see ``submissions/tilelang-reference/layernorm.py``): one block per
row (or a few rows per block), the row loaded once into a fragment with
``T.copy``, mean and variance computed with ``T.reduce_sum`` across the
block's threads, and the normalised row written back with a ``T.Parallel``
loop, so that every load is coalesced and each row's bytes cross DRAM once.
"""

import tilelang
import tilelang.language as T
import torch
import torch.nn as nn

THREADS = 128
EPS = 1e-5

_TL_DTYPES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}


@tilelang.jit(out_idx=[-1])
def layernorm_serial_rows(M, N, dtype="float16", threads=THREADS):
    """Builds a kernel for an ``M x N`` input: thread ``i`` of block ``b`` normalises row ``b*threads+i``."""

    @T.prim_func
    def main(
        X: T.Tensor((M, N), dtype),
        Wt: T.Tensor((N,), dtype),
        Bs: T.Tensor((N,), dtype),
        Y: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(M, threads), threads=threads) as bx:
            tx = T.get_thread_binding(0)
            row = bx * threads + tx
            total = T.alloc_var("float32")
            sq = T.alloc_var("float32")
            if row < M:
                total = 0.0
                for j in T.serial(N):
                    total += T.cast(X[row, j], "float32")
                mean = total / N
                sq = 0.0
                for j in T.serial(N):
                    d = T.cast(X[row, j], "float32") - mean
                    sq += d * d
                rstd = T.rsqrt(sq / N + EPS)
                for j in T.serial(N):
                    xv = T.cast(X[row, j], "float32")
                    y = (xv - mean) * rstd * T.cast(Wt[j], "float32") + T.cast(Bs[j], "float32")
                    Y[row, j] = T.cast(y, dtype)

    return main


class ModelNew(nn.Module):
    """Drop-in for the problem's Model: same ``weight``/``bias`` parameters, TileLang forward."""

    def __init__(self, cols: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(cols))
        self.bias = nn.Parameter(torch.zeros(cols))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x2 = x.reshape(-1, shape[-1]).contiguous()
        m, n = x2.shape
        kernel = layernorm_serial_rows(m, n, _TL_DTYPES[x.dtype])
        w = self.weight.to(x.dtype).contiguous()
        b = self.bias.to(x.dtype).contiguous()
        return kernel(x2, w, b).reshape(shape)
