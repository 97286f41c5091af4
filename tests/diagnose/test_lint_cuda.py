"""CUDA-level lint of TileLang kernels lowered on the CPU (``compile_kernel_source``, no GPU needed)."""

from __future__ import annotations

import pytest

from harness.diagnose.findings import format_findings
from harness.diagnose.lint import lint_cuda_source

_TARGET = {"kind": "cuda", "arch": "sm_90a"}


@pytest.fixture(scope="module")
def lowered():
    """CUDA C for a sequential (one thread walks the row) and a parallel (T.reduce_sum) row sum."""
    tilelang = pytest.importorskip("tilelang")
    T = pytest.importorskip("tilelang.language")
    compile_only = pytest.importorskip("tilelang.tools.compile_only")
    if not compile_only.cuda_codegen_available():
        pytest.skip("this tilelang wheel cannot lower CUDA")

    @tilelang.jit(out_idx=[-1])
    def rowsum_sequential(M, N, dtype="float16"):
        @T.prim_func
        def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M,), dtype)):
            with T.Kernel(M, threads=1) as bx:
                acc = T.alloc_local((1,), "float32")
                acc[0] = 0.0
                for j in T.serial(N):
                    acc[0] += T.cast(X[bx, j], "float32")
                Y[bx] = T.cast(acc[0], dtype)

        return main

    @tilelang.jit(out_idx=[-1])
    def rowsum_parallel(M, N, dtype="float16"):
        @T.prim_func
        def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M,), dtype)):
            with T.Kernel(M, threads=128) as bx:
                xs = T.alloc_fragment((N,), "float32")
                s = T.alloc_fragment((1,), "float32")
                for j in T.Parallel(N):
                    xs[j] = T.cast(X[bx, j], "float32")
                T.reduce_sum(xs, s, dim=0)
                Y[bx] = T.cast(s[0], dtype)

        return main

    return {
        name: compile_only.compile_kernel_source(fn.get_tir(256, 1024), target=_TARGET)
        for name, fn in (("sequential", rowsum_sequential), ("parallel", rowsum_parallel))
    }


def test_lowered_sequential_kernel_is_flagged(lowered):
    src = lowered["sequential"]
    assert "__global__" in src
    findings = lint_cuda_source(src)
    assert [f.rule for f in findings] == ["sequential-reduction"], format_findings(findings, "seq.cu")
    assert findings[0].severity == "defect"
    assert "for (j < 1024)" in findings[0].message
    assert src.splitlines()[findings[0].line - 1].lstrip().startswith("for")


def test_lowered_parallel_kernel_is_clean(lowered):
    src = lowered["parallel"]
    assert "AllReduce" in src  # the parallel reduction really was lowered as one
    findings = lint_cuda_source(src)
    assert findings == [], format_findings(findings, "par.cu")


_HAND_WRITTEN = """
extern "C" __global__ void __launch_bounds__(16, 1) tiny_kernel(const float* __restrict__ X, float* __restrict__ Y) {
  Y[((int)blockIdx.x) * 16 + ((int)threadIdx.x)] = X[((int)blockIdx.x) * 16 + ((int)threadIdx.x)] * 2.0f;
}
extern "C" __global__ void __launch_bounds__(256, 1) exp64_kernel(const half_t* __restrict__ X, half_t* __restrict__ Y) {
  /* a double in a comment is not arithmetic */
  Y[((int)threadIdx.x)] = ((half_t)exp(((double)X[((int)threadIdx.x)])));
}
extern "C" __global__ void __launch_bounds__(128, 1) fp64_data_kernel(const double* __restrict__ X, double* __restrict__ Y) {
  Y[((int)threadIdx.x)] = X[((int)threadIdx.x)] * (double)2;
}
"""


def test_hand_written_cuda_rules():
    findings = lint_cuda_source(_HAND_WRITTEN)
    got = sorted((f.rule, f.line) for f in findings)
    assert got == [("fp64-promotion", 7), ("tiny-tile", 2)], format_findings(findings, "k.cu")
