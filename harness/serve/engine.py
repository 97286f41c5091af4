"""The one adapter between callers that hold candidate *sources* and the engine that evaluates *files*.

:class:`Engine` takes candidates as text (an :class:`EvalItem` each), writes
them into a private folder as candidate files (``<problem>__<key>.py`` in a
folder named after the generator, with a ``manifest.json``), and runs them
through the stable entry point :func:`harness.pipeline.evaluate`, so every
candidate gets exactly what ``kernelgate run`` gives it: static scans in this
process (parsing only), then one fresh sandboxed worker subprocess per
candidate, a trusted checker, timing, screening. Records come back through
``on_record(key, record)`` as they are written; a candidate that produced
no record for a workload it asked for gets a HARNESS_ERROR record, so every
item ends with exactly one record per selected workload.

Both :mod:`harness.api` and the service (:mod:`harness.serve.dispatcher`)
call the engine only through this module. Each :meth:`Engine.run` is one
``evaluate()`` call. By default that call starts its own checker processes
and worker pool and stops them at the end (15-22 s between the service's batches on an
H200 host). With ``EngineConfig.keep_executor`` (the
service's lanes) the checkers, pre-started workers and device gate are kept
between runs (:class:`harness.execute.parent.local.KeptExecutor`) and stopped by
:meth:`Engine.close`.
"""

from __future__ import annotations

import re
import secrets
import shutil
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from harness.execute.parent.options import DEFAULTS
from harness.jsonio import dumps
from harness.records import EnvSnapshot, ErrorInfo, JobResult, Status

if TYPE_CHECKING:
    from harness.problems.loader import Problem, Workload
    from harness.serve.presets import Preset

OnRecord = Callable[[str, JobResult], None]
_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


def default_tags(device: str) -> tuple[str, ...]:
    """The workload tags a selection without names or tags means (as ``kernelgate run``): gpu or smoke."""
    return ("gpu",) if device == "cuda" else ("smoke",)


@dataclass(frozen=True, slots=True)
class Selection:
    """Which workloads of each problem to run: by name, else by tag (an empty selection: the device default)."""

    names: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()

    def resolve(self, problem: "Problem", device: str) -> list["Workload"]:
        """The problem's workloads this selection picks, in the problem's order (may be empty)."""
        if self.names:
            return problem.select(None, self.names)
        return problem.select(self.tags or default_tags(device), None)

    def to_dict(self) -> dict:
        return {"names": list(self.names), "tags": list(self.tags)}

    @classmethod
    def from_dict(cls, d: dict) -> "Selection":
        return cls(tuple(d.get("names", ())), tuple(d.get("tags", ())))


@dataclass(frozen=True, slots=True)
class EvalItem:
    """One candidate to evaluate, as text."""

    key: str
    """The caller's id for it (a task id): letters and digits only, unique within one run."""
    source: str
    problem: "Problem"
    generator: str = "api"
    generator_version: str = "0"
    dsl: str | None = None
    """``triton``, ``tilelang`` or ``torch``; None: detected from the imports, as for a submission folder."""


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """How and where the engine runs candidates (the RunOptions fields a caller may set)."""

    device: str
    """``cuda`` or ``cpu``."""
    scratch_root: Path
    """Private folders for candidate files and worker scratch (one per run, removed after it)."""
    gpus: tuple[int, ...] = (0,)
    jobs: int = 1
    executor: str = "local"
    """``local`` (worker subprocesses on this machine) or ``ray`` (one Ray task per candidate)."""
    ray_address: str | None = None
    sandbox: bool = True
    isolation: str = DEFAULTS.isolation
    """The workers' OS boundary required (:attr:`RunOptions.isolation`: ``strict``, ``available`` or ``off``)."""
    check_slots: int = 3
    seed: int | None = None
    """Base seed of every run; None: a fresh secret one per run (recorded in each record's base_seed)."""
    compile_timeout_s: float = DEFAULTS.compile_timeout_s
    """Seconds for a worker to start, import, build and compile (:attr:`RunOptions.compile_timeout_s`, as for
    ``kernelgate run``)."""
    round_timeout_s: float = DEFAULTS.round_timeout_s
    timing_timeout_s: float = DEFAULTS.timing_timeout_s
    prestart: bool = True
    timing: bool | None = None
    """Time kernels: None follows :func:`harness.serve.presets.timing_default` (on a GPU only, as ``kernelgate
    run``); True also on the CPU path (host-clock times, never a verdict); False never."""
    spawn: str = "fork"
    """``fork`` (workers forked from a fork server) or ``exec``: :attr:`harness.execute.parent.options.RunOptions.spawn`."""
    keep_executor: bool = False
    """With ``executor="local"``: keep the checkers and pre-started workers up between runs (a service lane;
    :class:`harness.execute.parent.local.KeptExecutor`), in ``scratch_root/kept``, until :meth:`Engine.close`."""
    problem_paths: tuple[Path, ...] = ()
    """With ``keep_executor``: the problem files the kept executor's pre-started workers are sandboxed for from its
    first run on (the service's registry), so a later batch with other problems shares it instead of replacing it
    (replacing it cost 22 s between two batches of an H200 load test: the executor closed and started again)."""


