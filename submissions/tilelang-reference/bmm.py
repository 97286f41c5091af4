"""Batched GEMM C[b] = A[b] @ B[b] in TileLang: wgmma tiles for fp16/bf16, CUDA-core FFMA for fp32.

Half precision: one 128 x 256 output tile (128 x 128 when N <= 128) of one
batch per 256-thread block, grid (N tiles, M tiles, batch), K step 64 and a
3-stage T.Pipelined loop. On Hopper TileLang lowers the tile copies to TMA
loads (3D descriptors over the batched tensors) in a warp-specialized producer
warpgroup and T.gemm to wgmma on two consumer warpgroups with fp32
accumulators; the epilogue goes through shared memory (aliased onto the B
buffers) to a TMA store. T.use_swizzle(10) rasterizes each batch's tiles in
panels so neighbouring blocks share A and B tiles in L2.

fp32 (no TF32 allowed, and T.gemm on fp32 lowers to TF32 mma): the same grid
with a CUDA-core kernel, 128 x 128 tile, K step 16, 3-stage pipeline, 256
compute threads each accumulating an 8 x 8 fp32 register tile (rows ty + 16 i,
columns 4 tx + 64 h + v: conflict-free shared-memory reads, 64 FFMAs per 8
scalar + 2 float4 loads).
"""
import tilelang
import tilelang.language as T
import torch
import torch.nn as nn

_DTYPES = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}


@tilelang.jit(out_idx=[-1])
def bmm_kernel(batch, M, N, K, dtype, block_m=128, block_n=256, block_k=64, stages=3, threads=256):
    @T.prim_func
    def main(
        A: T.Tensor((batch, M, K), dtype),
        B: T.Tensor((batch, K, N), dtype),
        C: T.Tensor((batch, M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_n), T.ceildiv(M, block_m), batch, threads=threads) as (bx, by, bz):
            A_s = T.alloc_shared((block_m, block_k), dtype)
            B_s = T.alloc_shared((block_k, block_n), dtype)
            C_f = T.alloc_fragment((block_m, block_n), "float32")
            C_s = T.alloc_shared((block_m, block_n), dtype)
            T.use_swizzle(10)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_k), num_stages=stages):
                T.copy(A[bz, by * block_m : (by + 1) * block_m, k * block_k : (k + 1) * block_k], A_s)
                T.copy(B[bz, k * block_k : (k + 1) * block_k, bx * block_n : (bx + 1) * block_n], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C_s)
            T.copy(C_s, C[bz, by * block_m : (by + 1) * block_m, bx * block_n : (bx + 1) * block_n])

    return main


@tilelang.jit(out_idx=[-1])
def sgemm_kernel(batch, M, N, K, block_m=128, block_n=128, block_k=16, stages=3):
    dtype = "float32"
    guard_m = M % block_m != 0
    guard_n = N % block_n != 0

    @T.prim_func
    def main(
        A: T.Tensor((batch, M, K), dtype),
        B: T.Tensor((batch, K, N), dtype),
        C: T.Tensor((batch, M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_n), T.ceildiv(M, block_m), batch, threads=256) as (bx, by, bz):
            A_s = T.alloc_shared((block_m, block_k), dtype)
            B_s = T.alloc_shared((block_k, block_n), dtype)
            acc = T.alloc_local((8, 8), dtype)
            a_r = T.alloc_local((8,), dtype)
            b_r = T.alloc_local((8,), dtype)
            tx = T.get_thread_binding() % 16
            ty = T.get_thread_binding() // 16
            T.use_swizzle(10)
            for i in T.unroll(8):
                for j in T.unroll(8):
                    acc[i, j] = 0.0
            for k in T.Pipelined(T.ceildiv(K, block_k), num_stages=stages):
                T.copy(A[bz, by * block_m : (by + 1) * block_m, k * block_k : (k + 1) * block_k], A_s)
                T.copy(B[bz, k * block_k : (k + 1) * block_k, bx * block_n : (bx + 1) * block_n], B_s)
                for kk in T.unroll(block_k):
                    for i in T.unroll(8):
                        a_r[i] = A_s[i * 16 + ty, kk]
                    for h in T.unroll(2):
                        for v in T.vectorized(4):
                            b_r[h * 4 + v] = B_s[kk, h * 64 + tx * 4 + v]
                    for i in T.unroll(8):
                        for j in T.unroll(8):
                            acc[i, j] += a_r[i] * b_r[j]
            for i in T.unroll(8):
                for h in T.unroll(2):
                    for v in T.vectorized(4):
                        if (not guard_m or by * block_m + i * 16 + ty < M) and (
                            not guard_n or bx * block_n + h * 64 + tx * 4 + v < N
                        ):
                            C[bz, by * block_m + i * 16 + ty, bx * block_n + h * 64 + tx * 4 + v] = acc[i, h * 4 + v]

    return main


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a = a.contiguous()
        b = b.contiguous()
        batch, M, K = a.shape
        N = b.shape[2]
        if a.dtype == torch.float32:
            return sgemm_kernel(batch, M, N, K)(a, b)
        block_n = 256 if N > 128 else 128
        return bmm_kernel(batch, M, N, K, _DTYPES[a.dtype], block_n=block_n)(a, b)
