"""The catalog of lint rules: id, kinds, severities, hint, what it matches, fixtures.

Importing this module registers every rule in
:data:`harness.diagnose.lint.registry.REGISTRY`, in the order below (the
order of :data:`RULES`). Checker modules create findings with
:func:`finding`, so a rule can only emit the kinds and severities declared
here. The measured precision and recall of each rule on kernels it was not
tuned on are in ``docs/lint.md``.
"""

from __future__ import annotations

from harness.diagnose.findings import Finding
from harness.diagnose.lint.registry import REGISTRY, Rule

_FIX = "tests/diagnose/fixtures/lint/defect/"
_CU = "tests/diagnose/fixtures/lint/cuda/"
_SUB = "submissions/defects/"

REGISTRY.register(Rule(
    id="sequential-reduction",
    kinds=("triton", "tilelang", "cuda"),
    severities=("defect",),
    hint="reduce a whole block at once (Triton: tl.load a tl.arange block and tl.sum/tl.max it; "
         "TileLang: T.reduce_sum/T.reduce_max over a fragment) instead of one element per iteration",
    summary="A reduction done one element per loop iteration: a Triton loop (>= 16 or unknown trips) adding a "
            "scalar tl.load (no block work in the added term); a TileLang serial loop (T.serial/range, >= 32 or "
            "unknown trips) folding one kernel-argument element per iteration into an accumulator, either per "
            "thread (inside T.Parallel, walking a row) or for the whole block, in a kernel with no "
            "T.reduce_*/atomic/shuffle/T.gemm; a TileLang kernel with threads=1 that loops; in lowered CUDA, a "
            "loop of >= 64 or unknown trips folding a global element per iteration in a kernel with no "
            "shuffle/AllReduce/atomic/MMA.",
    fixtures=(_FIX + "triton_sum_scalar_loop.py", _FIX + "tilelang_layernorm_serial_row.py",
              _FIX + "tilelang_rowsum_thread_per_row.py", _SUB + "sum_dim__scalar_loop.py",
              _SUB + "max_dim__tl_serial.py", _SUB + "layernorm__tl_serial_row.py", _CU + "rowsum_serial.cu"),
))

REGISTRY.register(Rule(
    id="fp64-promotion",
    kinds=("triton", "tilelang", "host", "cuda"),
    severities=("defect",),
    hint="compute in float32 (accumulate in fp32, not fp64); GPUs run fp64 at a small fraction of fp32 speed",
    summary="float64 in a kernel (tl.float64, 'float64', T.float64) or in the code forward runs "
            "(torch.float64, .double()); dtype checks and dtype tables do not count. In lowered CUDA: "
            "'double' in a kernel whose pointer arguments are not double.",
    fixtures=(_FIX + "triton_softmax_fp64.py", _FIX + "tilelang_sum_fp64.py", _SUB + "rmsnorm__fp64_promotion.py",
              _SUB + "silu__cast_in_loop.py", _CU + "exp_double.cu"),
))

REGISTRY.register(Rule(
    id="cast-in-inner-loop",
    kinds=("triton", "tilelang"),
    severities=("defect", "warning"),
    hint="convert once outside the loop and keep the accumulator in float32 for the whole loop",
    summary="Conversions repeated every loop iteration. defect: an accumulator kept in low precision and "
            "re-widened (acc = (acc.to(f32) + x).to(f16)), a round-trip chain x.to(a).to(b).to(a) inside a loop. "
            "warning: a loop-invariant block re-loaded and converted each iteration (TileLang: a loop-invariant "
            "buffer element converted in a serial/pipelined loop), tl.dot operands widened to fp32 in the K loop, "
            "a redundant .to(a).to(a). Converting each freshly loaded block once is normal and not reported.",
    fixtures=(_FIX + "triton_sum_fp16_accumulator.py", _FIX + "triton_scale_cast_in_loop.py",
              _FIX + "tilelang_scale_cast_in_loop.py"),
))

REGISTRY.register(Rule(
    id="one-element-per-program",
    kinds=("triton", "tilelang"),
    severities=("defect",),
    hint="give each program/block a tile: offs = pid * BLOCK + tl.arange(0, BLOCK) with a mask "
         "(TileLang: T.Parallel over a block of >= 128 elements)",
    summary="A Triton kernel with no tl.arange/block pointer whose programs each load and store one element "
            "(grid-of-one finalize kernels excepted), a launch whose blocks resolve to one element (BLOCK=1), a "
            "TileLang block that computes a single element (no T.Parallel or tile copy, or T.Parallel over one "
            "element, or threads=1 with no loop).",
    fixtures=(_FIX + "triton_gelu_one_element.py", _FIX + "triton_add_block1.py",
              _FIX + "tilelang_add_one_element.py", _SUB + "gelu__one_elem_per_program.py"),
))

