"""Sums judged by the size of their terms (harness.execute.checker.terms + harness.score.correctness), and the
worst element a failure names."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from harness.execute.checker.terms import term_sizes, trail
from harness.score.correctness import compare_outputs


def _kl_inputs(seed: int, rows: int = 128, cols: int = 4096):
    """KernelBench 98_KLDivLoss's inputs (softmax rows) shifted by x0.5 + 1.5: no longer distributions, so the loss
    cancels to about 1e-4 while its terms are of order 1/cols."""
    g = torch.Generator().manual_seed(seed)
    p = torch.randn(rows, cols, generator=g).softmax(-1) * 0.5 + 1.5
    q = torch.randn(rows, cols, generator=g).softmax(-1) * 0.5 + 1.5
    return p, q


def _kl(p, q):
    return F.kl_div(torch.log(p), q, reduction="batchmean")


def _reference(p, q):
    with torch.no_grad(), trail():
        ref = _kl(p.double(), q.double())
    return [ref], term_sizes([ref])


def _honest(p, q):
    """An independent float32 kernel of the same formula (the public LLM kernel's order: per row, then rows)."""
    return ((q * (torch.log(q) - torch.log(p))).sum(dim=1)).sum() / p.shape[0]


def test_cancelling_loss_has_an_error_scale_far_above_its_result():
    p, q = _kl_inputs(0)
    refs, terms = _reference(p, q)
    assert terms[0] is not None and terms[0].shape == refs[0].shape
    t = q.double() * (torch.log(q.double()) - torch.log(p.double()))
    # the ingredients' magnitudes, combined like independent errors: at least the terms' own size
    assert float(terms[0]) >= float(t.pow(2).sum().sqrt()) / p.shape[0]
    assert abs(float(refs[0])) < 1e-4 * float(terms[0])  # the result is far below what it is computed from


def test_honest_float32_kl_passes_only_when_judged_by_its_terms():
    """The issue's case: PyTorch's own float32 kl_div and an honest kernel of the same formula miss the whole-
    tensor bound against the cancelled result on some seeds, and pass every seed against the terms' size."""
    failed_without = 0
    for seed in range(6):
        p, q = _kl_inputs(seed)
        refs, terms = _reference(p, q)
        lib = [_kl(p, q)]
        for cand in (_honest(p, q), _kl(p, q)):
            kw = dict(atol=1e-4, rtol=1e-4, reduction_length=None)
            assert compare_outputs([cand], refs, lib, terms=terms, **kw)["ok"], seed
            failed_without += not compare_outputs([cand], refs, [refs[0].float()], **kw)["ok"]
    assert failed_without > 0  # without the terms, the float32 rounding of the cancelled sum fails somewhere


def test_a_wrong_cancelling_loss_still_fails():
    """The error scale widens the bound by 8 u T, not to anything: a result several bounds away from the float64
    reference fails, and so does the sum where the mean over rows was asked. (Halving or doubling the loss is not
    a test of this: the loss is inside float32's rounding of its terms, PyTorch's own float32 kl_div lands 44% below
    the float64 value on some CPUs.)"""
    p, q = _kl_inputs(1)
    refs, terms = _reference(p, q)
    lib = [_kl(p, q)]
    kw = dict(atol=1e-4, rtol=1e-4, reduction_length=None, terms=terms)
    bound = float(compare_outputs([torch.zeros(())], refs, lib, **kw)["worst"]["allowed"])
    ref = float(refs[0])
    summed = F.kl_div(torch.log(p), q, reduction="sum")
    for bad in (torch.tensor(ref + 5 * bound), torch.tensor(ref - 5 * bound), summed):
        r = compare_outputs([bad.float()], refs, lib, **kw)
        assert not r["ok"] and r["status"] == "INCORRECT_NUMERICAL", float(bad)
    assert compare_outputs(lib, refs, lib, **kw)["ok"]  # the library's own float32 result passes (44% off on some CPUs)


def test_a_lower_precision_evaluation_of_a_cancelling_loss_fails():
    """The error scale is in units of the dtype's roundoff: logs taken in bfloat16 are a precision downgrade of a
    float32 workload and fail, although the result is in float32's rounding noise of its ingredients."""
    p, q = _kl_inputs(2)
    refs, terms = _reference(p, q)
    lq, lp = torch.log(q).bfloat16().float(), torch.log(p).bfloat16().float()
    down = (q * (lq - lp)).sum() / p.shape[0]
    r = compare_outputs([down], refs, [_kl(p, q)], atol=1e-4, rtol=1e-4, reduction_length=None, terms=terms)
    assert not r["ok"] and r["status"] == "INCORRECT_NUMERICAL"


def test_only_sums_and_linear_functions_of_them_get_a_terms_size():
    x = torch.randn(8, 16, dtype=torch.float64)
    with torch.no_grad(), trail():
        outs = [x.sum(dim=-1) * 2 - 1, x.mean(dim=0, keepdim=True), F.layer_norm(x, (16,)), torch.exp(x.sum(-1)),
                x @ x.t(), x.sum(-1).unsqueeze(-1).expand(8, 3)]
    t = term_sizes(outs)
    # a sum of leaves: the leaves' magnitudes; x 2 then - 1: scaled, plus the operations' own rounding
    s = x.pow(2).sum(-1).sqrt() * 2  # sqrt(log2(16)): the additions of a 16-term sum
    assert t[0] is not None and torch.allclose(t[0], 2 * s + 2 * x.sum(-1).abs() + (2 * x.sum(-1) - 1).abs())
    assert t[1] is not None and torch.allclose(t[1], x.pow(2).sum(0, keepdim=True).sqrt() * 3 ** 0.5 / 8)
    assert t[2] is None and t[3] is None and t[4] is None
    assert t[5] is not None and t[5].shape == (8, 3)


def test_failure_names_the_worst_element_by_its_index():
    ref = torch.randn(4, 5, 6, dtype=torch.float64)
    out = ref.float().clone()
    out[2, 3, 1] += 0.5
    out[1, 0, 0] += 0.01
    r = compare_outputs([out], [ref], [ref.float()], atol=1e-4, rtol=1e-4, reduction_length=None)
    assert not r["ok"]
    w = r["worst"]
    assert w["index"] == [2, 3, 1] and w["output"] == 0
    assert abs(w["got"] - float(out[2, 3, 1])) < 1e-6 and abs(w["expected"] - float(ref[2, 3, 1])) < 1e-12
    assert w["allowed"] > 0 and "[2, 3, 1]" in r["detail"]


def test_nan_failure_names_the_first_nan():
    ref = torch.randn(3, 7, dtype=torch.float64)
    out = ref.float().clone()
    out[1, 4] = float("nan")
    out[2, 0] = float("inf")
    r = compare_outputs([out], [ref], [ref.float()], atol=1e-4, rtol=1e-4, reduction_length=None, chunk=5)
    assert r["worst"]["index"] == [1, 4] and r["worst"]["allowed"] is None and "[1, 4]" in r["detail"]
