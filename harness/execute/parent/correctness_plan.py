"""The parent's plan for a workload's correctness: which value profile each call gets, held-out shapes, and how
their results land on the workload's record. Pure functions: the session calls them; nothing here talks to a
process.

Rounds (:func:`split_profiles`): round 0 is the standard profile (the problem's public distribution); the next
take the other *fair* profiles (:mod:`harness.execute.checker.fairness`) in an order drawn from the run's secret
seed and the workload (the same for every candidate of the run, so the checker computes each reference once).
``--rounds`` (default 5) public rounds reach the first profiles of that order; the held-out shapes' rounds take
the rest, so with the defaults (5 rounds, 2 held-out shapes of 1 round) every fair profile of a real-valued input
(6 besides the standard one) is used once per run; the public rounds also take every fair profile no held-out
shape ran (a problem with fewer shapes to offer, a shape not judged: :func:`heldout_covered`). The held-out
shapes run first: a profile that fails at one of them is also run at the public shape (:func:`failed_profiles`),
so a bug of the values fails the workload itself and a bug of the shape stays a held-out result. A failure names
the profile that caught it.

Timed calls (:func:`timed_profile`): each draws its profile uniformly from the fair ones, with the secret generator
that draws its seed, so the values of a call tell the candidate nothing about whether it will be verified.

Held-out shapes (:mod:`harness.problems.heldout`): each runs ``heldout_rounds`` correctness rounds, is never timed, and becomes a :class:`HeldoutShape` on its public
workload's record (:func:`merge_heldout`). With ``gate`` on, a held-out failure makes a PASSED workload fail with
the held-out shape's status, its sizes and its worst element in the error.
"""

from __future__ import annotations

import dataclasses
import json
import random
import threading
from typing import Any, Sequence

from harness.problems import heldout as H
from harness.records import ErrorInfo, HeldoutResult, HeldoutShape, JobResult, ProfileCheck, Status, WorstElement

NORMAL = 0
_HELDOUT_PHASES = ("build_s", "wait_s", "fairness_s", "correctness_s")
"""A held-out shape's own phases, summed into its public record's ``phase_s["heldout_s"]``."""
_MEASURED = dict(timing=None, library_timing=None, screening=None, trusted_timing=None, kernels=None,
                 verification=None)


def split_profiles(fair: Sequence[int], rounds: int, shapes: int, heldout_rounds: int,
                   rng: random.Random) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
    """(the public rounds' profiles, each held-out shape's): the standard profile, then the workload's other fair
    profiles in an order drawn from ``rng``. The public workload's ``rounds`` take that sequence from its start
    (cycling when it is shorter); the held-out shapes, ``heldout_rounds`` each, take the profiles the public
    rounds did not reach, then the sequence again from the standard profile, so every fair profile is used in the
    run when ``rounds + shapes * heldout_rounds`` reaches their number."""
    others = [p for p in dict.fromkeys(fair) if p != NORMAL]
    rng.shuffle(others)
    seq = [NORMAL, *others]
    n = max(1, rounds)
    public = tuple(seq[i % len(seq)] for i in range(n))
    rest = seq[n:] + seq
    per = max(1, heldout_rounds)
    held = tuple(tuple(rest[(k * per + i) % len(rest)] for i in range(per)) for k in range(max(0, shapes)))
    return public, held


def timed_profile(fair: Sequence[int], rng: random.Random) -> int:
    """A timed (or batch) call's profile: uniform over the fair ones."""
    return rng.choice(list(fair)) if fair else NORMAL


def name_of(index: int) -> str:
    from harness.execute.shared.value_profiles import profile

    return profile(index).name


def fair_profiles(verdicts: Sequence[Any]) -> tuple[int, ...]:
    """The fair profile indices of a checker's verdicts (the standard one always among them, first)."""
    fair = [v.profile for v in verdicts if v.fair and v.profile != NORMAL]
    return (NORMAL, *fair)


def profile_checks(verdicts: Sequence[Any]) -> tuple[ProfileCheck, ...]:
    """The verdicts as the record keeps them."""
    return tuple(ProfileCheck(name=v.name, fair=bool(v.fair), reason=str(v.reason)[:400]) for v in verdicts)


