"""Row maximum with one GPU thread per row (TileLang): defect ``tl_serial``.

What it does: each CUDA thread owns one row and scans it with a ``T.serial``
loop, keeping a running fp32 maximum in a register; the result is cast back to
the input dtype. Taking a maximum is exact, so the output matches
``torch.amax`` bit for bit.

Why it is slow: a row of 8192 elements is scanned by a single thread in 8192
dependent steps, so the 32768 rows become only 32768 threads (256 blocks of
128): a handful of warps per SM, nowhere near enough memory parallelism to
keep HBM busy. Each warp-wide load touches 32 different cache lines (the 32
threads read 32 different rows), so the load/store unit replays every load
32 times.

Measured by KernelGate on an H200 (``kernelgate run --quick``, the bundled suite
at commit 8448562, evidence/h200-results/2026-12-03-8448562; torch 2.11,
TileLang 0.1.15), workload fp16-32768x8192: 1.08 ms against 0.293 ms for PyTorch
(3.7x slower, E_lib 0.27), 0.13 ms at the memory-bound roofline floor (U_roof
0.12): verdict authoring_defect. Two runs at commit 6becf33 on another H200
agreed within 1%.

The fix (see ``submissions/tilelang-reference/max_dim.py``): one block per row
(or a tile of rows), each thread loading a contiguous vector of the row with
``T.copy`` into a fragment, and the block combining the partial maxima with
``T.reduce_max``; every load is then coalesced and the kernel runs at memory
bandwidth.
"""

import tilelang
import tilelang.language as T
import torch
import torch.nn as nn

THREADS = 128

_TL_DTYPES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}


@tilelang.jit(out_idx=[-1])
def max_serial_rows(M, N, dtype="float16", threads=THREADS):
    """Builds a kernel for an ``M x N`` input: thread ``i`` of block ``b`` reduces row ``b*threads+i``."""

    @T.prim_func
    def main(
        X: T.Tensor((M, N), dtype),
        Y: T.Tensor((M,), dtype),
    ):
        with T.Kernel(T.ceildiv(M, threads), threads=threads) as bx:
            tx = T.get_thread_binding(0)
            row = bx * threads + tx
            best = T.alloc_var("float32")
            if row < M:
                best = -T.infinity("float32")
                for j in T.serial(N):
                    best = T.max(best, T.cast(X[row, j], "float32"))
                Y[row] = T.cast(best, dtype)

    return main


class ModelNew(nn.Module):
    """Drop-in for the problem's Model (no parameters): amax over the last dimension."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x2 = x.reshape(-1, shape[-1]).contiguous()
        m, n = x2.shape
        kernel = max_serial_rows(m, n, _TL_DTYPES[x.dtype])
        return kernel(x2).reshape(shape[:-1])
