"""``matmul-without-tensor-cores``: matrix products on CUDA cores are named; depthwise, norm and GEMV shapes are not."""

from __future__ import annotations

import textwrap

import pytest

from harness.diagnose.lint import HINTS, lint_source

_TRITON = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n"
_TILELANG = "import torch\nimport tilelang\nimport tilelang.language as T\n\n"
RULE = "matmul-without-tensor-cores"


def _rule(src: str, header: str = _TRITON) -> list:
    return [f for f in lint_source(header + textwrap.dedent(src)) if f.rule == RULE]


def _severity(src: str, header: str = _TRITON) -> str | None:
    fs = _rule(src, header)
    return "defect" if any(f.severity == "defect" for f in fs) else ("warning" if fs else None)


# -- Triton: matrix products without tl.dot ----------------------------------------------------------

TRITON_DEFECTS = {
    "scalar_weight_x_input_block": """
        @triton.jit
        def conv1x1(x_ptr, w_ptr, y_ptr, C, K, HW, BLOCK: tl.constexpr):
            nk = tl.program_id(0)
            n = nk // K
            k = nk % K
            offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
            x_img = x_ptr + n * C * HW
            acc = tl.zeros((BLOCK,), dtype=tl.float32)
            for c in range(0, C):
                wv = tl.load(w_ptr + k * C + c)
                xv = tl.load(x_img + c * HW + offs, mask=offs < HW, other=0.0)
                acc += wv * xv
            tl.store(y_ptr + nk * HW + offs, acc, mask=offs < HW)
        """,
    "inline_projections": """
        @triton.jit
        def conv1x1(x_ptr, w_ptr, y_ptr, C, K, HW, BLOCK: tl.constexpr):
            pid = tl.program_id(0)
            offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
            acc = tl.zeros((BLOCK,), dtype=tl.float32)
            for c in range(0, C):
                acc += tl.load(w_ptr + (pid % K) * C + c) * tl.load(x_ptr + ((pid // K) * C + c) * HW + offs)
            tl.store(y_ptr + pid * HW + offs, acc)
        """,
    "broadcast_sum_3d": """
        @triton.jit
        def mm(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
            offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
            offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
            offs_k = tl.arange(0, BK)
            acc = tl.zeros((BM, BN), dtype=tl.float32)
            for k0 in range(0, K, BK):
                kk = k0 + offs_k
                a = tl.load(a_ptr + offs_m[:, None] * K + kk[None, :])
                b = tl.load(b_ptr + kk[:, None] * N + offs_n[None, :])
                acc += tl.sum(a[:, :, None] * b[None, :, :], axis=1)
            tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc)
        """,
    "rank1_via_pointer_broadcast_and_increments": """
        @triton.jit
        def mm(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr):
            pid = tl.program_id(0)
            num_n = tl.cdiv(N, BN)
            offs_m = (pid // num_n) * BM + tl.arange(0, BM)
            offs_n = (pid % num_n) * BN + tl.arange(0, BN)
            a_ptrs = a_ptr + offs_m[:, None] * K
            b_ptrs = b_ptr + offs_n[None, :]
            acc = tl.zeros((BM, BN), dtype=tl.float32)
            for k in range(0, K):
                acc = acc + tl.load(a_ptrs) * tl.load(b_ptrs)
                a_ptrs += 1
                b_ptrs += N
            tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc)
        """,
    "linear_one_row_per_program": """
        @triton.jit
        def linear(x_ptr, w_ptr, y_ptr, N, K, BN: tl.constexpr, BK: tl.constexpr):
            m = tl.program_id(0)
            rows = tl.program_id(1) * BN + tl.arange(0, BN)
            acc = tl.zeros((BN,), dtype=tl.float32)
            for k0 in range(0, K, BK):
                ks = k0 + tl.arange(0, BK)
                x = tl.load(x_ptr + m * K + ks)
                w = tl.load(w_ptr + rows[:, None] * K + ks[None, :])
                acc += tl.sum(w * x[None, :], axis=1)
            tl.store(y_ptr + m * N + rows, acc)
        """,
    "fma_batched": """
        @triton.jit
        def bmm(a_ptr, b_ptr, c_ptr, M, N, K, BN: tl.constexpr):
            b = tl.program_id(0)
            m = tl.program_id(1)
            offs_n = tl.program_id(2) * BN + tl.arange(0, BN)
            acc = tl.zeros((BN,), dtype=tl.float32)
            for k in range(0, K):
                av = tl.load(a_ptr + (b * M + m) * K + k)
                bv = tl.load(b_ptr + (b * K + k) * N + offs_n)
                acc = tl.fma(av, bv, acc)
            tl.store(c_ptr + (b * M + m) * N + offs_n, acc)
        """,
    "persistent_tiles_with_while_k_loop": """
        @triton.jit
        def mm(a_ptr, b_ptr, c_ptr, M, N, K, n_tiles, BM: tl.constexpr, BN: tl.constexpr):
            for tile in range(tl.program_id(0), n_tiles, tl.num_programs(0)):
                offs_m = (tile // tl.cdiv(N, BN)) * BM + tl.arange(0, BM)
                offs_n = (tile % tl.cdiv(N, BN)) * BN + tl.arange(0, BN)
                acc = tl.zeros((BM, BN), dtype=tl.float32)
                k = 0
                while k < K:
                    a = tl.load(a_ptr + k * M + offs_m)
                    b = tl.load(b_ptr + k * N + offs_n)
                    acc += a[:, None] * b[None, :]
                    k += 1
                tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc)
        """,
}