def worst_of(w: Any) -> WorstElement | None:
    """A checker's worst element (a wire :class:`~harness.execute.wire.protocol.Worst` or a dict) as a record's."""
    if w is None:
        return None
    get = (lambda k: w[k]) if isinstance(w, dict) else (lambda k: getattr(w, k))
    return WorstElement(output=int(get("output")), index=tuple(int(i) for i in get("index")), got=float(get("got")),
                        expected=float(get("expected")),
                        allowed=None if get("allowed") is None else float(get("allowed")))


def with_profile(message: str, profile: str, workload: Any = None, public: Any = None) -> str:
    """``message`` of a failed round (``round 3: ...``), naming the value profile and, for a held-out shape, its
    sizes (``round 3, value profile 'row_offset', held-out shape COLS=255: ...``)."""
    where = f"value profile '{profile}'"
    if workload is not None and public is not None and H.is_heldout(workload):
        sizes = ", ".join(f"{k}={v}" for k, v in H.moved_sizes(public, workload).items())
        where += f", held-out shape {sizes}"
    head, sep, rest = message.partition(": ")
    if sep and head.startswith("round ") and head[6:].isdigit():
        return f"{head}, {where}: {rest}"
    return f"{where}: {message}"


_CACHE: dict[str, tuple] = {}
_CACHE_LOCK = threading.Lock()


_SUMS: dict[str, bool] = {}


def output_sums(problem: Any, w: Any, mode: str) -> bool:
    """Whether an output of ``problem``'s Model is a linear function of sums
    (:func:`harness.execute.checker.terms.has_sums`, on meta tensors at ``w``'s sizes). It is the model's structure,
    not its sizes: decided once per problem file and mode for the process (held-out shapes included)."""
    from harness.execute.checker.terms import has_sums
    from harness.problems.workloads import load_module

    key = json.dumps([str(problem.path), problem.source_sha256, mode], sort_keys=True, default=str)
    with _CACHE_LOCK:
        hit = _SUMS.get(key)
    if hit is None:
        try:
            hit = has_sums(load_module(problem.path, dict(w.params)), mode)
        except Exception:  # noqa: BLE001 - a file that fails here fails in the worker too, with its own message
            hit = False
        with _CACHE_LOCK:
            _SUMS[key] = hit
    return hit


def heldout_workloads(problem: Any, workloads: Sequence[Any], base_seed: int, count: int,
                      device: str = "cuda") -> tuple:
    """The held-out workloads of each of ``workloads``, ``count`` each, drawn from the run's secret seed within the
    device's byte budget (:data:`harness.problems.heldout.MAX_GROWTH`); kept for the process (every candidate of a
    problem gets the same ones, computed once)."""
    out: list = []
    for w in workloads:
        if H.is_heldout(w) or count <= 0:
            continue
        key = json.dumps([str(problem.path), problem.source_sha256, w.name, w.dtype, w.overrides, base_seed, count,
                          device], sort_keys=True, default=str)
        with _CACHE_LOCK:
            hit = _CACHE.get(key)
        if hit is None:
            hit = tuple(H.heldout_workloads(problem, w, base_seed, count, device))
            with _CACHE_LOCK:
                _CACHE[key] = hit
                while len(_CACHE) > 512:
                    _CACHE.pop(next(iter(_CACHE)))
        out.extend(hit)
    return tuple(out)


def with_heldout(workloads: Sequence[Any], extra: Sequence[Any]) -> tuple:
    """``workloads`` with each public workload preceded by its held-out ones: a profile that fails at a held-out
    shape is then also run at the public shape (:func:`failed_profiles`), so a value bug is charged to the
    workload, not to its generalization."""
    by_public: dict[str, list] = {}
    for h in extra:
        by_public.setdefault(H.public_of(h) or "", []).append(h)
    out: list = []
    for w in workloads:
        out.extend(by_public.get(w.name, ()))
        out.append(w)
    return tuple(out)


