"""relu(x + y) as one flat, vectorized TileLang kernel.

Both inputs are viewed as 1D buffers. Each 256-thread block handles a 4096-
element tile (2048 for fp32): every thread moves two 16-byte vectors of each
input and one of the output per step, so the kernel is a single streaming pass
(read x, read y, write out). The add and the clamp run in the input dtype: the
sum of two values rounded once equals the fp32-then-round result, so no
conversion is needed. A bounds guard is compiled in only when the element count
is not a multiple of the tile.
"""
import tilelang
import tilelang.language as T
import torch
import torch.nn as nn

_DTYPES = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}
_ELEM_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}


@tilelang.jit(out_idx=[-1])
def add_relu_kernel(n, dtype, threads=256):
    block = threads * 2 * (16 // _ELEM_BYTES[dtype])
    guarded = n % block != 0

    @T.prim_func
    def main(X: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype), Out: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, block), threads=threads) as bx:
            for i in T.Parallel(block):
                if not guarded or bx * block + i < n:
                    Out[bx * block + i] = T.max(X[bx * block + i] + Y[bx * block + i], T.cast(0, dtype))

    return main


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = y.contiguous()
        kernel = add_relu_kernel(x.numel(), _DTYPES[x.dtype])
        return kernel(x.view(-1), y.view(-1)).view(x.shape)