@pytest.mark.parametrize("name", sorted(TRITON_DEFECTS))
def test_triton_matrix_product_on_cuda_cores_is_a_defect(name):
    fs = _rule(TRITON_DEFECTS[name])
    assert [f.severity for f in fs] == ["defect"], fs
    assert fs[0].hint == HINTS[RULE] and "tl.dot" in fs[0].hint and "implicit GEMM" in fs[0].hint


def test_scalar_x_block_names_the_reread_operand():
    (f,) = _rule(TRITON_DEFECTS["scalar_weight_x_input_block"])
    assert "`w_ptr` indexed by `k`" in f.message
    assert "every `k` re-reads the same `x_ptr` block" in f.message


def test_one_output_per_program_gemm_reports_the_matmul_not_the_sequential_reduction():
    src = """
        @triton.jit
        def mm(a_ptr, b_ptr, c_ptr, M, N, K):
            pid = tl.program_id(0)
            m = pid // N
            n = pid % N
            acc = 0.0
            for k in range(0, K):
                acc += tl.load(a_ptr + m * K + k) * tl.load(b_ptr + k * N + n)
            tl.store(c_ptr + m * N + n, acc)
        """
    assert [(f.rule, f.severity) for f in lint_source(_TRITON + textwrap.dedent(src))] == [(RULE, "defect")]


def test_kernel_with_tl_dot_is_not_judged():
    src = TRITON_DEFECTS["broadcast_sum_3d"].replace(
        "tl.store(c_ptr", "acc = tl.dot(a, b, acc)\n            tl.store(c_ptr"
    )
    assert _rule(src) == []


# -- Triton: shapes that must stay quiet ----------------------------------------------------------------