def heldout_covered(results: dict, workloads: Sequence[Any], public: str) -> set[int]:
    """The value profiles (indices) the judged held-out shapes of ``public`` ran (``results``: the session's
    records by workload name)."""
    from harness.execute.shared.value_profiles import BY_NAME

    out: set[int] = set()
    for w in workloads:
        r = results.get(w.name)
        if H.public_of(w) == public and r is not None and r.correctness is not None:
            out |= {BY_NAME[n].index for n in r.correctness.round_profiles if n in BY_NAME}
    return out


def failed_profiles(results: dict, workloads: Sequence[Any], public: str) -> tuple[int, ...]:
    """The value profiles (indices) under which a held-out shape of ``public`` failed, in the held-out order
    (``results``: the session's records by workload name)."""
    from harness.execute.shared.value_profiles import BY_NAME

    out: list[int] = []
    for w in workloads:
        r = results.get(w.name)
        if H.public_of(w) != public or r is None or r.status in (Status.PASSED, Status.HARNESS_ERROR, Status.TOO_LARGE):
            continue
        name = r.correctness.failed_profile if r.correctness is not None else None
        if name in BY_NAME and BY_NAME[name].index not in out:
            out.append(BY_NAME[name].index)
    return tuple(out)


def _shape(public_w: Any, w: Any, r: JobResult) -> HeldoutShape:
    sizes = H.moved_sizes(public_w, w) if public_w is not None else dict(w.params)
    if r.status.is_harness_fault:
        return HeldoutShape(workload=w.name, sizes=sizes, status=None,
                            detail=(r.error.message if r.error is not None else r.status.value)[:600])
    c = r.correctness
    detail = (r.error.message if r.error is not None else "")[:600]
    return HeldoutShape(workload=w.name, sizes=sizes, status=r.status.value, detail=detail,
                        failed_profile=c.failed_profile if c is not None else None,
                        worst=c.worst if c is not None else None,
                        round_profiles=tuple(c.round_profiles) if c is not None else ())


def merge_heldout(records: Sequence[JobResult], workloads: Sequence[Any], *, gate: bool) -> list[JobResult]:
    """The records of ``workloads`` with every held-out workload's record folded into its public workload's
    ``heldout`` field (and removed). A public record that did not pass keeps ``heldout=None``: its held-out shapes
    were not run. With ``gate``, a PASSED record whose held-out shapes failed takes the first failure's status."""
    by_name = {w.name: w for w in workloads}
    held: dict[str, list[tuple[Any, JobResult]]] = {}
    public: list[JobResult] = []
    for r in records:
        w = by_name.get(r.workload)
        if w is not None and H.is_heldout(w):
            held.setdefault(H.public_of(w) or "", []).append((w, r))
        else:
            public.append(r)
    out = []
    for r in public:
        parts = held.get(r.workload)
        if not parts or r.status is not Status.PASSED:
            out.append(r)
            continue
        shapes = tuple(_shape(by_name.get(r.workload), w, hr) for w, hr in parts)
        res = HeldoutResult(shapes=shapes, gated=bool(gate))
        spent = sum(float((hr.phase_s or {}).get(k, 0.0)) for _, hr in parts for k in _HELDOUT_PHASES)
        if r.phase_s is not None:
            r = r.replace(phase_s={**r.phase_s, "heldout_s": round(spent, 4)})
        failed = next((s for s in shapes if s.status is not None and s.status != Status.PASSED.value), None)
        if not gate or failed is None:
            out.append(r.replace(heldout=res))
            continue
        sizes = ", ".join(f"{k}={v}" for k, v in failed.sizes.items())
        status = Status(failed.status)
        evidence = None
        if status is Status.REWARD_HACK:
            hr = next(hr for w, hr in parts if w.name == failed.workload)
            evidence = hr.evidence or {"mechanism": "heldout"}
        text = failed.detail if "held-out shape" in failed.detail else f"held-out shape {sizes}: {failed.detail}"
        corr = r.correctness
        if corr is not None:
            corr = dataclasses.replace(corr, detail=text[:2000],
                                       failed_profile=failed.failed_profile, worst=failed.worst)
        err = ErrorInfo("HeldoutShape", f"{text} (a held-out shape; --heldout-gate)"[:4000])
        keep = {} if status is Status.REWARD_HACK else _MEASURED
        out.append(r.replace(status=status, error=err, correctness=corr, heldout=res, evidence=evidence, **keep))
    return out
