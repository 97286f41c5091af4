"""Which value profiles are fair for a (problem, workload): decided by probing in the trusted checker, cached.

A profile (:mod:`harness.execute.shared.value_profiles`) is *fair* for a workload when a correct kernel can be
expected to pass on it. That is decided once, from the problem's own ``Model`` and the library, on
:data:`PROBE_SEEDS` public probe seeds (the run's secret seed is not needed: fairness is a property of the
problem, the workload and the device, not of the run):

1. the profile changes at least one input of the problem (a profile that only rewrites probability rows leaves
   a problem of real-valued inputs as it is: not used, nothing to learn);
2. the float64 reference is finite everywhere (a softmax of ``x * 32`` is; ``log`` of an input with zeros
   is not);
3. the library itself, at the workload's dtype, passes the correctness comparison against the float64 reference
   at :data:`HEADROOM` times the tolerance (element-wise and whole-tensor, the sums' error scale included):
   where the library needs most of the tolerance, an honest kernel that sums in another order needs more, and
   a profile that fails honest kernels teaches nothing.

The standard profile is judged the same way and recorded, but a public workload always uses it (it is the
problem's public distribution; where the library misses the tolerance there the comparison widens to the
library's error as it always has); a held-out shape whose standard profile is not fair is not judged.
The verdicts are cached on disk under ``$KERNELGATE_CACHE/fairness/`` (default
``~/.cache/kernelgate/fairness/``; ``KERNELGATE_CACHE=off`` turns it off), keyed by everything they depend on:
the problem file's bytes, the workload's sizes, dtype, tolerance, TF32, mode and baseline, the device's name,
the torch version and this module's rules (:data:`FAIRNESS_VERSION`, the profiles' table).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

FAIRNESS_VERSION = "1"
PROBE_SEEDS = 2
HEADROOM = 0.5
"""The library must pass at this fraction of the tolerance for a profile to be used."""


@dataclass(frozen=True, slots=True)
class Fairness:
    """One profile's verdict for one workload."""

    profile: int
    name: str
    fair: bool
    reason: str
    """Why (not) fair, in words: what the probe saw."""
    library_excess: float | None = None
    """The library's largest error over the probes as a share of the full tolerance (<= HEADROOM when fair)."""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Fairness":
        return cls(profile=int(d["profile"]), name=str(d["name"]), fair=bool(d["fair"]), reason=str(d["reason"]),
                   library_excess=None if d.get("library_excess") is None else float(d["library_excess"]))


def probe_seed(profile: int, k: int) -> int:
    """The ``k``-th public probe seed of ``profile`` (never a round's: those come from the run's secret seed)."""
    h = hashlib.sha256(f"kernelgate-fairness|{profile}|{k}".encode()).digest()
    return int.from_bytes(h[:6], "little")


Reference = Callable[[int, int], tuple[list, list, list, bool]]
"""(seed, profile) -> (float64 references, library outputs, the sums' error scales, whether the profile changed
an input): what the checker computes for a correctness round."""


def judge(reference: Reference, candidates: tuple[int, ...], *, atol: float, rtol: float,
          reduction_length: int | None, seeds: int = PROBE_SEEDS) -> list[Fairness]:
    """The verdict of each profile in ``candidates``. The standard profile is judged like the others: a public
    workload uses it whatever its verdict (its rounds widen to the library's own error as always), a held-out
    shape whose standard profile is not fair is not judged (:mod:`harness.execute.parent.correctness_plan`)."""
    import torch

    from harness.execute.shared.value_profiles import NORMAL, profile
    from harness.score.correctness import compare_outputs

    out = []
    for index in candidates:
        name = profile(index).name
        worst, why = 0.0, ""
        changed_any = index == NORMAL
        for k in range(seeds):
            refs, libs, terms, changed = reference(probe_seed(index, k), index)
            changed_any = changed_any or changed
            if not changed_any:
                break
            bad = sum(int((~torch.isfinite(r)).sum()) for r in refs if r.is_floating_point())
            if bad:
                why = why or f"the float64 reference has {bad} NaN/Inf value(s) on probe {k}"
                continue
            # the library against the reference at HEADROOM x every part of the bound (no widening: lib is ref)
            res = compare_outputs(libs, refs, libs, atol=atol * HEADROOM, rtol=rtol * HEADROOM,
                                  reduction_length=reduction_length, library_widens=False,
                                  terms=[t * HEADROOM if t is not None else None for t in terms])
            worst = max(worst, float(res["max_excess"] or 0.0) * HEADROOM)
            if not res["ok"] and not why:
                why = (f"the library itself needs more than {HEADROOM:g} of the tolerance on probe {k} (an honest "
                       f"kernel summing in another order could miss it): {res['detail'][:300]}")
        if not changed_any:
            out.append(Fairness(index, name, False, "changes no input of this problem (no input of a domain it "
                                                    "rewrites)", None))
        elif why:
            out.append(Fairness(index, name, False, why, worst))
        else:
            out.append(Fairness(index, name, True, f"reference finite, the library within {worst:.2f} of the "
                                                   f"tolerance on {seeds} probes", worst))
    return out