TRITON_QUIET = {
    "depthwise_static_taps_in_persistent_tile_loop": """
        @triton.jit
        def dw(x_ptr, w_ptr, y_ptr, C, H, W, n_tiles, BLOCK: tl.constexpr):
            for t in range(tl.program_id(0), n_tiles, tl.num_programs(0)):
                plane = t // H
                c = plane % C
                oh = t % H
                ow = tl.arange(0, BLOCK)
                acc = tl.zeros((BLOCK,), dtype=tl.float32)
                for r in tl.static_range(3):
                    for s in tl.static_range(3):
                        xv = tl.load(x_ptr + plane * H * W + (oh + r - 1) * W + ow + s - 1)
                        acc += xv * tl.load(w_ptr + c * 9 + r * 3 + s)
                tl.store(y_ptr + plane * H * W + oh * W + ow, acc, mask=ow < W)
        """,
    "depthwise_runtime_taps": """
        @triton.jit
        def dw1d(x_ptr, w_ptr, y_ptr, C, L, KS, BLOCK: tl.constexpr):
            nc = tl.program_id(0)
            c = nc % C
            offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
            acc = tl.zeros((BLOCK,), dtype=tl.float32)
            for t in range(0, KS):
                acc += tl.load(x_ptr + nc * L + offs + t) * tl.load(w_ptr + c * KS + t)
            tl.store(y_ptr + nc * L + offs, acc, mask=offs < L)
        """,
    "depthwise_with_channel_multiplier": """
        @triton.jit
        def dw(x_ptr, w_ptr, y_ptr, C_in, H, W, KS, cpg, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            oc = row // H
            oh = row % H
            ow = tl.arange(0, BLOCK)
            base = ((oc // cpg) * H + oh) * W
            acc = tl.zeros((BLOCK,), dtype=tl.float32)
            for kh in range(0, KS):
                for kw in range(0, KS):
                    acc += tl.load(x_ptr + base + kh * W + ow + kw) * tl.load(w_ptr + (oc * KS + kh) * KS + kw)
            tl.store(y_ptr + row * W + ow, acc)
        """,
    "depthwise_nhwc_channel_blocks": """
        @triton.jit
        def dw(x_ptr, w_ptr, y_ptr, C, H, W, KS, BLOCK_C: tl.constexpr):
            pid = tl.program_id(0)
            n = pid // (H * W)
            oh = (pid // W) % H
            ow = pid % W
            cs = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
            acc = tl.zeros((BLOCK_C,), dtype=tl.float32)
            for r in range(0, KS):
                for s in range(0, KS):
                    xv = tl.load(x_ptr + ((n * H + oh + r) * W + ow + s) * C + cs, mask=cs < C, other=0.0)
                    acc += xv * tl.load(w_ptr + (r * KS + s) * C + cs, mask=cs < C, other=0.0)
            tl.store(y_ptr + pid * C + cs, acc, mask=cs < C)
        """,
    "layernorm_looped_statistics": """
        @triton.jit
        def ln(x_ptr, w_ptr, y_ptr, N, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            acc = tl.zeros((BLOCK,), dtype=tl.float32)
            acc2 = tl.zeros((BLOCK,), dtype=tl.float32)
            for off in range(0, N, BLOCK):
                cols = off + tl.arange(0, BLOCK)
                x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0)
                acc += x
                acc2 += x * x
            mean = tl.sum(acc, 0) / N
            rstd = 1 / tl.sqrt(tl.sum(acc2, 0) / N - mean * mean + 1e-5)
            for off in range(0, N, BLOCK):
                cols = off + tl.arange(0, BLOCK)
                x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0)
                w = tl.load(w_ptr + cols, mask=cols < N)
                tl.store(y_ptr + row * N + cols, (x - mean) * rstd * w, mask=cols < N)
        """,
    "row_dot_products": """
        @triton.jit
        def rowdot(a_ptr, b_ptr, out_ptr, N, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            acc = 0.0
            for off in range(0, N, BLOCK):
                cols = off + tl.arange(0, BLOCK)
                a = tl.load(a_ptr + row * N + cols, mask=cols < N, other=0.0)
                b = tl.load(b_ptr + row * N + cols, mask=cols < N, other=0.0)
                acc += tl.sum(a * b, axis=0)
            tl.store(out_ptr + row, acc)
        """,
    "layernorm_backward_weight_grad": """
        @triton.jit
        def dw(dy_ptr, x_ptr, mean_ptr, rstd_ptr, dw_ptr, M, N, BLOCK: tl.constexpr):
            cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            acc = tl.zeros((BLOCK,), dtype=tl.float32)
            for row in range(0, M):
                dy = tl.load(dy_ptr + row * N + cols, mask=cols < N, other=0.0)
                x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0)
                acc += dy * ((x - tl.load(mean_ptr + row)) * tl.load(rstd_ptr + row))
            tl.store(dw_ptr + cols, acc, mask=cols < N)
        """,
    "per_sample_weighted_frames": """
        @triton.jit
        def mix(x_ptr, a_ptr, y_ptr, T, D, BLOCK: tl.constexpr):
            b = tl.program_id(0)
            offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
            acc = tl.zeros((BLOCK,), dtype=tl.float32)
            for t in range(0, T):
                acc += tl.load(x_ptr + (b * T + t) * D + offs, mask=offs < D) * tl.load(a_ptr + b * T + t)
            tl.store(y_ptr + b * D + offs, acc, mask=offs < D)
        """,
    "embedding_bag_gather": """
        @triton.jit
        def bag(idx_ptr, psw_ptr, emb_ptr, out_ptr, L, D, BLOCK: tl.constexpr):
            b = tl.program_id(0)
            offs = tl.arange(0, BLOCK)
            acc = tl.zeros((BLOCK,), dtype=tl.float32)
            for i in range(0, L):
                idx = tl.load(idx_ptr + b * L + i)
                acc += tl.load(emb_ptr + idx * D + offs, mask=offs < D) * tl.load(psw_ptr + b * L + i)
            tl.store(out_ptr + b * D + offs, acc, mask=offs < D)
        """,
    "gemv_scalar_vector_element": """
        @triton.jit
        def gemv(w_ptr, x_ptr, y_ptr, N, K, BN: tl.constexpr):
            rows = tl.program_id(0) * BN + tl.arange(0, BN)
            acc = tl.zeros((BN,), dtype=tl.float32)
            for k in range(0, K):
                acc += tl.load(w_ptr + k * N + rows, mask=rows < N, other=0.0) * tl.load(x_ptr + k)
            tl.store(y_ptr + rows, acc, mask=rows < N)
        """,
    "swiglu_elementwise_in_grid_stride_loop": """
        @triton.jit
        def swiglu(a_ptr, b_ptr, y_ptr, n, BLOCK: tl.constexpr):
            for start in range(tl.program_id(0) * BLOCK, n, tl.num_programs(0) * BLOCK):
                offs = start + tl.arange(0, BLOCK)
                a = tl.load(a_ptr + offs, mask=offs < n)
                b = tl.load(b_ptr + offs, mask=offs < n)
                tl.store(y_ptr + offs, a * tl.sigmoid(a) * b, mask=offs < n)
        """,
    "static_range_of_unknown_length": """
        @triton.jit
        def mix(x_ptr, h_ptr, y_ptr, N, C, HC: tl.constexpr, BN: tl.constexpr, BC: tl.constexpr):
            n_offs = tl.program_id(0) * BN + tl.arange(0, BN)
            c_offs = tl.arange(0, BC)
            o = tl.arange(0, HC)[:, None]
            acc = tl.zeros((HC, BN, BC), dtype=tl.float32)
            for i in tl.static_range(0, HC):
                xs = tl.load(x_ptr + (n_offs[:, None] * HC + i) * C + c_offs[None, :])
                w = tl.load(h_ptr + (n_offs[None, :] * HC + o) * HC + i)
                acc += xs[None, :, :] * w[:, :, None]
            tl.store(y_ptr + n_offs[None, :, None] * HC * C + o[:, :, None] * C + c_offs[None, None, :], acc)
        """,
    "prefetched_vector_tile": """
        @triton.jit
        def gemv(a_ptr, b_ptr, c_ptr, M, K, BM: tl.constexpr, BK: tl.constexpr):
            offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
            acc = tl.zeros((BM,), dtype=tl.float32)
            offs_k0 = tl.arange(0, BK)
            b_prev = tl.load(b_ptr + offs_k0)
            for k in range(0, tl.cdiv(K, BK)):
                offs_k = k * BK + tl.arange(0, BK)
                a = tl.load(a_ptr + offs_m[:, None] * K + offs_k[None, :])
                b = b_prev
                next_k = (k + 1) * BK + tl.arange(0, BK)
                b_prev = tl.load(b_ptr + next_k, mask=next_k < K, other=0.0)
                acc += tl.sum(a * b[None, :], axis=1)
            tl.store(c_ptr + offs_m, acc)
        """,
}