@dataclass
class Engine:
    """Evaluates batches of :class:`EvalItem` through :func:`harness.pipeline.evaluate` (see the module docstring).

    ``env``: the environment snapshot records carry (default: this machine's,
    for ``config.gpus[0]``); ``ceilings``: the measured device ceilings used
    for screening (default: loaded or measured once, as ``kernelgate run``
    does, when a preset times kernels); ``thresholds``: the gate thresholds
    (default: harness.score.gates.Thresholds()).
    """

    config: EngineConfig
    env: EnvSnapshot | None = None
    ceilings: dict | None = None
    thresholds: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _keeper: Any = field(default=None, repr=False)

    def environment(self) -> EnvSnapshot:
        with self._lock:
            if self.env is None:
                from harness import env as envmod

                self.env = envmod.snapshot(self.config.device, self.config.gpus[0] if self.config.gpus else 0)
            return self.env

    def device_ceilings(self) -> dict:
        """The ceilings (measured in a subprocess the first time on this device, then cached on disk)."""
        with self._lock:
            if self.ceilings is None:
                from harness.measure.calibrate import load_or_measure

                env = self.env
                assert env is not None
                self.ceilings = load_or_measure(env.to_dict(), quick=self.config.device == "cpu")
            return self.ceilings

    def run(self, items: Sequence[EvalItem], preset: "Preset", selection: Selection, on_record: OnRecord,
            on_drained: Callable[[], None] | None = None) -> None:
        """Evaluate ``items`` under ``preset`` on the workloads ``selection`` picks; records go to ``on_record``;
        ``on_drained()`` (at most once) when every item has started (:attr:`harness.pipeline.EvalRequest.on_drained`).

        Items whose problems share an id but differ in content run in
        separate engine calls (a run's registry maps one id to one file; only the last call's drain is told).
        Raises only for errors of the engine itself (RuntimeError when every
        device failed its health probe, ValueError for bad options); records
        already passed to ``on_record`` stand.
        """
        self.environment()
        pending = list(items)
        while pending:
            chosen: dict[str, str] = {}
            now, later = [], []
            for it in pending:
                if chosen.setdefault(it.problem.id, it.problem.source_sha256) == it.problem.source_sha256:
                    now.append(it)
                else:
                    later.append(it)
            self._run_once(now, preset, selection, on_record, on_drained if not later else None)
            pending = later

    def _run_once(self, items: list[EvalItem], preset: "Preset", selection: Selection, on_record: OnRecord,
                  on_drained: Callable[[], None] | None = None) -> None:
        from harness.pipeline import EvalRequest, evaluate
        from harness.problems.registry import Registry
        from harness.score.gates import Thresholds

        cfg = self.config
        env = self.environment()
        root = cfg.scratch_root / f"run-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-{secrets.token_hex(4)}"
        by_rel: dict[str, EvalItem] = {}
        folders: dict[tuple, Path] = {}
        for it in items:
            if not it.key.isalnum():
                raise ValueError(f"EvalItem.key {it.key!r}: use letters and digits only (it becomes part of a file name)")
            group = (it.generator, it.generator_version, it.dsl)
            folder = folders.get(group)
            if folder is None:
                folder = root / "candidates" / str(len(folders)) / (_SLUG.sub("-", it.generator).strip("-.") or "candidate")
                folder.mkdir(parents=True)
                manifest = {"generator": it.generator, "version": it.generator_version, **({"dsl": it.dsl} if it.dsl else {})}
                (folder / "manifest.json").write_text(dumps(manifest) + "\n", encoding="utf-8")
                folders[group] = folder
            path = folder / f"{it.problem.id}__{it.key}.py"
            path.write_bytes(it.source.encode("utf-8"))  # the record's candidate_sha256 is sha256 of these bytes
            by_rel[f"{folder.name}/{path.name}"] = it
        seen: set[tuple[str, str]] = set()
        seen_lock = threading.Lock()

        def emit(r: JobResult) -> None:
            it = by_rel.get(r.candidate)
            if it is None:
                return
            with seen_lock:
                seen.add((it.key, r.workload))
            on_record(it.key, r)

        seed = cfg.seed if cfg.seed is not None else secrets.randbelow(1 << 48)
        keeper = self._kept_executor()
        opts = preset.run_options(
            cfg.device, timing=cfg.timing, gpus=cfg.gpus, base_seed=seed, jobs=max(1, cfg.jobs),
            scratch_root=cfg.scratch_root / "kept" if keeper is not None else root / "scratch",
            sandbox=cfg.sandbox, isolation=cfg.isolation, check_slots=cfg.check_slots,
            compile_timeout_s=cfg.compile_timeout_s,
            round_timeout_s=cfg.round_timeout_s, timing_timeout_s=cfg.timing_timeout_s, prestart=cfg.prestart,
            spawn=cfg.spawn)
        problems = {it.problem.id: it.problem for it in items}
        req = EvalRequest(
            submissions=sorted(set(folders.values())), registry=Registry(problems=problems), out_dir=root / "out",
            options=opts, env=env, workload_tags=() if selection.names else (selection.tags or default_tags(cfg.device)),
            workload_names=selection.names, ceilings=self.device_ceilings() if opts.time_kernels else None,
            thresholds=self.thresholds or Thresholds(), progress=False, on_result=emit, executor=cfg.executor,
            ray_address=cfg.ray_address, keeper=keeper, on_drained=on_drained)
        try:
            evaluate(req)
        finally:
            try:
                for it in items:
                    missing = [w for w in selection.resolve(it.problem, cfg.device) if (it.key, w.name) not in seen]
                    if missing:
                        err = ErrorInfo("NoRecord", "the engine returned no record for this workload")
                        for r in self.failure_records(it, missing, err, run_id=f"serve-{seed:x}"):
                            on_record(it.key, r)
            finally:
                shutil.rmtree(root, ignore_errors=True)

    def failure_records(self, item: EvalItem, workloads: Sequence["Workload"], error: ErrorInfo,
                        run_id: str = "serve") -> list[JobResult]:
        """HARNESS_ERROR records for ``workloads`` of ``item``, for failures that are not the candidate's."""
        import hashlib

        from harness.candidates.discover import Candidate, detect_dsl
        from harness.results.ids import static_record

        env = self.environment()
        data = item.source.encode("utf-8")
        name = f"{item.problem.id}__{item.key}.py"
        cand = Candidate(path=Path(name), rel_path=f"{_SLUG.sub('-', item.generator).strip('-.') or 'candidate'}/{name}",
                         problem_id=item.problem.id, variant=item.key, dsl=item.dsl or detect_dsl(item.source),
                         sha256=hashlib.sha256(data).hexdigest(), generator=item.generator,
                         generator_version=item.generator_version)
        return [static_record(cand, item.problem, w, Status.HARNESS_ERROR, error, env, run_id) for w in workloads]

    def _kept_executor(self) -> Any:
        """The executor kept between runs (``config.keep_executor``, local executor only), else None."""
        if not (self.config.keep_executor and self.config.executor == "local"):
            return None
        with self._lock:
            if self._keeper is None:
                from harness.execute.parent.local import KeptExecutor

                self._keeper = KeptExecutor(problem_paths=self.config.problem_paths)
            return self._keeper

    def close(self) -> None:
        """Stop what the engine keeps between runs (the kept executor's checkers and workers, their scratch)."""
        with self._lock:
            keeper, self._keeper = self._keeper, None
        if keeper is not None:
            keeper.close()
            shutil.rmtree(self.config.scratch_root / "kept", ignore_errors=True)


__all__ = ["Engine", "EngineConfig", "EvalItem", "OnRecord", "Selection", "default_tags"]
