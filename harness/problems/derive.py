"""Derive a problem's cost from its model on meta tensors: FLOPs, bytes and the aten ops it runs.

Meta tensors carry shapes and dtypes but no data, so a forward costs no memory
and no device; ``torch.utils.flop_counter.FlopCounterMode`` counts the
matmul/convolution FLOPs on the way (elementwise and reduction ops count 0,
and the roofline then rests on the memory term alone, which is their bound
anyway). Every aten op the forward dispatches is recorded by family, which is
what :mod:`harness.problems.categories` classifies a plain file by.

Why a time budget: some models decompose into tens of thousands of small ops
on meta tensors (a 6-layer LSTM over 512 steps: seconds to minutes; torch's
own recurrent layers are therefore costed by arithmetic, see
:mod:`harness.problems.recurrent`, but other models can be as slow). The FLOP
counter's per-op hook checks the clock after every op and abandons the
forward past ``budget_s``; the FLOPs are then *unknown* (never a guess) and
the bytes fall back to the inputs and parameters, with a note saying so. The
clock is the thread's CPU time, not wall time, so whether a file's FLOPs are
known does not depend on how loaded the machine is (on an idle machine the
two agree: the forward is single-threaded Python dispatch).

Why fallbacks: a model whose constructor calls ``Tensor.item()`` (Swin's
stochastic-depth rates) cannot be built on meta tensors. It is then built on
the CPU with every large factory tensor redirected to meta (small ones stay
real, so ``.item()`` works), and moved to meta after. A forward that fails on
meta tensors (data-dependent shapes, ``.item()`` in forward) leaves the FLOPs
and output bytes unknown and keeps the input and parameter bytes.
"""

from __future__ import annotations

import time
import types
from dataclasses import dataclass, field
from typing import Any

#: Bump when the derivation changes what it returns, so cached entries are recomputed.
DERIVE_VERSION = 4
#: Tensors up to this many elements stay real while building a model on the CPU fallback path.
SMALL_TENSOR_NUMEL = 1 << 16

CONV_OPS = frozenset({"convolution", "_convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                      "conv_transpose2d", "conv_transpose3d", "cudnn_convolution", "mkldnn_convolution"})
MM_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm", "matmul", "_scaled_mm", "_scaled_dot_product_efficient_attention",
                    "_scaled_dot_product_flash_attention", "_scaled_dot_product_cudnn_attention",
                    "_scaled_dot_product_flash_attention_for_cpu", "linear", "einsum"})
NORM_OPS = frozenset({"native_layer_norm", "native_batch_norm", "_native_batch_norm_legit",
                      "_native_batch_norm_legit_no_training", "_native_batch_norm_legit_functional", "native_group_norm",
                      "instance_norm", "batch_norm", "layer_norm", "group_norm", "rms_norm", "_fused_rms_norm",
                      "linalg_vector_norm", "norm", "frobenius_norm", "renorm", "normalize"})
#: Reductions that, with an output shaped like the input, make a normalization (x / sum|x|, x * rsqrt(mean x^2)).
NORMALIZING_REDUCTIONS = frozenset({"sum", "mean", "var", "std", "var_mean", "std_mean", "amax", "amin"})
REDUCTION_OPS = frozenset(NORMALIZING_REDUCTIONS | {
    "max", "min", "argmax", "argmin", "prod", "logsumexp", "_softmax", "_log_softmax", "_safe_softmax", "softmax",
    "log_softmax", "cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "sort", "topk", "any", "all", "median",
    "nansum", "count_nonzero", "max_pool1d", "max_pool2d", "max_pool3d", "max_pool2d_with_indices",
    "max_pool3d_with_indices", "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
    "adaptive_avg_pool3d", "_adaptive_avg_pool2d", "_adaptive_avg_pool3d", "adaptive_max_pool2d", "adaptive_max_pool3d",
    "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "nll_loss_forward", "nll_loss", "nll_loss2d_forward",
    "kl_div", "binary_cross_entropy", "binary_cross_entropy_with_logits", "cross_entropy_loss", "soft_margin_loss",
    "multi_margin_loss", "hinge_embedding_loss", "margin_ranking_loss", "cosine_embedding_loss", "triplet_margin_loss"})


class DerivationTimeout(RuntimeError):
    """The forward on meta tensors ran past its time budget."""


