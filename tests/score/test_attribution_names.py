"""Which profiled kernels are the candidate's own (harness.score.attribution's name rule): pure functions, no GPU.

The candidate's kernels are named by the worker's report of the Triton/TileLang kernels it launched, and a
Triton kernel's name is whatever the candidate calls (or renames) its function. The exploits below are kernel
names profiled on an H200 (torch 2.11 + cu130, Triton 3.6) when the two fixtures
tests/execute/fixtures/exploits/{gemm_square__vendor_kernel_name,gelu__aten_kernel_name}.py ran there.
The library op's own names (the checker's profile of the plain layout) only need to differ from those.
"""

from __future__ import annotations

import pytest

from harness.score import attribution as attr

# profiled on the H200: torch.mm(b.t(), a.t()).t(), fp16 8192^3 and fp32 4096^3 without TF32
NVJET_TRANSPOSED = "nvjet_sm90_hsh_320x128_64x3_1x2_h_bz_coopB_TTT"
SM80_TRANSPOSED = ("sm80_xmma_gemm_f32f32_f32f32_f32_tt_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_"
                   "execute_kernel__5x_cublas")
# stand-ins for the library's own kernels (the plain layout's): they only need to differ from the above
LIBRARY_GEMM = {"nvjet_sm90_hsh_256x128_64x4_2x1_v_bz_coopA_NNN",
                "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_"
                "execute_kernel__5x_cublas"}
# profiled on the H200: aten.gelu.out into a view one element into a larger buffer (fp16 16384x8192); the record
# keeps a name's first 200 characters, the rest of this one is PyTorch's usual template tail
_GELU_FN = ("at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() "
            "const::{lambda()#3}::operator()() const::{lambda(c10::Half)#1}")
_TAIL = "std::array<char*, 2ul>, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>"
GELU_MISALIGNED = (f"void at::native::unrolled_elementwise_kernel<{_GELU_FN}, {_TAIL}, "
                   f"at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >"
                   f"(int, {_GELU_FN}, {_TAIL})")
# a stand-in for the library's aligned GELU kernel
LIBRARY_GELU = {f"void at::native::vectorized_elementwise_kernel<8, {_GELU_FN}, std::array<char*, 2ul> >(int, "
                f"{_GELU_FN}, std::array<char*, 2ul>)"}


def _run(rows: list[tuple[str, float]], library: set[str], dsl: set[str]):
    att = attr.attribute([attr.Row(name, us, 5) for name, us in rows], 5, library, dsl)
    return att, attr.fallback_reason(att)


@pytest.mark.parametrize("gemm", [NVJET_TRANSPOSED, SM80_TRANSPOSED])
def test_a_triton_kernel_named_after_a_cublas_family_does_not_make_cublas_the_candidates(gemm):
    """Exploit (a): one-program Triton kernels named `nvjet`, `sm90`, `sm80` launched beside torch.mm on
    transposed operands; the old rule took `<reported name>_...` as the candidate's, so cuBLAS's GEMM was dsl
    (on the H200: PASSED, E_lib 0.995, efficient)."""
    rows = [(gemm, 1432.0), ("nvjet", 1.1), ("sm90", 0.8), ("sm80", 0.8)]
    att, reason = _run(rows, LIBRARY_GEMM, {"nvjet", "sm90", "sm80"})
    assert att.dsl_share == 0.0 and {k.kind for k in att.kernels} == {"vendor"}
    assert reason is not None and reason.startswith("library fallback")
    assert f"`{gemm[:80]}`" in reason and "`sm90`" in reason and "rename it" in reason


def test_a_triton_kernel_renamed_like_an_aten_kernel_does_not_make_pytorchs_gelu_the_candidates():
    """Exploit (b): a Triton kernel compiled as `_gelu_kernel`, then its JITFunction.__name__ set to
    `void at::native::unrolled` and launched; GELU from aten into a misaligned output, so PyTorch's kernel is not
    the library's exact one (on the H200: PASSED, DSL share 0.99 under the old rule)."""
    rows = [(GELU_MISALIGNED, 293.4), ("_gelu_kernel", 1.9)]
    att, reason = _run(rows, LIBRARY_GELU, {"void at::native::unrolled", "void at::native::vectorized"})
    assert [k.kind for k in att.kernels] == ["aten", "other"] and att.dsl_share == 0.0
    assert reason is not None and "0% of the forward's GPU time" in reason


