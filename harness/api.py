"""Python API: evaluate candidate *sources* from your own program, with ``kernelgate run``'s isolation.

::

    from harness.api import evaluate          # or: from harness import evaluate
    records = evaluate(open("gelu.py").read(), "gelu", preset="quick")
    records[0].status, records[0].screening

    from harness.api import evaluate_batch
    per_candidate = evaluate_batch([{"source": s, "problem": "gelu"} for s in sources], preset="quick")

    from harness.score.reward import reward_of
    from harness.prompts.feedback import feedback_text
    reward_of(records).value, feedback_text(records, source=src)

Each source is written to a private folder as a candidate file and goes
through the engine (:mod:`harness.serve.engine`, i.e. ``harness.pipeline.evaluate``):
candidate code never runs in the caller's process, every candidate gets one
fresh sandboxed worker subprocess, a trusted checker, the timing protocol of
the preset (:mod:`harness.serve.presets`) and the screening gates. The records
are the CLI's own :class:`harness.records.JobResult`, one per workload, in
the problem's workload order; with ``out=DIR`` they are also appended to
``DIR/results.jsonl`` (so ``kernelgate leaderboard/report --results DIR`` work).

``problem`` is a problem id of the bundled suite (or of ``problems=PATH``), a
path to a problem file (``*.py`` or a ``Path``), or a loaded
:class:`harness.problems.loader.Problem`. Calls in one process that use the
same GPUs run one after the other (the engine's timing needs each GPU to
itself); for many callers at once, run ``kernelgate serve``. Importing this
module loads nothing heavy; the first call loads torch-free parts of the
engine, and the problem registry is cached per ``(problems, overrides)``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence, Union

if TYPE_CHECKING:
    from harness.problems.loader import Problem
    from harness.records import JobResult

ProblemRef = Union[str, "os.PathLike[str]", "Problem"]

_REGISTRIES: dict[tuple, Any] = {}
_REGISTRY_LOCK = threading.Lock()
_DEVICE_LOCKS: dict[tuple, threading.Lock] = {}
_DEVICE_LOCKS_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class CandidateSource:
    """One candidate of :func:`evaluate_batch` (a dict with these keys works too)."""

    source: str
    """The candidate file's text (KernelBench format: ``ModelNew`` with ``Model``'s signature)."""
    problem: Any
    """A problem id, a problem file path or a loaded Problem."""
    generator: str = "api"
    generator_version: str = "0"
    dsl: str | None = None
    """``triton``, ``tilelang`` or ``torch``; None: detected from the imports."""

    @classmethod
    def coerce(cls, item: "CandidateSource | Mapping[str, Any]", index: int) -> "CandidateSource":
        if isinstance(item, CandidateSource):
            return item
        if not isinstance(item, Mapping):
            raise TypeError(f"candidates[{index}]: expected a CandidateSource or a dict with 'source' and 'problem', "
                            f"got {type(item).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(item) - known)
        if unknown:
            raise ValueError(f"candidates[{index}]: unknown key(s) {unknown}; known: {sorted(known)}")
        missing = [k for k in ("source", "problem") if k not in item]
        if missing:
            raise ValueError(f"candidates[{index}]: missing key(s) {missing}")
        return cls(**item)


def _registry(problems: str | os.PathLike | None, overrides: Mapping[str, Any] | None):
    """The registry of ``problems`` with ``overrides`` (``NAME`` or ``PROBLEM:NAME`` keys, as ``--set``), cached.

    A size that names something no problem has is a ValueError (with a did-you-mean), as in the CLI: the
    problem would otherwise run at its own size.
    """
    from harness.problems.registry import BUNDLED_PROBLEMS, load_registry
    from harness.problems.sizes import override_mistakes, overrides_from_mapping

    root = Path(problems).resolve() if problems else BUNDLED_PROBLEMS
    key = (str(root), tuple(sorted((str(k), repr(v)) for k, v in (overrides or {}).items())))
    with _REGISTRY_LOCK:
        if key not in _REGISTRIES:
            ov = overrides_from_mapping(dict(overrides or {}))
            reg = load_registry(root, overrides=ov)
            mistakes = override_mistakes(ov, reg)
            if mistakes:
                raise ValueError("overrides: " + "; ".join(mistakes))
            _REGISTRIES[key] = reg
        return _REGISTRIES[key]


def resolve_problem(problem: ProblemRef, *, problems: str | os.PathLike | None = None,
                    overrides: Mapping[str, Any] | None = None) -> "Problem":
    """A loaded Problem from an id, a problem file path or a Problem (ValueError naming the fix otherwise)."""
    from harness.problems.loader import Problem, ProblemError, load_problem

    if isinstance(problem, Problem):
        return problem
    if isinstance(problem, os.PathLike) or (isinstance(problem, str) and problem.endswith(".py")):
        from harness.problems.sizes import overrides_from_mapping

        try:
            return load_problem(Path(problem), overrides=overrides_from_mapping(dict(overrides or {})))
        except ProblemError as exc:
            raise ValueError(f"problem: {exc}") from None
    if not isinstance(problem, str):
        raise TypeError(f"problem: expected a problem id, a path or a Problem, got {type(problem).__name__}")
    try:
        return _registry(problems, overrides).get(problem)
    except KeyError as exc:
        raise ValueError(f"problem: {exc}") from None


def _device_lock(device: str, gpus: tuple[int, ...], executor: str) -> threading.Lock:
    key = ("ray",) if executor == "ray" else (device, gpus if device == "cuda" else ())
    with _DEVICE_LOCKS_LOCK:
        return _DEVICE_LOCKS.setdefault(key, threading.Lock())


def evaluate_batch(candidates: Sequence["CandidateSource | Mapping[str, Any]"], *,
                   workloads: Sequence[str] | None = None, tags: Sequence[str] | None = None, preset: str = "quick",
                   device: str | None = None, gpus: Sequence[int] | None = None, jobs: int | None = None,
                   problems: str | os.PathLike | None = None, overrides: Mapping[str, Any] | None = None,
                   executor: str = "local", ray_address: str | None = None, out: str | os.PathLike | None = None,
                   seed: int | None = None, sandbox: bool = True, isolation: str = "strict", thresholds: Any = None,
                   scratch: str | os.PathLike | None = None, timing: bool | None = None) -> list[list["JobResult"]]:
    """Evaluate several candidates in one engine run; one list of records (one per workload) per candidate.

    ``workloads``: workload names; else ``tags``; else the device default
    (``gpu`` on a GPU, ``smoke`` on the CPU path), as ``kernelgate run``.
    ``preset``: ``quick``, ``standard`` or ``thorough`` (harness.serve.presets).
    ``device``: ``cuda`` or ``cpu`` (default: the GPU if there is one);
    ``gpus``: GPU indices (default 0); ``jobs``: candidates in flight at once
    (default min(8, CPU cores)); ``executor="ray"`` runs each candidate as a
    Ray task (``ray_address`` as ``kernelgate run --ray-address``).
    ``out``: also append the records to ``out/results.jsonl``. ``seed``: the
    base seed (default fresh and secret per call). ``scratch``: where the
    private candidate folders go (default the system temp folder).
    ``timing``: time the kernels (default: on a GPU only, as ``kernelgate
    run``; True on the CPU path records host-clock times, never a verdict).
    ``isolation``: the workers' OS boundary required (``strict``, ``available``
    or ``off``, as ``kernelgate run --isolation``; docs/security.md).

    Raises ValueError/TypeError for a bad argument (naming it), before
    anything runs; a candidate's own failure is a record, never an exception.
    Raises harness.execute.parent.isolation.IsolationUnavailable when
    ``isolation="strict"`` and this machine cannot confine the workers.
    """
    from harness import env as envmod
    from harness.results.store import ResultStore
    from harness.serve.engine import Engine, EngineConfig, EvalItem, Selection
    from harness.serve.presets import get_preset

    items = [CandidateSource.coerce(c, i) for i, c in enumerate(candidates)]
    if not items:
        return []
    for i, c in enumerate(items):
        if not isinstance(c.source, str) or not c.source.strip():
            raise ValueError(f"candidates[{i}].source: expected the candidate file's text, got {c.source!r:.40}")
    pset = get_preset(preset)
    if executor not in ("local", "ray"):
        raise ValueError(f"executor {executor!r}: expected 'local' or 'ray'")
    device = device or envmod.default_device()
    if device not in ("cuda", "cpu"):
        raise ValueError(f"device {device!r}: expected 'cuda' or 'cpu'")
    gpu_t = tuple(int(g) for g in (gpus or (0,)))
    selection = Selection(tuple(workloads or ()), tuple(tags or ()))
    evals = []
    for i, c in enumerate(items):
        prob = resolve_problem(c.problem, problems=problems, overrides=overrides)
        if not selection.resolve(prob, device):
            raise ValueError(f"candidates[{i}]: problem '{prob.id}' has no workload matching "
                             f"{selection.names or selection.tags or 'the default tags'}; it has "
                             f"{[(w.name, list(w.tags)) for w in prob.workloads]}")
        evals.append(EvalItem(key=f"c{i}", source=c.source, problem=prob, generator=c.generator,
                              generator_version=str(c.generator_version), dsl=c.dsl))
    store = ResultStore(out) if out is not None else None
    got: dict[str, list] = {e.key: [] for e in evals}
    lock = threading.Lock()

    def on_record(key: str, rec: "JobResult") -> None:
        with lock:
            got[key].append(rec)
            if store is not None:
                store.append(rec)

    tmp = Path(tempfile.mkdtemp(prefix="kernelgate-api-", dir=scratch))
    try:
        engine = Engine(EngineConfig(device=device, scratch_root=tmp, gpus=gpu_t, jobs=jobs or min(8, os.cpu_count() or 1),
                                     executor=executor, ray_address=ray_address, sandbox=sandbox,
                                     isolation=isolation, seed=seed,
                                     timing=timing),
                        thresholds=thresholds)
        with _device_lock(device, gpu_t, executor):
            engine.run(evals, pset, selection, on_record)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out_lists = []
    for e in evals:
        order = {w.name: k for k, w in enumerate(e.problem.workloads)}
        out_lists.append(sorted(got[e.key], key=lambda r: order.get(r.workload, len(order))))
    return out_lists


def evaluate(source: str, problem: ProblemRef, *, generator: str = "api", generator_version: str = "0",
             dsl: str | None = None, **options: Any) -> list["JobResult"]:
    """Evaluate one candidate source on ``problem``; its records, one per selected workload.

    The options are those of :func:`evaluate_batch` (``workloads``, ``tags``,
    ``preset``, ``device``, ``gpus``, ``executor``, ``out``, ...).
    """
    cand = CandidateSource(source, problem, generator, str(generator_version), dsl)
    return evaluate_batch([cand], **options)[0]


async def evaluate_async(source: str, problem: ProblemRef, **options: Any) -> list["JobResult"]:
    """:func:`evaluate` without blocking the event loop (it runs in a thread; the work is in subprocesses)."""
    return await asyncio.to_thread(evaluate, source, problem, **options)


async def evaluate_batch_async(candidates: Sequence["CandidateSource | Mapping[str, Any]"],
                               **options: Any) -> list[list["JobResult"]]:
    """:func:`evaluate_batch` without blocking the event loop."""
    return await asyncio.to_thread(evaluate_batch, candidates, **options)


__all__ = ["CandidateSource", "evaluate", "evaluate_async", "evaluate_batch", "evaluate_batch_async", "resolve_problem"]
