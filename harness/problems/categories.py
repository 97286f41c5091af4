"""Operator category of a plain KernelBench file: a checked-in map first, then what its forward runs.

Five categories: normalization, reduction, convolution, gemm, elementwise. A
fused op (KernelBench level 2: conv + ReLU + bias) takes the category of its
dominant op by FLOPs, so conv + ReLU is convolution and GEMM + BatchNorm is gemm.

1. :data:`SIDECAR` (``kernelbench_categories.json``, beside this module) maps
   every KernelBench level-1/2/3 id to its level and category, labelled by
   hand (see its ``about`` field). It wins for a file whose id is a
   KernelBench id.
2. Otherwise :func:`classify_ops` judges the aten ops the forward ran on meta
   tensors (:mod:`harness.problems.derive`): convolution vs matmul FLOPs, then
   normalization (a norm op, or a sum/mean-type reduction, with an output
   shaped like the input), reduction ops, else elementwise.
3. When the forward could not run at all, :func:`classify_name` reads the id's
   words (CamelCase and ``_`` split; the first conv/gemm word wins, so
   ``Gemm_Scale_BatchNorm`` is gemm, not normalization).

How well 2 and 3 agree with the map is measured by
``tests/problems/test_categories.py`` and stated in ``docs/problem-format.md``.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

from harness.problems.derive import CONV_OPS, MM_OPS, NORM_OPS, NORMALIZING_REDUCTIONS, REDUCTION_OPS, DerivedCost

CATEGORIES = ("normalization", "reduction", "convolution", "gemm", "elementwise")
SIDECAR = Path(__file__).with_name("kernelbench_categories.json")


@functools.lru_cache(maxsize=1)
def kernelbench_map() -> dict[str, dict]:
    """``{KernelBench id: {"level": int, "category": str}}`` from the checked-in sidecar (empty if it is missing)."""
    try:
        data = json.loads(SIDECAR.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return dict(data.get("problems", {}))


def sidecar_entry(problem_id: str) -> dict | None:
    return kernelbench_map().get(problem_id)


#: Substrings of an id's words that name a convolution (ops or conv networks) or a matmul-heavy model.
_CONV_PARTS = ("conv", "depthwise", "pointwise", "resnet", "densenet", "squeezenet", "shufflenet", "mobilenet",
               "efficientnet", "regnet", "vgg", "alexnet", "googlenet", "lenet", "unet", "inception")
_GEMM_PARTS = ("matmul", "gemm", "bmm", "attention", "transformer", "gpt", "lstm", "gru", "rnn", "mlp", "einsum",
               "mamba", "netvlad", "swin")
_GEMM_WORDS = {"mm", "linear", "matrix", "multiplication", "vit", "bert", "llama"}
_REDUCTION_WORDS = {"sum", "mean", "max", "min", "argmax", "argmin", "prod", "reduction", "reduce", "variance", "std"}
_REDUCTION_PARTS = ("softmax", "logsumexp", "cumsum", "cumprod", "argm", "pool", "loss")


def words(problem_id: str) -> list[str]:
    """Lower-case words of an id: its ``_``-separated parts and their CamelCase pieces.

    ``'19_ConvTranspose2d_GELU'`` -> ``['19', 'convtranspose2d', 'conv', 'transpose2d', 'gelu']``.
    """
    out: list[str] = []
    for part in re.split(r"[_\W]+", problem_id):
        if not part:
            continue
        out.append(part.lower())
        pieces = re.findall(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+\d*[a-z]?|[A-Z]+\d*[a-z]?|\d+[a-z]*", part)
        if len(pieces) > 1:
            out.extend(p.lower() for p in pieces)
    return out


def classify_name(problem_id: str) -> str:
    """Category from the id's words alone: the last resort, when the forward could not run.

    Convolution and matmul words are looked for first, because a fused op is
    named after its dominant op first (``Gemm_Scale_BatchNorm`` is gemm).
    """
    ws = words(problem_id)
    if any(p in w for w in ws for p in _CONV_PARTS):
        return "convolution"
    if any(w in _GEMM_WORDS or any(p in w for p in _GEMM_PARTS) for w in ws):
        return "gemm"
    if any("norm" in w for w in ws):
        return "normalization"
    if any(w in _REDUCTION_WORDS or any(p in w for p in _REDUCTION_PARTS) for w in ws):
        return "reduction"
    return "elementwise"


def classify_ops(cost: DerivedCost) -> str | None:
    """Category from the forward's aten ops and FLOPs; None when no op was seen (nothing to judge)."""
    if not cost.op_counts:
        return None
    conv, mm = cost.flops_by_family.get("conv", 0), cost.flops_by_family.get("mm", 0)
    if conv or mm:
        return "convolution" if conv >= mm else "gemm"
    ops = set(cost.op_counts)
    if ops & CONV_OPS:
        return "convolution"
    if ops & MM_OPS:
        return "gemm"
    shaped_like_input = cost.output_like_input is not False
    if ops & NORM_OPS and shaped_like_input:
        return "normalization"
    reductions = ops & REDUCTION_OPS
    if reductions and shaped_like_input and reductions <= NORMALIZING_REDUCTIONS and cost.output_like_input:
        return "normalization"
    if reductions or ops & NORM_OPS:
        return "reduction"
    return "elementwise"


def classify(problem_id: str, cost: DerivedCost | None) -> tuple[str, str]:
    """(category, source) for a plain file: source is ``kernelbench map``, ``ops`` or ``name``."""
    entry = sidecar_entry(problem_id)
    if entry and entry.get("category") in CATEGORIES:
        return entry["category"], "kernelbench map"
    if cost is not None:
        cat = classify_ops(cost)
        if cat is not None:
            return cat, "ops"
    return classify_name(problem_id), "name"
