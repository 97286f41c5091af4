"""Square GEMM C = A @ B in TileLang: wgmma tiles for fp16/bf16, an exact CUDA-core kernel for fp32.

Half precision (fp16/bf16): 128 x 256 output tile per 256-thread block, K step
64, a 3-stage T.Pipelined loop. On Hopper TileLang lowers the tile copies to
TMA loads in a warp-specialized producer warpgroup and T.gemm to wgmma on two
consumer warpgroups (fp32 accumulators, 128 per thread); the epilogue stages
the tile through shared memory (aliased onto the B buffers) for a TMA store.
T.use_swizzle(10) rasterizes blocks in panels of 10 so that neighbouring
blocks reuse A and B tiles from L2. Shared memory: 3 x 48 KB stages.

fp32: the workload forbids TF32 and T.gemm on fp32 inputs lowers to TF32 mma,
so fp32 runs a CUDA-core FFMA kernel instead: 128 x 128 tile, K step 16, a
3-stage T.Pipelined loop (TMA producer warpgroup; TileLang remaps the consumer
thread index), 256 compute threads each accumulating an 8 x 8 register tile.
A thread owns rows ty + 16 i and columns 4 tx + 64 h + v, so per k it reads 8
conflict-free scalars of A (a broadcast across the half-warp) and two float4 of
B from shared memory for 64 FFMAs. Rounding is plain fp32 FMA accumulation.
"""
import tilelang
import tilelang.language as T
import torch
import torch.nn as nn

_DTYPES = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}


@tilelang.jit(out_idx=[-1])
def matmul_kernel(M, N, K, dtype, block_m=128, block_n=256, block_k=64, stages=3, threads=256):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_n), T.ceildiv(M, block_m), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_m, block_k), dtype)
            B_s = T.alloc_shared((block_k, block_n), dtype)
            C_f = T.alloc_fragment((block_m, block_n), "float32")
            C_s = T.alloc_shared((block_m, block_n), dtype)
            T.use_swizzle(10)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_k), num_stages=stages):
                T.copy(A[by * block_m, k * block_k], A_s)
                T.copy(B[k * block_k, bx * block_n], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C_s)
            T.copy(C_s, C[by * block_m, bx * block_n])

    return main


@tilelang.jit(out_idx=[-1])
def sgemm_kernel(M, N, K, block_m=128, block_n=128, block_k=16, stages=3):
    dtype = "float32"
    guard_m = M % block_m != 0
    guard_n = N % block_n != 0

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_n), T.ceildiv(M, block_m), threads=256) as (bx, by):
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
                T.copy(A[by * block_m, k * block_k], A_s)
                T.copy(B[k * block_k, bx * block_n], B_s)
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
                            C[by * block_m + i * 16 + ty, bx * block_n + h * 64 + tx * 4 + v] = acc[i, h * 4 + v]

    return main


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a = a.contiguous()
        b = b.contiguous()
        M, K = a.shape
        N = b.shape[1]
        if a.dtype == torch.float32:
            return sgemm_kernel(M, N, K)(a, b)
        return matmul_kernel(M, N, K, _DTYPES[a.dtype])(a, b)
