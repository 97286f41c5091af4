"""Value profiles: the families of input values correctness is checked on, each within its input's domain.

A kernel that is right on ``randn`` can still be wrong on ordinary inputs: a softmax without the max
subtraction overflows at ``x * 32`` or ``x + 100``; a LayerNorm taking the variance as E[x^2] - E[x]^2
cancels on rows far from zero; a loss returning the closed-form expectation of the public input
distribution is right only for that distribution. Each correctness round and each verified timed call
therefore draws its inputs from one *profile*: ``get_inputs()`` under the call's seed, then every floating
input rewritten by the profile. The profile index is the wire's per-call ``transform`` integer
(:class:`harness.execute.wire.protocol.Call`), so the worker and the checker make identical inputs from
``(seed, transform)`` without talking to each other.

Profiles respect each input's *domain*, read from the ``get_inputs()`` draw itself (the same draw on both
sides, so both read the same domain):

=========  ===========================================================  ==========================================
domain     what the draw looks like                                     examples
=========  ===========================================================  ==========================================
integral   a floating tensor whose every value is an integer            {0, 1} masks, {-1, 1} hinge labels: kept
prob       non-negative, rows (last dim) summing to 1                   KLDiv's softmax rows
unit       within [0, 1]                                                ``torch.rand`` probabilities, BCE inputs
positive   non-negative                                                 ``randn().abs()``, variances
real       anything else                                                ``randn``
=========  ===========================================================  ==========================================

Integer and boolean tensors (indices, labels) are never changed. A problem annotated
``input_transform = "positive"`` has every floating input made positive (``|x| + 1e-3``, in every profile,
the standard one included) and read as ``positive``; ``"scale"`` allows only the profiles that rescale
(:attr:`Profile.scale_only`); ``"none"`` only the standard one.

Whether a profile is *used* for a (problem, workload) is decided by probing in the trusted checker
(:mod:`harness.execute.checker.fairness`): the float64 reference must be finite and the library itself must
pass the tolerance with room to spare. This module only makes the values.

Memory: a profile works through a tensor in blocks of whole rows (:data:`BLOCK_ELEMENTS`), so its float32
temporaries stay a few blocks whatever the input's size (a KernelBench input of several GiB would otherwise
need several copies more).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

BLOCK_ELEMENTS = 1 << 24
"""Elements a profile rewrites at a time (64 MiB per float32 temporary)."""

DOMAINS = ("integral", "prob", "unit", "positive", "real")


@dataclass(frozen=True, slots=True)
class Profile:
    """One family of input values: its wire index, name, and what it is for."""

    index: int
    name: str
    values: str
    """What the values look like, per domain (the docs' table is generated from this)."""
    catches: str
    """The bug classes it is there for."""
    scale_only: bool = False
    """Only rescales inputs (allowed for problems annotated ``input_transform = "scale"``)."""


PROFILES: tuple[Profile, ...] = (
    Profile(0, "normal", "get_inputs() as written (the public distribution)", "anything wrong on the public inputs",
            scale_only=True),
    Profile(1, "large", "real/positive: x * 32", "overflow: exp without the max subtraction, squares in half "
            "precision", scale_only=True),
    Profile(2, "row_offset", "real: x + o per row, o = +-[64, 128) with a random sign per row; positive: x + [64, 128)",
            "cancellation (one-pass variance), a max or mean taken across rows instead of per row"),
    Profile(3, "heavy_tail", "real: Student-t with 2 degrees of freedom (x / sqrt(E), E ~ Exp(1), E >= 1e-4); "
            "positive: its magnitude", "outliers: a strided subsample misses them, one row far from the others"),
    Profile(4, "uniform", "real: U(-1, 1); positive: U(1e-3, 2); unit: U(0, 1); prob: normalised U(0, 1) rows",
            "a closed-form expectation of the public distribution"),
    Profile(5, "near_one", "real/positive: 1 + 1e-3 * x; unit: 1 - 1e-3 * x",
            "cancellation at small variance (one-pass variance), log and division near 1"),
    Profile(6, "many_zeros", "90% of the values set to 0 (prob rows renormalised; a row left empty keeps its values)",
            "sparsity assumptions, division by a zero sum, subsampling"),
    Profile(7, "peaked", "prob: rows sharpened (p^4, renormalised); unit: x^8 (mass near 0)",
            "log of small probabilities, a closed-form expectation"),
    Profile(8, "flat", "prob: rows flattened (p^0.05, renormalised); unit: 0.5 + 0.01 * (x - 0.5)",
            "cancellation in a divergence of near-equal distributions, a closed-form expectation"),
)
BY_NAME = {p.name: p for p in PROFILES}
NORMAL = 0


def profile(index: int) -> Profile:
    """The profile with wire index ``index``; ValueError names the valid range."""
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(PROFILES):
        raise ValueError(f"value profile {index!r}: expected an index 0..{len(PROFILES) - 1} "
                         f"({', '.join(p.name for p in PROFILES)})")
    return PROFILES[index]


def candidate_profiles(input_transform: str) -> tuple[int, ...]:
    """The profiles a problem's ``input_transform`` annotation allows (before probing)."""
    if input_transform == "none":
        return (NORMAL,)
    if input_transform == "scale":
        return tuple(p.index for p in PROFILES if p.scale_only)
    return tuple(p.index for p in PROFILES)


def _generator(device: Any, seed: int, index: int, position: int) -> Any:
    """A generator for one input of one call: independent of ``get_inputs``'s own draws."""
    import torch

    h = hashlib.sha256(f"kernelgate-profile|{seed}|{index}|{position}".encode()).digest()
    g = torch.Generator(device=device)
    g.manual_seed(int.from_bytes(h[:8], "little") >> 1)
    return g


def domain_of(x: Any) -> str:
    """The domain of one floating tensor of a ``get_inputs()`` draw (see the module table)."""
    import torch

    if x.numel() == 0:
        return "integral"
    lo, hi = (float(v) for v in torch.aminmax(x.detach().reshape(-1)))
    if lo != lo or hi != hi:  # NaN in the draw: leave it as the problem wrote it
        return "integral"
    head = x.detach().reshape(-1)[:4096]
    if bool(torch.equal(head, torch.round(head))) and bool(torch.equal(x, torch.round(x))):  # the head first: cheap
        return "integral"
    if lo < 0:
        return "real"
    if hi <= 1.0:
        if x.dim() >= 1 and x.shape[-1] > 1:
            sums = x.reshape(-1, x.shape[-1]).sum(dim=1, dtype=torch.float64)
            if float((sums - 1.0).abs().max()) <= 1e-3:
                return "prob"
        return "unit"
    return "positive"


def _rows(shape: tuple[int, ...]) -> tuple[int, int]:
    """(rows, columns) of a tensor seen as rows over its last dimension (a 0-d tensor is one row of one)."""
    cols = shape[-1] if shape else 1
    n = 1
    for s in shape:
        n *= s
    return (n // cols if cols else 0), cols


def _renorm(p: Any, fallback: Any) -> Any:
    """Rows of ``p`` divided by their sums; a row summing to 0 keeps ``fallback``'s row."""
    import torch

    s = p.sum(dim=1, keepdim=True)
    return torch.where(s > 0, p / s.clamp_min(1e-30), fallback)


CHANGES: dict[str, frozenset[str]] = {
    "integral": frozenset(),
    "prob": frozenset({"uniform", "many_zeros", "peaked", "flat"}),
    "unit": frozenset({"uniform", "near_one", "many_zeros", "peaked", "flat"}),
    "positive": frozenset({"large", "row_offset", "heavy_tail", "uniform", "near_one", "many_zeros"}),
    "real": frozenset({"large", "row_offset", "heavy_tail", "uniform", "near_one", "many_zeros"}),
}
"""Which profiles change an input of each domain (the others leave it as ``get_inputs()`` made it)."""


def _block(name: str, domain: str, x: Any, g: Any) -> Any:
    """Profile ``name`` applied to one block of rows ``x`` (2-D, float32 or float64) of a ``domain`` input, for
    ``name in CHANGES[domain]``."""
    import torch

    def u() -> Any:
        return torch.rand(x.shape, generator=g, device=x.device, dtype=x.dtype)

    if domain in ("real", "positive"):
        pos = domain == "positive"
        if name == "large":
            return x * 32.0
        if name == "row_offset":
            r = torch.rand((x.shape[0], 2), generator=g, device=x.device, dtype=x.dtype)
            mag = 64.0 + 64.0 * r[:, :1]
            return x + (mag if pos else torch.where(r[:, 1:] < 0.5, -mag, mag))
        if name == "heavy_tail":
            e = (-torch.log1p(-u())).clamp_min(1e-4)  # Exp(1) from U in [0, 1)
            t = x / e.sqrt()
            return t.abs() if pos else t
        if name == "uniform":
            return 1e-3 + u() * (2.0 - 1e-3) if pos else u() * 2.0 - 1.0
        if name == "near_one":
            return 1.0 + 1e-3 * x
        if name == "many_zeros":
            return x * (u() >= 0.9)
    elif domain == "unit":
        if name == "uniform":
            return u()
        if name == "near_one":
            return 1.0 - 1e-3 * x
        if name == "many_zeros":
            return x * (u() >= 0.9)
        if name == "peaked":
            return x.pow(8)
        if name == "flat":
            return 0.5 + 0.01 * (x - 0.5)
    elif domain == "prob":
        if name == "uniform":
            return _renorm(u(), x)
        if name == "many_zeros":
            return _renorm(x * (u() >= 0.9), x)
        if name == "peaked":
            return _renorm(x.pow(4), x)
        if name == "flat":
            return _renorm(x.pow(0.05), x)
    raise ValueError(f"profile {name!r} does not change a {domain!r} input (see CHANGES)")


def apply(x: Any, index: int, *, seed: int, position: int, tdtype: Any, positive: bool) -> tuple[Any, bool]:
    """(the floating input ``x`` rewritten by profile ``index`` and cast to ``tdtype``, contiguous; whether the
    profile changed it).

    ``position``: the input's place in ``get_inputs()`` (each input gets its own random stream).
    ``positive``: the problem is annotated ``input_transform = "positive"`` (``|x| + 1e-3`` first, in every
    profile). The raw tensor is never changed in place (``get_inputs`` may return one tensor twice).
    """
    import torch

    name = profile(index).name
    if positive:
        x = x.abs() + 1e-3
    if index == NORMAL:
        return x.to(tdtype).contiguous(), False
    domain = "positive" if positive else domain_of(x)
    rows, cols = _rows(tuple(x.shape))
    if name not in CHANGES[domain] or rows == 0:
        return x.to(tdtype).contiguous(), False
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    g = _generator(x.device, seed, index, position)
    src = x.reshape(rows, cols)
    out = torch.empty((rows, cols), dtype=tdtype, device=x.device)
    step = max(1, BLOCK_ELEMENTS // max(1, cols))
    for a in range(0, rows, step):
        b = min(rows, a + step)
        out[a:b] = _block(name, domain, src[a:b].to(work), g)
    return out.reshape(x.shape), True