REGISTRY.register(Rule(
    id="unfused-multipass",
    kinds=("host",),
    severities=("defect", "warning"),
    hint="fuse the passes into one kernel that keeps the row/tile in registers (e.g. one-pass layernorm "
         "with tl.sum for mean and variance)",
    summary="Kernels on one execution path of forward (or a helper) handing data through memory. defect: >= 3 "
            "launches that re-read the same input and pass a value between them (3-kernel layernorm / softmax), "
            "or >= 3 launches chaining >= 2 full-size intermediates. warning: the two-kernel forms (stats pass + "
            "apply pass; GEMM + separate epilogue). Launches in exclusive if/else branches are separate paths.",
    fixtures=(_FIX + "triton_layernorm_3pass.py", _FIX + "triton_layernorm_2pass.py", _SUB + "softmax__three_pass.py"),
))

REGISTRY.register(Rule(
    id="tiny-tile",
    kinds=("triton", "tilelang", "cuda"),
    severities=("defect", "warning"),
    hint="use tiles of >= 128 elements (>= 64x64 for tl.dot/T.gemm) and >= 128 threads per block",
    summary="Triton blocks whose resolved tl.arange sizes multiply to < 32 elements, or a tl.dot dimension < 16; "
            "TileLang threads < 32, a T.gemm tile dimension < 16, or T.Parallel over < 32 elements. Only sizes "
            "that resolve to constants (defaults, launch arguments, autotune configs, module constants) are "
            "judged. Lowered CUDA: __launch_bounds__ under 32, one thread per block over a loop (defect), one "
            "warp walking a long serial loop with no cross-thread reduction (warning).",
    fixtures=(_FIX + "triton_relu_tiny_block.py", _FIX + "tilelang_scale_tiny_threads.py", _CU + "tiny_block.cu",
              _CU + "one_warp_long_loop.cu"),
))

REGISTRY.register(Rule(
    id="host-sync-in-forward",
    kinds=("host",),
    severities=("defect",),
    hint="keep values on the device; compute shapes from .shape and drop .item()/.cpu()/synchronize from forward",
    summary=".item(), .cpu(), .tolist(), .numpy(), .to('cpu'), torch.cuda.synchronize(), *.synchronize() in the "
            "code forward runs (reading back a CPU-built tensor does not count).",
    fixtures=(_FIX + "triton_scale_host_sync.py",),
))

REGISTRY.register(Rule(
    id="non-coalesced-access",
    kinds=("triton",),
    severities=("warning",),
    hint="make the tl.arange axis that walks memory contiguously the fastest one (or transpose the tile "
         "so consecutive lanes read consecutive addresses)",
    summary="A Triton load/store whose every tl.arange term is multiplied by a row stride (t.stride(0) of a 2-D "
            "tensor at the launch, t.shape[-1], or a *row_stride*/n_cols name when no launch is visible), i.e. no "
            "lane-contiguous axis: one column read down the rows.",
    fixtures=(_FIX + "triton_colsum_strided.py",),
))

REGISTRY.register(Rule(
    id="matmul-without-tensor-cores",
    kinds=("triton", "tilelang"),
    severities=("defect", "warning"),
    hint="use tl.dot on [BLOCK_M, BLOCK_K] x [BLOCK_K, BLOCK_N] tiles (TileLang: T.gemm) so the "
         "reduction runs on tensor cores; for convolution, an implicit GEMM",
    summary="A matrix product computed with CUDA-core multiply-adds. defect: in a Triton kernel with no tl.dot, "
            "an accumulator (acc += a * b, tl.fma, tl.sum of a 3-D broadcast product) carried across a loop with "
            "a runtime or >= 16 trip count, adding the product of two loads of different pointer arguments where "
            "each operand has an index the other lacks (a scalar weight times an input block, a rank-1 update); "
            "TileLang: the same in a kernel with no T.gemm, a serial/pipelined loop accumulating the product of "
            "two kernel-argument or shared-memory buffers (fp32 shared tiles excepted: T.gemm would be TF32). "
            "warning: the Triton matrix-vector form tl.sum(w * x[None, :], axis=1) whose vector has no index of "
            "its own. Not reported: depthwise products, squares of one tensor, products not carried across a "
            "loop, register-tiled products of local fragments. Where it fires, sequential-reduction is not "
            "repeated for the same statement.",
    fixtures=(_FIX + "triton_matmul_outer_product.py", _FIX + "tilelang_conv1x1_channel_loop.py",
              _FIX + "triton_gemv_broadcast_sum.py", _SUB + "conv2d_1x1__scalar_channel_loop.py",
              _SUB + "gemm_tall_skinny__no_tensor_cores.py", _SUB + "conv2d_3x3__naive_direct.py"),
))

RULES: tuple[str, ...] = REGISTRY.ids()
"""Every rule id, in catalog order."""

HINTS: dict[str, str] = {r.id: r.hint for r in REGISTRY}
"""Rule id -> its fix hint (the hint every finding of the rule carries)."""

PARSE_ERROR = "parse-error"
"""Not a rule: the one ``info`` finding for a source that does not parse (no rule was checked)."""


def finding(rule: str, kind: str, severity: str, line: int | None, message: str) -> Finding:
    """A finding of a catalogued rule (see :meth:`RuleRegistry.finding`)."""
    return REGISTRY.finding(rule, kind, severity, line, message)