@pytest.mark.parametrize("name", sorted(TRITON_QUIET))
def test_triton_non_matmul_shapes_get_no_defect(name):
    assert _severity(TRITON_QUIET[name]) in (None, "warning"), _rule(TRITON_QUIET[name])


@pytest.mark.parametrize("name", ["depthwise_static_taps_in_persistent_tile_loop", "depthwise_runtime_taps",
                                  "depthwise_with_channel_multiplier", "layernorm_looped_statistics",
                                  "row_dot_products", "embedding_bag_gather", "swiglu_elementwise_in_grid_stride_loop"])
def test_triton_elementwise_shapes_are_silent(name):
    assert _rule(TRITON_QUIET[name]) == []


def test_gemv_broadcast_sum_is_only_a_warning():
    src = """
        @triton.jit
        def gemv(w_ptr, x_ptr, y_ptr, N, K, BN: tl.constexpr, BK: tl.constexpr):
            rows = tl.program_id(0) * BN + tl.arange(0, BN)
            acc = tl.zeros((BN,), dtype=tl.float32)
            for k0 in range(0, K, BK):
                ks = k0 + tl.arange(0, BK)
                x = tl.load(x_ptr + ks, mask=ks < K, other=0.0)
                w = tl.load(w_ptr + rows[:, None] * K + ks[None, :])
                acc += tl.sum(w * x[None, :], axis=1)
            tl.store(y_ptr + rows, acc, mask=rows < N)
        """
    assert [f.severity for f in _rule(src)] == ["warning"]
    assert _severity(TRITON_QUIET["prefetched_vector_tile"]) == "warning"


