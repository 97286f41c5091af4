"""Deterministic inputs and models, shared by the candidate worker and the reference checker.

Both processes must build bit-identical inputs and weights from a seed without
talking to each other, so everything here is a pure function of
(problem file, workload, seed, value profile, device). Inputs are generated *on the
device* (``torch.set_default_device``), which is both fast for GPU-sized
workloads and deterministic on one GPU model.

Value profiles: correctness is checked on more than ``randn``. Each call's
``transform`` integer names a value profile
(:mod:`harness.execute.shared.value_profiles`: large magnitudes, per-row
offsets, heavy tails, uniform, near one, many zeros, peaked or flat
probability rows) that rewrites every floating input within its domain, so a
kernel that, say, drops the max subtraction of a softmax or takes a variance
in one pass fails somewhere. The parent chooses the profile per call, among
those the checker found fair for the workload
(:mod:`harness.execute.checker.fairness`). A problem may restrict this:
``positive`` keeps inputs positive, ``scale`` only rescales (for long dot
products in half precision, where a shift makes the true result overflow
fp16), ``none`` uses ``get_inputs()`` as is.
"""

from __future__ import annotations

from typing import Any

N_ROUNDS_MIN = 5


def round_seed(base_seed: int, workload: str, round_idx: int) -> int:
    """A per-(workload, round) seed derived from the run's secret base seed."""
    import hashlib

    h = hashlib.sha256(f"{base_seed}:{workload}:{round_idx}".encode()).digest()
    return int.from_bytes(h[:7], "little")


def make_inputs(module: Any, dtype: str, device: str, seed: int, transform: int, input_transform: str) -> list:
    """Inputs for one call: ``get_inputs()`` under ``seed`` on ``device``, rewritten by value profile
    ``transform`` and cast (:func:`make_profile_inputs`).

    The parent chooses the profile per call, so timed calls draw from the same
    family of inputs as checked ones and their values tell the candidate nothing.
    """
    return make_profile_inputs(module, dtype, device, seed, transform, input_transform)[0]


def make_profile_inputs(module: Any, dtype: str, device: str, seed: int, profile: int,
                        input_transform: str) -> tuple[list, bool]:
    """(inputs for one call, whether the value profile changed any of them): ``get_inputs()`` under ``seed`` on
    ``device``, every floating input rewritten by value profile ``profile``
    (:mod:`harness.execute.shared.value_profiles`) within its domain and cast to ``dtype``, made contiguous.
    Integer and boolean tensors and non-tensors are passed as they are; ``input_transform`` is the problem's
    annotation (``positive`` makes floating inputs positive, ``none``/``scale`` restrict the profiles allowed)."""
    import torch

    from harness.execute.shared import value_profiles as V

    if profile not in V.candidate_profiles(input_transform):
        raise ValueError(f"value profile {profile} is not allowed for input_transform {input_transform!r}")
    tdtype = getattr(torch, dtype)
    torch.manual_seed(seed)
    with torch.device(device):
        raw = module.get_inputs()
    out, changed = [], False
    for pos, x in enumerate(raw):
        if not isinstance(x, torch.Tensor):
            out.append(x)
            continue
        x = x.to(device)
        if not x.is_floating_point():
            out.append(x.contiguous())
            continue
        y, ch = V.apply(x, profile, seed=seed, position=pos, tdtype=tdtype, positive=input_transform == "positive")
        out.append(y)
        changed = changed or ch
    return out, changed


def make_reference_model(module: Any, dtype: str, device: str, seed: int, mode: str = "eval") -> Any:
    """The problem's ``Model`` with seeded weights, cast to ``dtype`` on ``device``, in ``mode``.

    ``mode`` is ``eval`` or ``train`` (KernelBench's evaluator leaves models in
    training mode: BatchNorm then normalises with batch statistics).
    """
    import torch

    torch.manual_seed(seed)
    with torch.device(device):
        model = module.Model(*module.get_init_inputs())
    model = model.to(device=device, dtype=getattr(torch, dtype))
    return model.train() if mode == "train" else model.eval()


def copy_matching_state(src: Any, dst: Any) -> list[str]:
    """Load ``src``'s parameters/buffers into ``dst`` where names and shapes match.

    Returns the names copied. This is how a candidate's ``ModelNew`` gets the
    same weights as the reference without relying on identical init order.
    """
    import torch

    src_sd = src.state_dict()
    dst_sd = dst.state_dict()
    copied = []
    with torch.no_grad():
        for name, t in dst_sd.items():
            s = src_sd.get(name)
            if s is not None and isinstance(t, torch.Tensor) and s.shape == t.shape:
                t.copy_(s.to(t.dtype))
                copied.append(name)
    return copied


def flatten_outputs(out: Any) -> list:
    """A forward's result as a list of tensors (tuple/list outputs are flattened one level)."""
    if isinstance(out, (tuple, list)):
        return list(out)
    return [out]


POISON_MAX = 8 << 30
"""The poison fill never takes more than this (a KernelBench input of 17 GB would otherwise need 34 GB more)."""


def poison_bytes(in_bytes: int) -> int:
    """How much free allocator memory is filled with NaN before a call whose inputs take ``in_bytes``: twice the
    inputs, at most :data:`POISON_MAX`. Outputs larger than that may land in memory that was not poisoned; they
    hold another call's values or zeros there (inputs are fresh per call), which the checker fails all the same."""
    return min(2 * max(0, int(in_bytes)), POISON_MAX)


def poison_allocator(device: str, nbytes: int) -> None:
    """Fill the caching allocator's free blocks with NaN, so an output a kernel never wrote reads as NaN.

    Done in the worker before each correctness round's forward. The timing
    phase's calls skip it, on both sides (see ``protocol.Call.poison``).
    """
    import torch

    if not device.startswith("cuda") or nbytes <= 0:
        return
    t = torch.empty(nbytes // 2 + 1024, dtype=torch.float16, device=device)
    t.fill_(float("nan"))
    del t
