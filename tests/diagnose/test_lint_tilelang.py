"""TileLang kernel rules (harness/diagnose/lint/tilelang.py): serial loops that are and are not reductions."""

from __future__ import annotations

import textwrap

from harness.diagnose.lint import lint_source


_TL_HEADER = "import torch\nimport tilelang\nimport tilelang.language as T\n\n"


def test_tilelang_split_combine_serial_loop_next_to_parallel_work_is_quiet():
    src = _TL_HEADER + textwrap.dedent(
        """
        @tilelang.jit(out_idx=[-1])
        def combine(batch, heads, num_split, dim):
            @T.prim_func
            def main(lse: T.Tensor((batch, heads, num_split), "float32"),
                     part: T.Tensor((batch, heads, num_split, dim), "float32"),
                     out: T.Tensor((batch, heads, dim), "float32")):
                with T.Kernel(heads, batch, threads=128) as (by, bz):
                    m = T.alloc_local([1], "float32")
                    acc = T.alloc_fragment([dim], "float32")
                    m[0] = -T.infinity("float32")
                    for k in T.serial(num_split):
                        m[0] = T.max(m[0], lse[bz, by, k])
                    T.clear(acc)
                    for k in T.serial(num_split):
                        for i in T.Parallel(dim):
                            acc[i] += part[bz, by, k, i] * T.exp2(lse[bz, by, k] - m[0])
                    for i in T.Parallel(dim):
                        out[bz, by, i] = acc[i]
            return main
        """
    )
    assert lint_source(src) == []


def test_tilelang_naive_gemm_thread_per_output_is_a_matmul_without_tensor_cores():
    # a thread walking K for one output is also a sequential reduction; the tensor-core finding subsumes it
    src = _TL_HEADER + textwrap.dedent(
        """
        @tilelang.jit(out_idx=[-1])
        def naive_mm(M, N, K, block_M=16, block_N=16):
            @T.prim_func
            def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
                with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
                    acc = T.alloc_fragment((block_M, block_N), "float32")
                    for i, j in T.Parallel(block_M, block_N):
                        acc[i, j] = 0.0
                        for k in T.serial(K):
                            acc[i, j] += A[by * block_M + i, k] * B[k, bx * block_N + j]
                        C[by * block_M + i, bx * block_N + j] = acc[i, j]
            return main
        """
    )
    assert [(f.rule, f.severity) for f in lint_source(src)] == [("matmul-without-tensor-cores", "defect")]