# --------------------------------------------------------------------------- cache

def cache_dir() -> Path | None:
    """The fairness folder of this process's environment (the parent's), or None when caching is off
    (``KERNELGATE_CACHE=off``)."""
    root = os.environ.get("KERNELGATE_CACHE")
    if root and root.strip().lower() in ("off", "0", "none", "false"):
        return None
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "kernelgate"
    return base / "fairness"


def cache_key(*, problem_sha256: str, params: dict, dtype: str, allow_tf32: bool, mode: str, baseline: str,
              input_transform: str, atol: float, rtol: float, reduction_length: int | None, device_name: str,
              candidates: tuple[int, ...]) -> str:
    """Hash of everything a set of verdicts depends on."""
    import torch

    from harness.execute.shared.value_profiles import PROFILES
    from harness.score.correctness import TERM_ULPS

    payload = json.dumps({
        "sha256": problem_sha256, "params": {k: list(v) if isinstance(v, tuple) else v for k, v in sorted(params.items())},
        "dtype": dtype, "tf32": bool(allow_tf32), "mode": mode, "baseline": baseline, "transform": input_transform,
        "atol": atol, "rtol": rtol, "reduction_length": reduction_length, "device": device_name,
        "torch": torch.__version__, "version": FAIRNESS_VERSION, "headroom": HEADROOM, "seeds": PROBE_SEEDS,
        "term_ulps": TERM_ULPS, "candidates": list(candidates),
        "profiles": [[p.index, p.name, p.values] for p in PROFILES],
    }, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def lookup(key: str, folder: Path | None) -> list[Fairness] | None:
    """The cached verdicts for ``key`` in ``folder``; None when absent or unreadable (a miss, never an error)."""
    if folder is None:
        return None
    try:
        data = json.loads((folder / f"{key}.json").read_text(encoding="utf-8"))
        return [Fairness.from_dict(d) for d in data["verdicts"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store(key: str, verdicts: list[Fairness], folder: Path | None) -> None:
    """Write ``verdicts`` under ``key`` in ``folder`` atomically; a cache that cannot be written is skipped (it is
    a cache)."""
    from harness.jsonio import atomic_write_text

    if folder is None:
        return
    try:
        atomic_write_text(folder / f"{key}.json", json.dumps({"verdicts": [v.to_dict() for v in verdicts]},
                                                             sort_keys=True))
    except OSError:
        pass


def device_name(device: str) -> str:
    """The name the verdicts are cached under: the GPU's model, or ``cpu``."""
    if device.startswith("cuda"):
        import torch

        return torch.cuda.get_device_name(torch.device(device))
    return "cpu"


def file_sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def verdicts(reference: Reference, *, problem_path: str, params: dict, dtype: str, allow_tf32: bool, mode: str,
             baseline: str, input_transform: str, atol: float, rtol: float, reduction_length: int | None,
             device: str, folder: Path | None, only: tuple[int, ...] = ()) -> tuple[list[Fairness], bool]:
    """(the verdicts of every profile the problem's annotation allows, whether they came from the cache in
    ``folder``; None: no cache). The checker is told the folder by the parent (:class:`FairnessProbe`): its own
    home is its scratch folder, which ends with the run. ``only``: probe just these profiles (empty: all)."""
    from harness.execute.shared.value_profiles import candidate_profiles

    cands = tuple(p for p in candidate_profiles(input_transform) if not only or p in only)
    key = cache_key(problem_sha256=file_sha256(problem_path), params=params, dtype=dtype, allow_tf32=allow_tf32,
                    mode=mode, baseline=baseline, input_transform=input_transform, atol=atol, rtol=rtol,
                    reduction_length=reduction_length, device_name=device_name(device), candidates=cands)
    hit = lookup(key, folder)
    if hit is not None:
        return hit, True
    found = judge(reference, cands, atol=atol, rtol=rtol, reduction_length=reduction_length)
    store(key, found, folder)
    return found, False


def local_reference(problem_path: str | Path, params: dict, dtype: str, *, device: str = "cpu", mode: str = "eval",
                    input_transform: str = "any", model_seed: int = 0) -> Reference:
    """A :data:`Reference` computed in this process, as the checker computes a correctness round's (the float64
    ``Model`` on upcast inputs, with the sums' error scales; the library at ``dtype``): for the fairness table
    (``tools/correctness_profiles.py``) and tests, without a checker process."""
    import torch

    from harness.execute.checker.terms import has_sums, term_sizes, trail
    from harness.execute.shared.inputs import flatten_outputs, make_profile_inputs, make_reference_model
    from harness.problems.workloads import load_module

    module = load_module(Path(problem_path), params)
    lib = make_reference_model(module, dtype, device, model_seed, mode)
    model64 = make_reference_model(module, "float64", device, model_seed, mode)
    sums = has_sums(module, mode)

    def reference(seed: int, profile: int) -> tuple[list, list, list, bool]:
        inputs, changed = make_profile_inputs(module, dtype, device, seed, profile, input_transform)
        with torch.no_grad():
            if mode == "train":
                torch.manual_seed(seed)
            libs = [t.detach() for t in flatten_outputs(lib(*[x.clone() if isinstance(x, torch.Tensor) else x
                                                               for x in inputs]))]
            in64 = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
            if mode == "train":
                torch.manual_seed(seed)
            if sums:
                with trail():
                    outs = flatten_outputs(model64(*in64))
                terms = term_sizes(outs)
            else:
                outs = flatten_outputs(model64(*in64))
                terms = [None] * len(outs)
            refs = [t.detach().double() for t in outs]
        return refs, libs, terms, changed

    return reference


def answer(req: Any, reference: Callable[[int, int], tuple]) -> Any:
    """The checker's reply to a :class:`~harness.execute.wire.protocol.FairnessProbe`: the verdicts of the profiles
    it asks for, from the cache folder it names or probed with ``reference`` ((seed, profile) -> (float64
    references, library outputs, the sums' error scales or None, the problem module): the rounds' own)."""
    import time

    from harness.execute.shared.inputs import make_profile_inputs
    from harness.execute.wire import protocol as P

    t0 = time.perf_counter()
    ctx = req.ctx

    def probe(seed: int, profile: int) -> tuple[list, list, list, bool]:
        refs, libs, terms, module = reference(seed, profile)
        _, changed = make_profile_inputs(module, ctx.dtype, ctx.device, seed, profile, ctx.input_transform)
        return refs, libs, terms or [None] * len(refs), changed

    found, cached = verdicts(probe, problem_path=ctx.problem_path, params=ctx.params, dtype=ctx.dtype,
                             allow_tf32=ctx.allow_tf32, mode=ctx.mode, baseline=ctx.baseline,
                             input_transform=ctx.input_transform, atol=req.atol, rtol=req.rtol,
                             reduction_length=req.reduction_length, device=ctx.device,
                             folder=Path(req.cache_dir) if req.cache_dir else None, only=req.profiles)
    return P.FairnessReply(verdicts=tuple(P.ProfileVerdict(v.profile, v.name, v.fair, v.reason[:2000],
                                                           v.library_excess) for v in found),
                           cached=cached, probe_s=round(time.perf_counter() - t0, 4))
