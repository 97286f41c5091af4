"""Inference BatchNorm over NCHW (running statistics, affine) as one streaming TileLang kernel.

The input is viewed as (N*C, H*W) planes; one 256-thread block per plane. The
block folds the four per-channel parameters into one fp32 scale and shift
once (scale = w * rsqrt(var + eps), shift = b - mean * scale), then streams
the plane with 16-byte vector loads and stores computing x * scale + shift in
fp32: one read and one write of the tensor, no per-element parameter gathers.
The plane is walked in whole thread-block strides (the loop is unrolled so all
of a thread's loads are in flight at once); a vector-granular guard masks the
last partial stride.
"""
import tilelang
import tilelang.language as T
import torch
import torch.nn as nn

_DTYPES = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}
_ELEM_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}
_EPS = 1e-5


@tilelang.jit(out_idx=[-1])
def batchnorm_kernel(planes, channels, hw, dtype, threads=256):
    vec = 16 // _ELEM_BYTES[dtype]
    while hw % vec:
        vec //= 2
    stride = threads * vec
    padded = -(-hw // stride) * stride

    @T.prim_func
    def main(
        X: T.Tensor((planes, hw), dtype),
        Mean: T.Tensor((channels,), dtype),
        Var: T.Tensor((channels,), dtype),
        W: T.Tensor((channels,), dtype),
        B: T.Tensor((channels,), dtype),
        Y: T.Tensor((planes, hw), dtype),
    ):
        with T.Kernel(planes, threads=threads) as p:
            scale = T.alloc_fragment((1,), "float32")
            shift = T.alloc_fragment((1,), "float32")
            scale[0] = T.cast(W[p % channels], "float32") * T.rsqrt(T.cast(Var[p % channels], "float32") + _EPS)
            shift[0] = T.cast(B[p % channels], "float32") - T.cast(Mean[p % channels], "float32") * scale[0]
            for j in T.Parallel(padded):
                if j < hw:
                    Y[p, j] = T.cast(T.cast(X[p, j], "float32") * scale[0] + shift[0], dtype)

    return main


class ModelNew(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(channels))
        self.bias = nn.Parameter(0.5 * torch.randn(channels))
        self.register_buffer("running_mean", 0.5 * torch.randn(channels))
        self.register_buffer("running_var", 0.5 + torch.rand(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c = x.shape[0], x.shape[1]
        hw = x[0, 0].numel()
        x2 = x.contiguous().view(n * c, hw)
        kernel = batchnorm_kernel(n * c, c, hw, _DTYPES[x.dtype])
        out = kernel(
            x2,
            self.running_mean.contiguous(),
            self.running_var.contiguous(),
            self.weight.contiguous(),
            self.bias.contiguous(),
        )
        return out.view(x.shape)
