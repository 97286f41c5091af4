"""Exact (erf) GELU as one flat, vectorized TileLang kernel.

The input is viewed as a 1D buffer. Each 256-thread block handles a 4096-
element tile (2048 for fp32): every thread loads two 16-byte vectors, computes
0.5 * x * (1 + erf(x / sqrt(2))) in fp32 registers and stores the result in the
input dtype, so the kernel is a single streaming pass over memory. A bounds
guard is compiled in only when the element count is not a multiple of the tile.
"""
import tilelang
import tilelang.language as T
import torch
import torch.nn as nn

_DTYPES = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}
_ELEM_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}
_INV_SQRT2 = 0.7071067811865476


@tilelang.jit(out_idx=[-1])
def gelu_kernel(n, dtype, threads=256):
    block = threads * 2 * (16 // _ELEM_BYTES[dtype])
    guarded = n % block != 0

    @T.prim_func
    def main(X: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, block), threads=threads) as bx:
            for i in T.Parallel(block):
                if not guarded or bx * block + i < n:
                    x = T.cast(X[bx * block + i], "float32")
                    Y[bx * block + i] = T.cast(0.5 * x * (1.0 + T.erf(x * _INV_SQRT2)), dtype)

    return main


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        kernel = gelu_kernel(x.numel(), _DTYPES[x.dtype])
        return kernel(x.view(-1)).view(x.shape)