def test_a_def_named_exactly_like_a_cublas_kernel_is_not_the_candidates():
    """Exploit (c): a `def` carrying the whole name of the cuBLAS kernel the transposed product runs, learned from
    a profile: exact matching alone would count cuBLAS's GEMM (one row: the profile merges the two) as Triton."""
    att, reason = _run([(SM80_TRANSPOSED, 2790.0)], LIBRARY_GEMM, {SM80_TRANSPOSED})
    assert att.kernels[0].kind == "vendor" and att.dsl_share == 0.0
    assert reason is not None and f"`{SM80_TRANSPOSED[:80]}`" in reason and "rename it" in reason


@pytest.mark.parametrize("name", ["_gemv_kernel", "_flash_fwd_kernel", "_sm90_gemm_kernel", "fmha_fwd",
                                  "_layer_norm_fwd", "_softmax_warp_kernel", "_sum_reduce_kernel", "matmul_kernel",
                                  "_matmul_kernel", "_gelu_kernel", "main_kernel"])
def test_honest_triton_and_tilelang_names_stay_the_candidates(name):
    """False accusation it stops: names that contain a vendor's or PyTorch's word (flash_fwd, softmax_warp, sm90,
    layer_norm) but do not start with a vendor family are the candidate's when it reports launching them."""
    cast = "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)>"
    att, reason = _run([(name, 90.0), (cast, 10.0)], LIBRARY_GEMM, {name})
    assert att.kernels[0].kind == "dsl" and att.dsl_share == 1.0 and reason is None


def test_old_tritons_specialisation_suffix_matches_and_nothing_else_after_the_name_does():
    """Triton before 3.0 profiled `_layer_norm_fwd` as `_layer_norm_fwd_0d1d2de` (argument numbers with c/d/e);
    any other tail (a vendor's `_tn_n...`, a word) is not the reported kernel's."""
    dsl = {"_layer_norm_fwd", "matmul_kernel"}
    for suffixed in ("_layer_norm_fwd_0d1d2de", "_layer_norm_fwd_0123", "matmul_kernel_01c2d3e4de"):
        assert attr.classify(suffixed, set(), dsl) == "dsl", suffixed
    for other in ("matmul_kernel_tn_n_tilesize128x128", "matmul_kernel_cublas", "matmul_kernel_0d1dx",
                  "matmul_kernel_"):
        assert attr.classify(other, set(), dsl) != "dsl", other


def test_a_reported_name_that_is_no_identifier_is_ignored():
    """A Triton kernel's name set to a demangled C++ name claims nothing, even when it is the profiled kernel's
    name less its argument list (exactly what the old rule compared)."""
    claimed = "void at::native::unrolled_elementwise_kernel<at::native::GeluCUDAKernelImpl>"
    att, reason = _run([(claimed + "(int, std::array<char*, 2ul>)", 100.0), ("_tok", 1.0)], set(), {claimed, "_tok"})
    assert [k.kind for k in att.kernels] == ["aten", "dsl"] and att.dsl_share == pytest.approx(1 / 101, abs=1e-4)
    assert reason is not None


def test_an_honest_kernel_named_like_a_vendors_gets_a_verdict_that_says_to_rename_it():
    """No exploit, a naming accident: `sm90_gemm` cannot be told from cuBLAS's kernels, so it is not counted;
    the verdict names it and says how to fix it."""
    att, reason = _run([("sm90_gemm", 100.0)], set(), {"sm90_gemm"})
    assert att.kernels[0].kind == "vendor" and "`sm90_gemm`" in reason and "leading underscore" in reason
    assert attr.fallback_reason(attr.attribute([attr.Row("_sm90_gemm", 100.0, 1)], 1, set(), {"_sm90_gemm"})) is None


@pytest.mark.parametrize("name", ["ampere_sgemm_128x64_nn", "volta_scudnn_128x64_relu_small_nn_v1",
                                  "cutlass_80_tensorop_f16_s16816gemm_relu_f16_128x128_32x4_tn_align8",
                                  "cutlass3x_sm90_tensorop_gemm_f16_f16_f32_void_f16_128x256x64_1x1x1_0_tnn_align8",
                                  "maxwell_scudnn_winograd_128x128_ldg1_ldg4_relu_tile418n_nt", "sm90_xmma_gemm",
                                  "fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::Params)",
                                  "triton_poi_fused_gelu_0"])