# -- TileLang -----------------------------------------------------------------------------------------------

TILELANG_DEFECTS = {
    "thread_per_output_global_operands": """
        @tilelang.jit(out_idx=[-1])
        def mm(M, N, K, bm=64, bn=64):
            @T.prim_func
            def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
                with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
                    acc = T.alloc_fragment((bm, bn), "float32")
                    T.clear(acc)
                    for k in T.serial(K):
                        for i, j in T.Parallel(bm, bn):
                            acc[i, j] += A[by * bm + i, k] * B[k, bx * bn + j]
                    T.copy(acc, C[by * bm, bx * bn])
            return main
        """,
    "shared_tiles_fp16": """
        @tilelang.jit(out_idx=[-1])
        def mm(M, N, K, bm=64, bn=64, bk=32):
            @T.prim_func
            def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
                with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
                    A_s = T.alloc_shared((bm, bk), "float16")
                    B_s = T.alloc_shared((bk, bn), "float16")
                    acc = T.alloc_fragment((bm, bn), "float32")
                    T.clear(acc)
                    for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                        T.copy(A[by * bm, ko * bk], A_s)
                        T.copy(B[ko * bk, bx * bn], B_s)
                        for kk in T.serial(bk):
                            for i, j in T.Parallel(bm, bn):
                                acc[i, j] += A_s[i, kk] * B_s[kk, j]
                    T.copy(acc, C[by * bm, bx * bn])
            return main
        """,
}

TILELANG_QUIET = {
    "shared_tiles_fp32": TILELANG_DEFECTS["shared_tiles_fp16"].replace('alloc_shared((bm, bk), "float16")',
                                                                     'alloc_shared((bm, bk), "float32")')
                                                            .replace('alloc_shared((bk, bn), "float16")',
                                                                     'alloc_shared((bk, bn), "float32")'),
    "gemv": """
        @tilelang.jit(out_idx=[-1])
        def gemv(N, K, block=256):
            @T.prim_func
            def main(A: T.Tensor((N, K), "float16"), x: T.Tensor((K,), "float16"), y: T.Tensor((N,), "float16")):
                with T.Kernel(T.ceildiv(N, block), threads=256) as bx:
                    acc = T.alloc_fragment((block,), "float32")
                    T.clear(acc)
                    for k in T.serial(K):
                        for i in T.Parallel(block):
                            acc[i] += A[bx * block + i, k] * x[k]
                    for i in T.Parallel(block):
                        y[bx * block + i] = acc[i]
            return main
        """,
    "depthwise_runtime_taps": """
        @tilelang.jit(out_idx=[-1])
        def dw(NC, C, H, W, KS, block=256):
            @T.prim_func
            def main(X: T.Tensor((NC, H, W), "float16"), Wt: T.Tensor((C, KS, KS), "float16"),
                     Y: T.Tensor((NC, H, W), "float16")):
                with T.Kernel(H, NC, threads=256) as (h, p):
                    acc = T.alloc_fragment((block,), "float32")
                    T.clear(acc)
                    for r in T.serial(KS):
                        for s in T.serial(KS):
                            for i in T.Parallel(block):
                                acc[i] += X[p, h + r, i + s] * Wt[p % C, r, s]
                    for i in T.Parallel(block):
                        Y[p, h, i] = acc[i]
            return main
        """,
}


@pytest.mark.parametrize("name", sorted(TILELANG_DEFECTS))
def test_tilelang_matrix_product_without_gemm_is_a_defect(name):
    fs = _rule(TILELANG_DEFECTS[name], _TILELANG)
    assert [f.severity for f in fs] == ["defect"], fs
    assert "without T.gemm" in fs[0].message


@pytest.mark.parametrize("name", sorted(TILELANG_QUIET))
def test_tilelang_non_matmul_shapes_are_silent(name):
    assert _rule(TILELANG_QUIET[name], _TILELANG) == []
