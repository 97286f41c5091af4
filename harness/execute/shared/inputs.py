"""Deterministic inputs and models, shared by the candidate worker and the reference checker.

Both processes must build bit-identical inputs and weights from a seed without
talking to each other, so everything here is a pure function of
(problem file, workload, seed, round, device). Inputs are generated *on the
device* (``torch.set_default_device``), which is both fast for GPU-sized
workloads and deterministic on one GPU model.

Round transforms: correctness is checked on more than ``randn``. Round ``k``
rescales and shifts floating inputs by ``ROUND_TRANSFORMS[k]`` so a kernel
that, say, drops the mean subtraction of a LayerNorm or overflows on large
values fails somewhere. A problem may restrict this: ``positive`` keeps inputs
positive, ``scale`` only rescales (for long dot products in half precision,
where a shift makes the true result overflow fp16), ``none`` uses
``get_inputs()`` as is.
"""

from __future__ import annotations

from typing import Any

# (scale, shift) per round, for problems with input_transform == "any"
ROUND_TRANSFORMS: tuple[tuple[float, float], ...] = ((1.0, 0.0), (1.0, 0.0), (4.0, 0.0), (0.5, 1.5), (2.0, -1.0))
N_ROUNDS_MIN = 5


def round_seed(base_seed: int, workload: str, round_idx: int) -> int:
    """A per-(workload, round) seed derived from the run's secret base seed."""
    import hashlib

    h = hashlib.sha256(f"{base_seed}:{workload}:{round_idx}".encode()).digest()
    return int.from_bytes(h[:7], "little")


def _shaped(x: Any, mode: str, round_idx: int, tdtype: Any) -> Any:
    """One input tensor transformed for its round, cast to ``tdtype`` and made contiguous.

    The transform and the cast are one kernel (``shift + scale * x`` written straight into a ``tdtype``
    tensor), and the identity rounds cost only the cast: every timed call makes fresh inputs on both sides,
    and for a 16384 x 8192 fp16 input three separate passes (scale, shift, cast) moved 2.3 GB per call
    where this moves 0.8-1.3 GB. The raw tensors are never changed in place (``get_inputs`` may return
    one tensor twice).
    """
    import torch

    if not isinstance(x, torch.Tensor):
        return x
    if not x.is_floating_point():
        return x.contiguous()
    scale, shift = ROUND_TRANSFORMS[round_idx % len(ROUND_TRANSFORMS)]
    if mode == "none" or (mode in ("any", "scale") and scale == 1.0 and (shift == 0.0 or mode == "scale")):
        return x.to(tdtype).contiguous()
    out = torch.empty(x.shape, dtype=tdtype, device=x.device)
    if mode == "scale":
        return torch.mul(x, scale, out=out)
    # a 0-dim CPU tensor is a scalar operand on any device (no copy to the GPU)
    base = torch.tensor(abs(shift) + 1e-3 if mode == "positive" else shift, dtype=x.dtype)
    return torch.add(base, x.abs() if mode == "positive" else x, alpha=scale, out=out)


def make_inputs(module: Any, dtype: str, device: str, seed: int, round_idx: int, input_transform: str) -> list:
    """Inputs for one call: ``get_inputs()`` under ``seed`` on ``device``, transformed and cast.

    ``round_idx`` picks the transform (``ROUND_TRANSFORMS[round_idx % 5]``): the
    parent chooses it per call, so timed calls draw from the same family of
    inputs as checked ones and their values tell the candidate nothing.
    """
    import torch

    tdtype = getattr(torch, dtype)
    torch.manual_seed(seed)
    with torch.device(device):
        raw = module.get_inputs()
    return [_shaped(x.to(device) if isinstance(x, torch.Tensor) else x, input_transform, round_idx, tdtype)
            for x in raw]


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
