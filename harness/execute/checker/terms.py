"""The rounding-error scale of an output that is a sum, computed beside the float64 reference.

Why: an output that sums terms which cancel (a KL divergence of near-equal distributions, a loss that is a
small difference of large sums) is tiny next to what it is computed from, and an honest float32 evaluation
carries an error of the size of its *ingredients*, not of the result: PyTorch's own ``kl_div`` on rows shifted
by 1.5 is 2.6e-4 to 1.5e-3 relative off a result of 1e-4. Judged against the result alone, every honest kernel
fails there. :func:`harness.score.correctness.compare_outputs` therefore allows such an element
``TERM_ULPS * u * T`` more error (:data:`harness.score.correctness.TERM_ULPS`) (``u``: the unit roundoff of the workload's dtype), where ``T`` is the scale of
the rounding error an evaluation in any order carries, built by running error analysis alongside the reference:

* every tensor has a magnitude ``M`` (same units as its values; its rounding error is about ``u * M``): an
  input, a weight or a constant is exact (the candidate gets the same values at the workload's dtype, and the
  reference upcasts them): ``M = 0``; the result of an operation this module does not know has its own
  rounding, ``M = |x|``; an elementwise operation carries its operands' magnitudes through its derivative and
  adds its own rounding: ``M(a +- b) = M_a + M_b + |a +- b|``,
  ``M(a * b) = |b| M_a + |a| M_b + |ab|``, ``M(log a) = M_a / |a| + |log a|``, ``M(exp a) = |exp a| (M_a + 1)``,
  and so on (:data:`_UNARY`);
* a ``sum`` or ``mean`` of n terms ``t_i`` combines the errors of its terms and of its own additions as
  independent errors do, like a random walk: ``T = sqrt(sum_i M_i^2 + log2(n) sum_i t_i^2)`` (divided by n for a
  mean). The additions' part: a tree of partial sums has log2(n) levels, and the partial sums of one level, each
  rounded once, add up in square to about ``sum_i t_i^2`` when the terms cancel (when they do not, the
  result's own ``rtol * |ref|`` is the larger allowance). The worst-case bound, ``sum_i (M_i + |t_i|)``, is up to
  ``sqrt(n)`` larger than the errors honest kernels make;
* the result of a sum keeps ``T`` as its magnitude through the operations that are linear in it (add,
  subtract, multiply, divide, negation, casts, copies, views). Any other operation ends the trail, so only an
  output that is a linear function of sums is given a ``T``; every other output is judged as before. A matmul's
  dot products are left to the existing ``sqrt(L / 1024)`` growth of ``atol``.

``T`` is large next to the result only where the result is in the rounding noise of its own ingredients; there
a wrong answer within ``TERM_ULPS * u * T`` cannot be told from a right one by any kernel of the dtype.

Memory: the magnitudes double the live memory of the reference's forward, so :func:`has_sums` first runs the
model on meta tensors (no memory, no device; in the parent, which tells the checker: ``Context.sums``) and the
checker computes ``T`` only for a problem whose outputs are sums. Nothing here runs candidate code: the checker calls it on the problem's own ``Model``.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

_MAG = "_kernelgate_mag"
_OWN = "own rounding"
"""The magnitude of a result no rule covers: its own absolute value (made when it is needed)."""
_SUMMED = "_kernelgate_summed"


def _mode_class() -> type:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    aten = torch.ops.aten
    sums = {aten.sum, aten.mean}
    adds = {aten.add, aten.sub, aten.add_, aten.sub_, aten.rsub}
    muls = {aten.mul, aten.mul_}
    divs = {aten.div, aten.div_}
    keep = {aten.neg, aten.clone, aten._to_copy, aten.alias, aten.detach, aten.contiguous, aten.lift_fresh,
            aten.lift_fresh_copy, aten.neg_, aten.positive}
    views = {aten.view, aten._unsafe_view, aten.reshape, aten.squeeze, aten.unsqueeze, aten.expand, aten.permute,
             aten.transpose, aten.t, aten.flatten, aten.view_as, aten.expand_as, aten.squeeze_, aten.unsqueeze_,
             aten.select, aten.slice, aten.unflatten, aten.movedim}

    unary = {  # |f'(a)| as a function of the operand a and the result o
        aten.log: lambda a, o: 1.0 / a.abs(),
        aten.log2: lambda a, o: 1.0 / (a.abs() * 0.6931471805599453),
        aten.log10: lambda a, o: 1.0 / (a.abs() * 2.302585092994046),
        aten.log1p: lambda a, o: 1.0 / (1.0 + a).abs(),
        aten.exp: lambda a, o: o.abs(),
        aten.expm1: lambda a, o: (o + 1.0).abs(),
        aten.sqrt: lambda a, o: 0.5 / o.abs(),
        aten.rsqrt: lambda a, o: 0.5 * o.abs() / a.abs(),
        aten.reciprocal: lambda a, o: o.pow(2),
        aten.abs: lambda a, o: torch.ones_like(o),
        aten.tanh: lambda a, o: 1.0 - o.pow(2),
        aten.sigmoid: lambda a, o: o * (1.0 - o),
        aten.relu: lambda a, o: (a > 0).to(o.dtype),
        aten.sin: lambda a, o: a.cos().abs(),
        aten.cos: lambda a, o: a.sin().abs(),
    }

    def tensor(v: Any) -> bool:
        return isinstance(v, torch.Tensor)

    def fl(v: Any) -> bool:
        return tensor(v) and v.is_floating_point()

    def mag(v: Any) -> Any:
        """``M`` of an operand: its magnitude, or 0 for a leaf (an input, a weight, a constant: exact)."""
        m = getattr(v, _MAG, None) if fl(v) else None
        if isinstance(m, str):
            return v.detach().abs().to(torch.float64)
        return m if m is not None else 0.0

    def _full(m: Any, like: Any) -> Any:
        """``m`` (a tensor or 0.0) as a float64 tensor of ``like``'s shape."""
        if fl(m):
            return m if tuple(m.shape) == tuple(like.shape) else m.expand(like.shape)
        return torch.zeros((), dtype=torch.float64, device=like.device).expand(like.shape)

    def absval(v: Any) -> Any:
        return v.detach().abs().to(torch.float64) if tensor(v) else abs(float(v))

    def summed(*vs: Any) -> bool:
        return any(tensor(v) and getattr(v, _SUMMED, False) for v in vs)

    class MagnitudeTrail(TorchDispatchMode):
        """Attach ``M`` and whether a sum led here (see the module docstring) to every floating result."""

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            if not fl(out):
                return out
            pkt = getattr(func, "overloadpacket", None)
            try:
                m, s = self._rule(pkt, func, args, kwargs, out)
            except (RuntimeError, TypeError, ValueError, IndexError):
                m, s = None, False  # a form the rules do not know
            try:
                if m is None:
                    m, s = _OWN, False  # the result's own rounding only
                elif tuple(m.shape) != tuple(out.shape):
                    m = m.expand(out.shape)
                setattr(out, _MAG, m)
                setattr(out, _SUMMED, bool(s))
            except (RuntimeError, AttributeError):
                pass
            return out

        @staticmethod
        def _rule(pkt: Any, func: Any, args: tuple, kwargs: dict, out: Any) -> tuple[Any, bool]:
            a = args[0] if args else None
            b = args[1] if len(args) > 1 else kwargs.get("other")
            if pkt in sums:
                if not fl(a):
                    return None, False
                dims = args[1] if len(args) > 1 else kwargs.get("dim")
                keepdim = bool(args[2]) if len(args) > 2 else bool(kwargs.get("keepdim", False))
                if isinstance(dims, (list, tuple)) and len(dims) == 0:
                    dims = None
                t = torch.linalg.vector_norm(a, 2, dim=dims, keepdim=keepdim, dtype=torch.float64)
                t = t * math.sqrt(max(1.0, math.log2(max(1, a.numel() // max(1, out.numel())))))
                m = mag(a)
                if fl(m):
                    t = torch.hypot(t, torch.linalg.vector_norm(m.expand(a.shape), 2, dim=dims, keepdim=keepdim,
                                                                dtype=torch.float64))
                if pkt is aten.mean:
                    t = t / max(1, a.numel() // max(1, out.numel()))
                return t, True
            if pkt in keep:
                return (_full(mag(a), out), summed(a)) if fl(a) else (None, False)
            if pkt is aten.copy_:
                return _full(mag(b), out), summed(b)
            if pkt in views:
                if not fl(a):
                    return None, False
                m = mag(a)
                if not fl(m):  # exact: zeros of the view's shape, no memory
                    return _full(0.0, out), summed(a)
                m = _full(m, a)
                try:
                    return func(m, *args[1:], **kwargs), summed(a)
                except RuntimeError:  # a view an expanded (broadcast) magnitude does not allow
                    return func(m.contiguous(), *args[1:], **kwargs), summed(a)
            own = absval(out)
            if pkt in adds:
                alpha = abs(float(kwargs.get("alpha", args[2] if len(args) > 2 else 1)))
                return mag(a) + alpha * mag(b) + own, summed(a, b)
            if pkt in muls:
                return mag(a) * absval(b) + absval(a) * mag(b) + own, summed(a, b)
            if pkt in divs and kwargs.get("rounding_mode") is None:
                ab = absval(b)
                return mag(a) / ab + absval(a) * mag(b) / (ab * ab) + own, summed(a, b)
            if pkt in unary and fl(a):
                return unary[pkt](a.detach().to(torch.float64), out.detach().to(torch.float64)) * mag(a) + own, False
            if pkt is aten.xlogy and fl(a) and fl(b):
                a64, b64 = a.detach().to(torch.float64), b.detach().to(torch.float64)
                return mag(a) * b64.abs().log().abs() + a64.abs() * mag(b) / b64.abs() + own, False
            if pkt is aten.pow and fl(a) and not tensor(b):
                k = float(b)
                a64 = a.detach().to(torch.float64)
                return abs(k) * a64.abs().pow(k - 1.0) * mag(a) + own, False
            return None, False

    return MagnitudeTrail


_MODE: list[type] = []


def trail() -> Any:
    """A dispatch mode (a context manager) under which every floating result carries its magnitude."""
    if not _MODE:
        _MODE.append(_mode_class())
    return _MODE[0]()


@contextlib.contextmanager
def trail_for(sums: bool):
    """Around a reference's forward: where an output of the problem is a sum (``sums``: ``Context.sums``), the
    trail; yields outputs -> their ``T`` (None each where no output is a sum)."""
    if not sums:
        yield lambda outs: [None] * len(outs)
        return
    with trail():
        yield term_sizes


def term_sizes(outputs: list) -> list:
    """``T`` of each output (a float64 tensor of its shape) when the output is a linear function of sums,
    else None."""
    import torch

    out = []
    for o in outputs:
        if isinstance(o, torch.Tensor) and getattr(o, _SUMMED, False):
            t = getattr(o, _MAG, None)
            if t is not None and not isinstance(t, str):
                out.append(t.detach().to(torch.float64).expand(o.shape).contiguous())
                continue
        out.append(None)
    return out


def has_sums(module: Any, mode: str = "eval") -> bool:
    """Whether any output of the problem's ``Model`` is a linear function of sums, decided on meta tensors (no
    memory, no device: the parent decides it once per workload and tells the checker, ``Context.sums``); False when
    the model does not run on meta tensors (it needs real values)."""
    import torch

    from harness.execute.shared.inputs import flatten_outputs, make_reference_model

    def meta(x: Any) -> Any:
        return x.to(torch.float64) if isinstance(x, torch.Tensor) and x.is_floating_point() else x

    try:
        with torch.device("meta"):
            torch.manual_seed(0)
            inputs = [meta(x) for x in module.get_inputs()]
        model = make_reference_model(module, "float64", "meta", 0, mode)
        with torch.no_grad(), trail():
            outs = flatten_outputs(model(*inputs))
    except Exception:  # noqa: BLE001 - a model that needs real values (data-dependent shapes) is judged as before
        return False
    return any(t is not None for t in term_sizes(outs))