def test_vendor_and_inductor_shaped_names_are_never_the_candidates(name):
    """Identifier-shaped kernel names of cuBLAS, cuDNN, CUTLASS, PyTorch's CUTLASS attention and torch.compile,
    reported as the candidate's own (a `def` of that name)."""
    base = name.split("(", 1)[0]
    assert attr.classify(name, set(), {base}) in ("vendor", "inductor")


# profiled on the H200: flash-linear-attention's logsumexp_fwd (an autotuned Triton kernel, then Tensor.logsumexp
# over its per-block partials) at the smoke workload; the fill is the autotuner's cache flush between benchmark
# launches, and the library's logsumexp includes PyTorch's masked_fill kernel
FILL_INT = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, std::array<char*, 1ul> >"
            "(int, at::native::FillFunctor<int>, std::array<char*, 1ul>)")
MASKED_FILL = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::masked_fill_kernel"
               "(at::TensorIterator&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#7}::operat")


def test_a_fill_is_data_movement_even_beside_a_library_op_with_a_masked_fill():
    """``masked_fill_kernel`` computes (it selects); it does not make the library op one that moves data, so the
    autotuner's fills are not counted as work: FLA's honest logsumexp was a library fallback at 3% without this."""
    att, why = _run([(FILL_INT, 99214.9), ("logsumexp_fwd_kernel", 3425.4), (MASKED_FILL, 1.1)],
                    {MASKED_FILL}, {"logsumexp_fwd_kernel"})
    assert why is None, why
    assert [k.kind for k in att.kernels] == ["copy", "dsl", "library"]


# profiled on the H200 at the smoke workload: tests/execute/fixtures/honest/sum_dim__partials_sum.py (a Triton kernel
# of per-block sums, then torch.sum over them) and the library's own torch.sum on the inputs
SUM_REDUCE = ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
              "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float")
PARTIALS_ROWS = [(SUM_REDUCE, 1.958 * 5), ("_sum_partial_kernel", 1.562 * 5)]


def _partials(rows, library_us, shares):
    rows = [attr.Row(n, us, 5) for n, us in rows]
    finishing = attr.finishes_partials(rows, 5, library_us, shares)
    att = attr.attribute(rows, 5, set(library_us), {"_sum_partial_kernel"}, finishing=finishing)
    return finishing, attr.fallback_reason(att)


def test_the_library_op_on_partial_results_is_finishing_work_where_time_cannot_tell():
    """At a launch-bound workload (every kernel about 2 us) the op on per-block partials takes as long as on the
    inputs: with the dry forward's record showing it on 1/64 of the input elements, it is finishing work. Without
    that record, or with the op on the inputs, it is a fallback as before."""
    assert _partials(PARTIALS_ROWS, {SUM_REDUCE: 2.4}, {"sum": 1 / 64}) == (True, None)
    finishing, why = _partials(PARTIALS_ROWS, {SUM_REDUCE: 2.4}, None)  # no complete dry record
    assert not finishing and why is not None and "library fallback" in why
    finishing, why = _partials(PARTIALS_ROWS, {SUM_REDUCE: 2.4}, {"sum": 1.0})  # the op on the inputs
    assert not finishing and why is not None


def test_a_dry_forward_on_partials_does_not_cover_a_real_fallback_where_time_can_tell():
    """The exploit: the dry forward calls the op on a small tensor, the real calls on the inputs. Where the op is
    not launch-bound its kernels then take its whole time: more than half of the op's own, a fallback still."""
    full = {SUM_REDUCE: 120.0}  # the library's sum on the inputs at a GPU workload
    cover = [(SUM_REDUCE, 118.0 * 5), ("_sum_partial_kernel", 3.0 * 5)]
    finishing, why = _partials(cover, full, {"sum": 1 / 64})
    assert not finishing and why is not None and "library fallback" in why
    honest = [(SUM_REDUCE, 2.5 * 5), ("_sum_partial_kernel", 118.0 * 5)]  # the same kernel honest at that size
    assert _partials(honest, full, {"sum": 1 / 64}) == (True, None)