@dataclass(frozen=True, slots=True)
class DerivedCost:
    """What a model's forward on meta tensors showed, at one workload (sizes, dtype).

    Byte counts are device bytes at the workload dtype (floating tensors cast,
    integer tensors as they are). ``None`` means unknown, and ``note`` says why.
    """

    flops: int | None
    """Matmul/convolution FLOPs of one forward (FlopCounterMode); None when the forward did not finish."""
    input_bytes: int
    """Bytes of the tensors ``get_inputs()`` returns."""
    output_bytes: int | None
    """Bytes of the forward's output tensors; None when the forward failed or timed out."""
    param_bytes: int | None
    """Bytes of ``Model``'s parameters and buffers; None when the model could not be built."""
    flops_by_family: dict[str, int] = field(default_factory=dict)
    """FLOPs split into ``conv`` and ``mm`` (matmul-like) ops, counted up to a timeout too."""
    op_counts: dict[str, int] = field(default_factory=dict)
    """How many times each aten op (overload packet name) was dispatched, up to a failure or timeout."""
    output_like_input: bool | None = None
    """The first output has the first input's shape (a normalization's or elementwise op's signature)."""
    method: str = "meta"
    """``meta`` (built and run on meta tensors), ``cpu-build`` (built on the CPU fallback path, run on meta),
    ``partial`` (the forward failed or timed out; FLOPs unknown)."""
    note: str = ""
    """Empty when everything was derived; else what is unknown and why."""
    timed_out: bool = False
    budget_s: float | None = None
    seconds: float = 0.0
    """Wall time of the derivation."""
    cpu_seconds: float = 0.0
    """CPU time of the derivation's thread (what the budget counts)."""

    @property
    def min_bytes(self) -> int:
        """Every input and parameter read once, every output written once (outputs left out when unknown)."""
        return self.input_bytes + (self.param_bytes or 0) + (self.output_bytes or 0)

    def to_dict(self) -> dict:
        return {"flops": self.flops, "input_bytes": self.input_bytes, "output_bytes": self.output_bytes,
                "param_bytes": self.param_bytes, "flops_by_family": dict(self.flops_by_family),
                "op_counts": dict(self.op_counts), "output_like_input": self.output_like_input, "method": self.method,
                "note": self.note, "timed_out": self.timed_out, "budget_s": self.budget_s, "seconds": self.seconds,
                "cpu_seconds": self.cpu_seconds}

    @classmethod
    def from_dict(cls, d: dict) -> DerivedCost:
        return cls(flops=d["flops"], input_bytes=int(d["input_bytes"]), output_bytes=d["output_bytes"],
                   param_bytes=d["param_bytes"], flops_by_family=dict(d.get("flops_by_family", {})),
                   op_counts=dict(d.get("op_counts", {})), output_like_input=d.get("output_like_input"),
                   method=str(d.get("method", "meta")), note=str(d.get("note", "")),
                   timed_out=bool(d.get("timed_out", False)), budget_s=d.get("budget_s"),
                   seconds=float(d.get("seconds", 0.0)), cpu_seconds=float(d.get("cpu_seconds", 0.0)))


def _tensors(obj: Any) -> list:
    import torch

    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for x in obj for t in _tensors(x)]
    if isinstance(obj, dict):
        return [t for x in obj.values() for t in _tensors(x)]
    return []


def tensor_bytes(obj: Any) -> int:
    """Bytes of every tensor in ``obj`` (nested lists, tuples and dicts searched)."""
    return sum(t.numel() * t.element_size() for t in _tensors(obj))


def cast_floating(x: Any, dtype: Any) -> Any:
    """``x`` cast to ``dtype`` when it is a floating tensor; anything else unchanged."""
    import torch

    if isinstance(x, torch.Tensor) and x.is_floating_point():
        return x.to(dtype)
    return x


def _counter(budget_s: float | None):
    """A FlopCounterMode that also counts every aten op and raises DerivationTimeout past the deadline.

    The check rides on the counter's own per-op hook (``_count_flops``, called
    after every op it executes), because a second Python dispatch mode would
    double the per-op overhead that makes slow models slow in the first place.
    """
    from torch.utils.flop_counter import FlopCounterMode

    class _Counter(FlopCounterMode):
        def __init__(self) -> None:
            super().__init__(display=False)
            self.op_counts: dict[str, int] = {}
            self.deadline = time.thread_time() + budget_s if budget_s else None

        def _count_flops(self, func_packet, out, args, kwargs):
            name = getattr(func_packet, "__name__", str(func_packet))
            self.op_counts[name] = self.op_counts.get(name, 0) + 1
            if self.deadline is not None and time.thread_time() > self.deadline:
                raise DerivationTimeout(f"the forward on meta tensors ran past its {budget_s:g} s CPU budget")
            return super()._count_flops(func_packet, out, args, kwargs)

        def add_recurrent(self, flops: int) -> None:
            """FLOPs of a recurrent layer computed without running it (:mod:`harness.problems.recurrent`)."""
            import torch

            self.flop_counts["Global"][torch.ops.aten.mm] += flops
            self.op_counts["recurrent"] = self.op_counts.get("recurrent", 0) + 1

    return _Counter()


