"""SiLU (x * sigmoid(x)) as one flat, vectorized TileLang kernel.

The input is viewed as a 1D buffer. Each 256-thread block handles a 4096-
element tile (2048 for fp32): every thread loads two 16-byte vectors and
computes x / (1 + 2^(-x * log2 e)) in fp32 registers with the hardware exp2 and
a fast reciprocal (the op is memory-bound, so the arithmetic must stay cheap),
then stores in the input dtype: a single streaming pass. A bounds guard is
compiled in only when the element count is not a multiple of the tile.
"""
import tilelang
import tilelang.language as T
import torch
import torch.nn as nn

_DTYPES = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}
_ELEM_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}
_LOG2E = 1.4426950408889634


@tilelang.jit(out_idx=[-1])
def silu_kernel(n, dtype, threads=256):
    block = threads * 2 * (16 // _ELEM_BYTES[dtype])
    guarded = n % block != 0

    @T.prim_func
    def main(X: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, block), threads=threads) as bx:
            for i in T.Parallel(block):
                if not guarded or bx * block + i < n:
                    x = T.cast(X[bx * block + i], "float32")
                    Y[bx * block + i] = T.cast(x * T.fast_rcp(1.0 + T.exp2(x * -_LOG2E)), dtype)

    return main


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        kernel = silu_kernel(x.numel(), _DTYPES[x.dtype])
        return kernel(x.view(-1)).view(x.shape)
