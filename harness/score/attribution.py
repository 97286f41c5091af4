"""Did the DSL do the work: the forward's GPU time by kind of kernel, and the library-fallback rule.

Inputs: the worker's kernel table for a window of calls (names with GPU
microseconds inside the forwards, from the profiler: a claim) and the
library's own kernels for the same workload, profiled in the trusted checker.
Each kernel name is classed, in this order::

    library   its name is one of the library op's kernels on this device (trusted: profiled in the checker)
    dsl       a Triton/TileLang kernel the worker's hooks saw launched (a name claim; never a library name)
    inductor  torch.compile's generated Triton (triton_poi_*, triton_red_*, ...)
    vendor    cuBLAS / cuDNN / CUTLASS / cuBLASLt names
    copy      data movement: PyTorch's copy and cast kernel, fills, memset/memcpy, concatenation copies
    aten      other PyTorch kernels (at::native::..., elementwise and reduce kernels)
    other     anything else

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
TABLE_ROWS = 12
_INDUCTOR = re.compile(r"^triton_(poi|red|per|tem|for|spl|mm|bmm|conv)_")
_VENDOR = re.compile(r"cublas|cudnn|cutlass|xmma|nvjet|sm\d+_.*gemm|gemv2?T?_kernel|gemmSN|gemmk1|splitKreduce|"
                     r"cutensor|cufft|cusparse|magma|flash_fwd|fmha", re.I)
_COPY = re.compile(r"direct_copy_kernel|CatArrayBatchedCopy|FillFunctor|fill_kernel|^Memcpy|^Memset", re.I)
_ATEN = re.compile(r"at::|aten::|c10::|elementwise_kernel|reduce_kernel|vectorized_|unrolled_|"
                   r"distribution_|Memset|Memcpy|CatArrayBatched|index_elementwise|softmax_warp|"
                   r"cunn_|layer_norm|batch_norm|group_norm|im2col|col2im", re.I)


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
    if _VENDOR.search(name):
        return "vendor"
    if _COPY.search(name) and not any(_COPY.search(n) for n in library):
        return "copy"  # unless the op itself moves data (its own kernels copy): then a copy may be its work
    if _ATEN.search(name):
        return "aten"
    return "other"


def _matches_dsl(name: str, dsl: set[str]) -> bool:
    """A profiled kernel name is a DSL kernel's when it is that kernel's name (Triton may append a suffix)."""
    base = name.split("(", 1)[0].strip()
    return any(base == d or base.startswith(d + "_") for d in dsl if d)


def attribute(rows: Iterable[Row], calls: int, library: set[str], dsl: set[str]) -> KernelAttribution:
    """The kernel table of a window of ``calls`` forwards, classed and as shares of the forwards' GPU time."""
    rows = [r for r in rows if r.us > 0]
    total = sum(r.us for r in rows)
    per = max(1, calls)
    classed = sorted(((r, classify(r.name, library, dsl)) for r in rows), key=lambda rc: -rc[0].us)
    dsl_us = sum(r.us for r, kind in classed if kind == "dsl")
    work = total - sum(r.us for r, kind in classed if kind == "copy")  # what computes: data movement left out
    table = tuple(KernelShare(name=r.name[:200], kind=kind, us_per_call=round(r.us / per, 3),
                              share=round(r.us / total, 4) if total else 0.0) for r, kind in classed[:TABLE_ROWS])
    return KernelAttribution(method="profiler", dsl_share=round(dsl_us / work, 4) if work > 0 else 0.0, kernels=table)


def fallback_reason(att: KernelAttribution) -> str | None:
    """Why ``att`` is a library fallback, or None."""
    if att.dsl_share is None:
        return None
    copy = sum(k.share for k in att.kernels if k.kind == "copy")
    library = sum(k.share for k in att.kernels if k.kind == "library") / max(1e-9, 1.0 - copy)
    if att.dsl_share >= MIN_DSL_SHARE and library < MAX_LIBRARY_SHARE:
        return None
    others = ", ".join(f"{k.name[:60]} ({k.kind}, {k.share:.0%})" for k in att.kernels if k.kind != "dsl")[:400]
    if att.dsl_share < MIN_DSL_SHARE:
        return (f"library fallback: {att.dsl_share:.0%} of the forward's GPU time (less data movement) is in the "
                f"candidate's own Triton/TileLang kernels (at least {MIN_DSL_SHARE:.0%} required); the rest ran in "
                f"{others or 'other kernels'}")
    return (f"library fallback: {library:.0%} of the forward's GPU time is in the library op's own kernels (at most "
            f"{MAX_LIBRARY_SHARE:.0%} allowed beside the candidate's): {others}")