def _big_factories_to_meta():
    """A dispatch mode that creates large factory tensors on meta, small ones where asked (CPU fallback build)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    factories = {"empty", "empty_strided", "zeros", "ones", "full", "rand", "randn", "randint", "empty_like",
                 "zeros_like", "ones_like", "full_like", "rand_like", "randn_like"}

    class _BigToMeta(TorchDispatchMode):
        def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            name = func._overloadpacket.__name__
            if name in factories:
                size = next((a for a in args if isinstance(a, (list, tuple, torch.Size))), None)
                if size is None and args and isinstance(args[0], torch.Tensor):
                    size = args[0].shape
                numel = 1
                for s in size or ():
                    numel *= int(s)
                if numel > SMALL_TENSOR_NUMEL:
                    kwargs["device"] = torch.device("meta")
            return func(*args, **kwargs)

    return _BigToMeta()


def _build_model(module: types.ModuleType, dtype: Any) -> tuple[Any, str, str]:
    """``Model(*get_init_inputs())`` on meta tensors, else on the CPU fallback path; (model, method, note)."""
    import torch

    try:
        with torch.device("meta"):
            torch.manual_seed(0)
            model = module.Model(*module.get_init_inputs())
        return model.to(dtype), "meta", ""
    except Exception as exc:  # noqa: BLE001 - any failure on meta tensors gets the fallback
        meta_error = f"{type(exc).__name__}: {exc}"
    with _big_factories_to_meta():
        torch.manual_seed(0)
        model = module.Model(*[x for x in module.get_init_inputs()])
    model = model.to(device="meta", dtype=dtype)
    return model, "cpu-build", f"Model cannot be built on meta tensors ({_short(meta_error)}); built on the CPU " \
                               "with its large tensors on meta instead"


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def derive(module: types.ModuleType, dtype: str, *, budget_s: float | None = None,
           fast_recurrent: bool = True) -> DerivedCost:
    """Build ``module.Model`` and run one forward on meta tensors at ``dtype`` (a torch dtype name).

    ``budget_s`` caps the forward's CPU time in seconds (None: no cap). Raises only when
    ``get_inputs()`` itself cannot run on meta tensors (then nothing about the
    workload's size is known); every other failure returns a partial
    :class:`DerivedCost` whose ``note`` names what is unknown and why.
    ``fast_recurrent``: stock LSTM/GRU/RNN layers are costed by arithmetic
    instead of being run (:mod:`harness.problems.recurrent`; same FLOPs).
    """
    import warnings

    with warnings.catch_warnings():  # the problem file's own warnings (nested-tensor hints, ...) would swamp a listing
        warnings.simplefilter("ignore")
        return _derive(module, dtype, budget_s, fast_recurrent)


def _derive(module: types.ModuleType, dtype: str, budget_s: float | None, fast: bool) -> DerivedCost:
    import contextlib

    from harness.problems.recurrent import fast_recurrent

    import torch

    t0, c0 = time.monotonic(), time.thread_time()
    tdtype = getattr(torch, dtype)
    with torch.device("meta"):
        torch.manual_seed(0)
        inputs = [cast_floating(x, tdtype) for x in module.get_inputs()]
    input_bytes = tensor_bytes(inputs)
    try:
        model, method, note = _build_model(module, tdtype)
    except Exception as exc:  # noqa: BLE001
        return DerivedCost(flops=None, input_bytes=input_bytes, output_bytes=None, param_bytes=None, method="partial",
                           note=f"Model could not be built ({_short(f'{type(exc).__name__}: {exc}')}): FLOPs, parameter "
                                "and output bytes unknown; min bytes counts the inputs only", budget_s=budget_s,
                           seconds=time.monotonic() - t0, cpu_seconds=time.thread_time() - c0)
    param_bytes = tensor_bytes(list(model.parameters()) + list(model.buffers()))
    counter = _counter(budget_s)
    out: Any = None
    failure = ""
    timed_out = False
    try:
        with counter, torch.no_grad(), (fast_recurrent(model, counter) if fast else contextlib.nullcontext()):
            out = model(*inputs)
    except DerivationTimeout as exc:
        timed_out, failure = True, str(exc)
    except Exception as exc:  # noqa: BLE001 - a forward that fails on meta tensors gets the partial answer
        failure = f"the forward fails on meta tensors ({_short(f'{type(exc).__name__}: {exc}')})"
    by_family = {"conv": 0, "mm": 0}
    for op, n in counter.get_flop_counts().get("Global", {}).items():
        name = getattr(op, "__name__", str(op)).split(".")[-1]
        by_family["conv" if name in CONV_OPS else "mm"] += int(n)
    seconds, cpu_seconds = time.monotonic() - t0, time.thread_time() - c0
    if failure:
        why = f"{failure}: FLOPs and output bytes unknown; min bytes counts inputs and parameters only"
        return DerivedCost(flops=None, input_bytes=input_bytes, output_bytes=None, param_bytes=param_bytes,
                           flops_by_family=by_family, op_counts=counter.op_counts, method="partial",
                           note="; ".join(x for x in (note, why) if x), timed_out=timed_out, budget_s=budget_s,
                           seconds=seconds, cpu_seconds=cpu_seconds)
    outs = _tensors(out)
    like = bool(outs) and bool(inputs) and isinstance(inputs[0], torch.Tensor) and tuple(outs[0].shape) == tuple(inputs[0].shape)
    return DerivedCost(flops=int(counter.get_total_flops()), input_bytes=input_bytes, output_bytes=tensor_bytes(outs),
                       param_bytes=param_bytes, flops_by_family=by_family, op_counts=counter.op_counts,
                       output_like_input=like, method=method, note=note, budget_s=budget_s, seconds=seconds,
                       cpu_seconds=cpu_seconds)
