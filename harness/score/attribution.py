"""Did the DSL do the work: the forward's GPU time by kind of kernel, and the library-fallback rule.

Inputs: the worker's kernel table for a window of calls (names with GPU
microseconds inside the forwards, from the profiler: a claim), the names of
the Triton/TileLang kernels the worker says it launched (a claim too: a
Triton kernel's name is its function's ``__name__``, which the candidate
picks and can even reassign), and the library's own kernels for the same
workload, profiled in the trusted checker. Each kernel name is classed, in
this order::

    library   its name is one of the library op's kernels on this device (trusted: profiled in the checker)
    dsl       a Triton/TileLang kernel the worker reports launching, by the name rule below (never a library name)
    inductor  torch.compile's generated Triton (triton_poi_*, triton_red_*, ...)
    vendor    cuBLAS / cuDNN / CUTLASS / cuBLASLt names
    copy      data movement: PyTorch's copy and cast kernel, fills, memset/memcpy, concatenation copies
    partials  the library op's kernels where they finish the candidate's partial results (below)
    aten      other PyTorch kernels (at::native::..., elementwise and reduce kernels)
    other     anything else

The name rule. A profiled kernel is ``dsl`` only when its name, less a
trailing argument list ``(...)``, is a plain identifier (``str.isidentifier``)
and is a reported name exactly, or a reported name plus old Triton's
specialisation suffix (``_0d1d2de``, ``_0123``: argument numbers, each
followed by at most ``c``, ``d``, ``e``; nothing else may follow). On the
H200 (Triton 3.6, TileLang 0.1.15) a Triton kernel profiles as exactly its
function's name and a TileLang kernel as ``main_kernel``. Reported names that
are not plain identifiers are ignored. A name in a vendor library's kernel
family (:data:`_VENDOR_FAMILY`, matched at the start: ``sm90_...``,
``nvjet...``, ``cutlass...``, ``ampere_...``) or in torch.compile's is never
``dsl``, reported or not: a kernel so named cannot be told apart from the
vendor's in a profile, so it is classed ``vendor`` (or ``inductor``), and a
fallback verdict that involves one names it and asks for it to be renamed (a
leading underscore will do: ``_sm90_gemm_kernel`` is the candidate's).

Why the name rule (an attack that needs no tampering): a rule that also took any
name that *started with* a reported name plus ``_`` was fooled. A tiny
Triton kernel named ``sm90``, ``sm80`` or ``nvjet``, launched beside torch.mm
on transposed operands (so that cuBLAS runs a kernel other than the library's
profiled one), made cuBLAS's ``nvjet_sm90_hsh_...``/``sm80_xmma_gemm_...`` the
candidate's: PASSED at E_lib 0.96-0.995, efficient, on the H200; a Triton
kernel relabelled ``void at::native::unrolled`` did the same for PyTorch's
GELU written into a misaligned output (another instantiation than the
library's). Both are exploit fixtures in tests/execute/fixtures/exploits/
(``gemm_square__vendor_kernel_name.py``, ``gelu__aten_kernel_name.py``).
Exact matching alone is not enough either: cuBLAS and cuDNN kernel names are
often plain identifiers, and a ``def`` can carry one learned from a profile.
PyTorch's own kernels are demangled C++ (``void at::native::...``), never
plain identifiers.

A forward is a library fallback (REWARD_HACK, recorded with its kernel
table) when less than :data:`MIN_DSL_SHARE` of its GPU time is in the
candidate's own DSL kernels, or when :data:`MAX_LIBRARY_SHARE` or more of it
is in the library op's own kernels (learned from the reference, so trusted).
Both shares are of the forward's GPU time *less its data movement* (``copy``
kernels): a copy or a cast computes nothing of the op, so a candidate that
promotes to float64 around its own kernel is slow (an authoring defect, which
the screening reports), not a fallback. Where the op itself moves data (its
library kernels include a copy: a concatenation, a layout change), copies
count as work like any PyTorch kernel. A ``# kernelgate: dsl=...`` header changes
nothing here.

Finishing partial results. A kernel may end with the library's op on a small tensor of its own partial results
(flash-linear-attention's logsumexp over per-block maxima; a two-stage sum). Time alone cannot tell that from the
op on the inputs where the op is launch-bound: at a small workload every kernel takes about 2 us, and such honest
kernels were library fallbacks at 12% and 44% on an H200. So the library's kernels are counted as finishing work
(``partials``, left out of the shares like copies) when :func:`finishes_partials` holds: the workload's dry forward,
under the aten recorder, called the library op on less than a tenth of the forward's input elements, *and* the
forward's library kernels took at most :data:`PARTIALS_TIME_SHARE` of the library op's own time on the inputs, or
every one of the op's own kernels is launch-bound (under :data:`LAUNCH_BOUND_US`), where time tells nothing. The
exploit the time condition stops: a forward that calls the op on a small tensor in the dry forward and on the
inputs in the real calls spends the op's whole time in its kernels, a fallback still. Its limit: where every
kernel of the op is launch-bound, such a forward is not caught at that workload (its records at the problem's
larger workloads are).

Why these numbers: a Triton or TileLang candidate may legitimately prepare
with a few PyTorch ops (a ``.contiguous()``, an output allocation, a bias
add); when most of its GPU time is elsewhere, the DSL is not what is being
measured. The second rule stops a candidate that runs a kernel of its own as
cover and returns the library's result (seen on the H200: a GELU whose own
kernel took 54% of the time and whose output came from PyTorch's, 46%).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from harness.records import KernelAttribution, KernelShare

MIN_DSL_SHARE = 0.5
MAX_LIBRARY_SHARE = 0.4
PARTIALS_MAX_SHARE = 0.1
"""The library op's largest share of the dry forward's input elements for its kernels to count as finishing work
(the CPU path's rule, :data:`harness.score.judge.FALLBACK_MIN_SHARE`, has the same value)."""
PARTIALS_TIME_SHARE = 0.5
"""... and the most of the library op's own GPU time (on the inputs) its kernels may take in the forward."""
LAUNCH_BOUND_US = 5.0
"""A library op whose every kernel takes less than this (us per call) is launch-bound: its time says nothing of the
size it ran on."""
TABLE_ROWS = 12
_INDUCTOR = re.compile(r"^triton_(poi|red|per|tem|for|spl|mm|bmm|conv)_")
_VENDOR = re.compile(r"cublas|cudnn|cutlass|xmma|nvjet|sm\d+_.*gemm|gemv2?T?_kernel|gemmSN|gemmk1|splitKreduce|"
                     r"cutensor|cufft|cusparse|magma|flash_fwd|fmha", re.I)
_COPY = re.compile(r"direct_copy_kernel|CatArrayBatchedCopy|FillFunctor|(?<!masked_)fill_kernel|^Memcpy|^Memset", re.I)
_ATEN = re.compile(r"at::|aten::|c10::|elementwise_kernel|reduce_kernel|vectorized_|unrolled_|"
                   r"distribution_|Memset|Memcpy|CatArrayBatched|index_elementwise|softmax_warp|"
                   r"cunn_|layer_norm|batch_norm|group_norm|im2col|col2im", re.I)
_VENDOR_FAMILY = re.compile(r"(?:sm\d+[a-z]?(?:_|$)|nvjet|cutlass|cublas|cudnn|scudnn|xmma|fmha_cutlass|"
                            r"(?:kepler|maxwell|pascal|volta|turing|ampere|hopper|blackwell)(?:_|$)|"
                            r"[sdhcz]gemm_(?:sm\d|largek|\d+x\d+))", re.I)
"""Vendor kernel families whose names are plain identifiers, matched at the start of a name: cuBLAS/cuBLASLt
(sm90_xmma_gemm_..., nvjet_hsh_..., ampere_sgemm_128x64_nn, volta_h884gemm_..., sgemm_largek_lds64), cuDNN
(sm80_xmma_fprop_..., cudnn_infer_..., volta_scudnn_..., scudnn_winograd_...), CUTLASS as the libraries ship it
(cutlass_80_tensorop_..., cutlass3x_sm90_...) and PyTorch's CUTLASS attention (fmha_cutlassF_...)."""
_OLD_TRITON_SUFFIX = re.compile(r"(?:\d+c?d?e?)+")
"""What Triton before 3.0 appended to a kernel's name: each argument's number, then ``c`` (equal to 1), ``d``
(divisible by 16), ``e`` (divisible by 8) where they held."""


@dataclass(frozen=True, slots=True)
class Row:
    name: str
    us: float
    count: int


def classify(name: str, library: set[str], dsl: set[str]) -> str:
    if name in library:
        return "library"
    if _matches_dsl(name, dsl):
        return "dsl"
    if _INDUCTOR.search(name):
        return "inductor"
    if _VENDOR.search(name) or _VENDOR_FAMILY.match(_base(name)):
        return "vendor"
    if _COPY.search(name) and not any(_COPY.search(n) for n in library):
        return "copy"  # unless the op itself moves data (its own kernels copy): then a copy may be its work
    if _ATEN.search(name):
        return "aten"
    return "other"


def _base(name: str) -> str:
    """``name`` less a trailing argument list: ``fmha_cutlassF_f16_aligned_64x64_rf_sm80(Params)`` -> its first
    part. Only a balanced ``(...)`` at the very end is taken off."""
    name = name.strip()
    if not name.endswith(")"):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(name[i], 0)
        if depth == 0:
            return name[:i].strip()
    return name


def _claimable(name: str) -> bool:
    """Whether a kernel of this name can be the candidate's: a plain identifier that is not in a vendor library's
    kernel family nor shaped like torch.compile's (a profile cannot tell such a kernel from theirs)."""
    return name.isidentifier() and not _VENDOR_FAMILY.match(name) and not _INDUCTOR.match(name)


def _matches_dsl(name: str, dsl: set[str]) -> bool:
    """A profiled kernel is a reported DSL kernel's when its name is that kernel's name exactly, or that name plus
    old Triton's specialisation suffix; both names must be :func:`_claimable`."""
    base = _base(name)
    if not _claimable(base):
        return False
    return any(base == d or (base.startswith(d + "_") and _OLD_TRITON_SUFFIX.fullmatch(base[len(d) + 1:]))
               for d in dsl if _claimable(d))


def finishes_partials(rows: Iterable[Row], calls: int, library_us: dict[str, float],
                      dry_shares: dict[str, float] | None) -> bool:
    """Whether the library op's kernels in a window of ``calls`` forwards finish partial results (module
    docstring): ``library_us`` is the op's own GPU microseconds per call by kernel name (the checker's profile on
    the inputs), ``dry_shares`` each library op's share of the dry forward's input elements (None: no complete
    dry record)."""
    if not dry_shares or max(dry_shares.values()) >= PARTIALS_MAX_SHARE or not library_us:
        return False
    used = sum(r.us for r in rows if r.name in library_us) / max(1, calls)
    if used <= 0:
        return False
    return max(library_us.values()) < LAUNCH_BOUND_US or used <= PARTIALS_TIME_SHARE * sum(library_us.values())


def attribute(rows: Iterable[Row], calls: int, library: set[str], dsl: set[str],
              finishing: bool = False) -> KernelAttribution:
    """The kernel table of a window of ``calls`` forwards, classed and as shares of the forwards' GPU time.
    ``finishing``: the library op's kernels finish partial results (:func:`finishes_partials`), classed
    ``partials`` and left out of the shares like copies."""
    rows = [r for r in rows if r.us > 0]
    total = sum(r.us for r in rows)
    per = max(1, calls)

    def kind_of(name: str) -> str:
        kind = classify(name, library, dsl)
        return "partials" if finishing and kind == "library" else kind
    classed = sorted(((r, kind_of(r.name)) for r in rows), key=lambda rc: -rc[0].us)
    dsl_us = sum(r.us for r, kind in classed if kind == "dsl")
    # what computes: data movement and the finishing of the candidate's own partial results left out
    work = total - sum(r.us for r, kind in classed if kind in ("copy", "partials"))
    table = tuple(KernelShare(name=r.name[:200], kind=kind, us_per_call=round(r.us / per, 3),
                              share=round(r.us / total, 4) if total else 0.0) for r, kind in classed[:TABLE_ROWS])
    return KernelAttribution(method="profiler", dsl_share=round(dsl_us / work, 4) if work > 0 else 0.0, kernels=table)


def fallback_reason(att: KernelAttribution) -> str | None:
    """Why ``att`` is a library fallback, or None."""
    if att.dsl_share is None:
        return None
    copy = sum(k.share for k in att.kernels if k.kind in ("copy", "partials"))
    library = sum(k.share for k in att.kernels if k.kind == "library") / max(1e-9, 1.0 - copy)
    if att.dsl_share >= MIN_DSL_SHARE and library < MAX_LIBRARY_SHARE:
        return None
    others = ", ".join(f"{k.name[:60]} ({k.kind}, {k.share:.0%})" for k in att.kernels if k.kind != "dsl")[:400]
    if att.dsl_share < MIN_DSL_SHARE:
        return (f"library fallback: {att.dsl_share:.0%} of the forward's GPU time (less data movement) is in the "
                f"candidate's own Triton/TileLang kernels (at least {MIN_DSL_SHARE:.0%} required); the rest ran in "
                f"{others or 'other kernels'}{_rename_hint(att)}")
    return (f"library fallback: {library:.0%} of the forward's GPU time is in the library op's own kernels (at most "
            f"{MAX_LIBRARY_SHARE:.0%} allowed beside the candidate's): {others}{_rename_hint(att)}")


def _rename_hint(att: KernelAttribution) -> str:
    """For a fallback verdict: the kernels in the table named like a vendor's or torch.compile's, which are never
    counted as the candidate's whoever launched them, and how to fix that where one is the candidate's own."""
    named = [k.name for k in att.kernels if _base(k.name).isidentifier() and not _claimable(_base(k.name))]
    if not named:
        return ""
    return (f"; named like a vendor library's (cuBLAS, cuDNN, CUTLASS) or torch.compile's kernels: "
            f"{', '.join(f'`{n[:80]}`' for n in named[:4])}. A kernel so named is never counted as the candidate's, "
            f"since a profile cannot tell it from theirs: if one of them is your Triton/TileLang kernel, rename it "
            f"(a leading underscore will do)")
