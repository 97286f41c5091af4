"""The evaluation service without HTTP: admission, idempotency, results, rewards, feedback.

:mod:`harness.serve.app` maps routes onto a :class:`Service`; tests can drive
one directly. A submission goes::

    parse (harness.serve.submission)  -> 4xx naming the field on any defect
    resolve problem and workloads   -> registered id, or a client problem file loaded in a subprocess
    rate limit (per client)         -> 429 + Retry-After when the client's bucket is empty
    Store.submit (one transaction)  -> idempotency: an identical task's id is returned, not a new task;
                                       429 + Retry-After (from the measured task rate) when the queue is full
    Dispatcher.wake                 -> a lane claims it

The idempotency key (:func:`task_key`) is a content hash of everything a
record depends on: the source, the problem (id and file hash), the selected
workloads and their sizes, the environment (device model, driver, library
versions) and harness version, the preset's settings, whether kernels are
timed and the gate thresholds; and the client. Not the generator name: a
client that submits the same source twice gets the first task (its records
name the first generator). Another client gets a task of its own: every
record carries the authenticated client that submitted it (``client``), and
a client's records never answer another's submission. ``rerun: true``
always makes a new task; a stored task with a failure the harness or a
neighbour could have caused is never the answer (:func:`harness.serve.store.reusable`).

Clients and names: a generator name belongs to the first client that submits
under it (:class:`harness.serve.store.Store` keeps the owners); another
client naming it, or naming another client (a client's name is its default
generator), gets 403.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from harness import __version__
from harness.jsonio import dumps
from harness.serve.auth import Client, RateLimiter, TokenTable
from harness.serve.dispatcher import BATCH_MAX, Dispatcher, LaneState
from harness.serve.engine import Engine, EngineConfig, Selection
from harness.serve.presets import PRESETS, get_preset
from harness.serve.submission import Limits, RequestError, Submission, parse_batch, parse_submission
from harness.serve.store import DONE, GeneratorTaken, NewTask, QueueFull, Store, Task

if TYPE_CHECKING:
    from harness.problems.loader import Problem, Workload
    from harness.problems.registry import Registry
    from harness.records import EnvSnapshot

INCLUDE = ("records", "reward", "feedback", "source")
DEFAULT_INCLUDE = ("records", "reward")
RATE_WINDOW_S = 600.0
"""Throughput and Retry-After use the completions of the last ten minutes."""
RETRY_AFTER_UNMEASURED_S = 5
"""Retry-After when the queue is full before any task has finished (no rate measured yet)."""
RETRY_AFTER_MAX_S = 600
_SLUG = re.compile(r"[^A-Za-z0-9_]+")


@dataclass(frozen=True)
class ServiceConfig:
    """Settings of one service (``kernelgate serve`` options)."""

    results: Path
    """The results folder: results.jsonl and serve/queue.sqlite."""
    device: str
    limits: Limits = Limits()
    max_queue: int = 10_000
    """Most queued (not yet running) tasks; beyond it submissions get 429."""
    batch_max: int = BATCH_MAX
    """Most tasks in one engine run of one lane (:data:`harness.serve.dispatcher.BATCH_MAX`)."""
    linger_s: float = 0.25
    max_attempts: int = 3
    max_wait_s: float = 60.0
    """Longest long-poll a client may ask for."""
    drain_s: float = 30.0
    """On shutdown, how long running batches may finish before the process exits."""
    auth: bool = True
    thresholds: Any = None
    timing: bool | None = None
    """Time kernels (``kernelgate serve --timing/--no-timing``); None: on a GPU only
    (:func:`harness.serve.presets.timing_default`, the rule of ``kernelgate run`` and the API). Part of every
    task's key; the engines must be built with the same value (:func:`build_engines`)."""


def task_key(source: str, problem: "Problem", workloads: Sequence["Workload"], env: "EnvSnapshot", preset: str,
             thresholds: Any, *, timed: bool = True, client: str = "") -> str:
    """The idempotency key of a task (see the module docstring); ``timed``: whether its kernels are timed,
    ``client``: the authenticated client that submits it."""
    from harness.score.gates import Thresholds

    parts = [hashlib.sha256(source.encode("utf-8")).hexdigest(), problem.id, problem.source_sha256,
             [(w.name, sorted(w.params.items()), w.dtype, w.allow_tf32) for w in workloads],
             list(env.comparable_key()), __version__, get_preset(preset).to_dict(), (thresholds or Thresholds()).to_dict(),
             {"timed": bool(timed), "client": client}]
    return hashlib.sha256(dumps(parts).encode()).hexdigest()


def _iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds")


def build_engines(device: str, scratch: Path, *, gpus: Sequence[int] = (0,), jobs: int = 1, executor: str = "local",
                  ray_address: str | None = None, ray_lanes: int = 2, thresholds: Any = None,
                  problem_paths: Sequence[Path] = (), **engine_options: Any) -> dict[str, Engine]:
    """One Engine per lane: ``gpu<i>`` per GPU, ``cpu``, or ``ray<k>``; ceilings measured (or loaded) once when the
    lanes time kernels (``engine_options["timing"]``, see :class:`ServiceConfig.timing`).

    ``problem_paths``: the service's problem files; a GPU or CPU lane's kept executor sandboxes its workers for
    all of them from the start (:attr:`EngineConfig.problem_paths`).

    With ``executor="ray"`` this process connects to Ray here, once, so that
    the lanes' concurrent runs share one connection.

    ``engine_options``: the other :class:`EngineConfig` fields (sandbox,
    check_slots, seed, timeouts).
    """
    from harness import env as envmod
    from harness.pipeline import CANARY, PROJECT_ROOT

    canary = PROJECT_ROOT / CANARY[1]  # the canary runs in the lanes' kept executors too (harness.pipeline)
    problem_paths = tuple(problem_paths) + ((canary,) if canary.is_file() else ())
    engines: dict[str, Engine] = {}
    if executor == "ray":
        import os

        import ray

        if not ray.is_initialized():
            # connect once for the process: every lane's runs share this connection, and the engine
            # leaves a connection it did not open alone (one run's end must not shut down another's Ray)
            os.environ.setdefault("RAY_worker_niceness", "0")
            try:
                ray.init(address=ray_address)
            except ConnectionError as exc:
                raise RuntimeError(f"cannot reach a Ray cluster at --ray-address {ray_address!r}: {exc}") from None
        for k in range(max(1, ray_lanes)):
            cfg = EngineConfig(device=device, scratch_root=scratch / f"ray{k}", gpus=tuple(gpus), jobs=jobs,
                               executor="ray", ray_address=ray_address, **engine_options)
            engines[f"ray{k}"] = Engine(cfg, thresholds=thresholds)
    elif device == "cuda":
        for g in gpus:
            cfg = EngineConfig(device=device, scratch_root=scratch / f"gpu{g}", gpus=(g,), jobs=jobs, keep_executor=True,
                               problem_paths=tuple(problem_paths), **engine_options)
            engines[f"gpu{g}"] = Engine(cfg, env=envmod.snapshot("cuda", g), thresholds=thresholds)
    else:
        engines["cpu"] = Engine(EngineConfig(device="cpu", scratch_root=scratch / "cpu", jobs=jobs, keep_executor=True,
                                             problem_paths=tuple(problem_paths), **engine_options),
                                thresholds=thresholds)
    from harness.serve.presets import time_kernels

    first = next(iter(engines.values()))
    first.environment()
    if time_kernels(device, engine_options.get("timing")):
        ceilings = first.device_ceilings()  # as kernelgate run: the first GPU's ceilings screen every GPU
        for e in engines.values():
            e.ceilings = ceilings
    for e in engines.values():
        e.environment()
    return engines


@dataclass
class Service:
    """Admission, idempotency and results of one service (see the module docstring).

    ``engines``: one engine per lane (:func:`build_engines`, or a fake in
    tests); ``registry``: the problems clients may name; ``tokens``: the
    clients (None only with ``config.auth`` off).
    """

    config: ServiceConfig
    engines: dict[str, Any]
    registry: "Registry"
    tokens: TokenTable | None = None
    store: Store = field(init=False)
    dispatcher: Dispatcher = field(init=False)
    limiter: RateLimiter = field(default_factory=RateLimiter)
    started_at: float = field(default_factory=time.time)
    accepting: bool = True
    recovery: Any = None
    _loop: asyncio.AbstractEventLoop | None = None
    _event: asyncio.Event | None = None
    _problems: dict[str, "Problem"] = field(default_factory=dict)
    _problems_lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.config.auth and self.tokens is None:
            raise ValueError("the service needs a tokens file (--tokens FILE), or auth turned off (--no-auth)")
        self.store = Store(self.config.results)
        first = next(iter(self.engines.values()))
        self.env = first.environment()
        lanes = {}
        for name, eng in self.engines.items():
            env = eng.environment()
            gpus = tuple(eng.config.gpus) if self.config.device == "cuda" and eng.config.executor == "local" else ()
            lanes[name] = LaneState(name, self.config.device, gpus, env.device_name, env.device_uuid)
        self.dispatcher = Dispatcher(self.store, self.engines, lanes, self.problem_of, self.notify,
                                     batch_max=self.config.batch_max, linger_s=self.config.linger_s,
                                     max_attempts=self.config.max_attempts)

    # ------------------------------------------------------------------ lifecycle
    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Recover the queue after a restart, then start the lanes; ``loop`` wakes long-polls."""
        self.recovery = self.store.recover()
        if loop is not None:
            self._loop = loop
            self._event = asyncio.Event()
        self.dispatcher.start()

    def stop(self) -> bool:
        """Refuse new submissions and let running batches finish (up to ``config.drain_s``)."""
        self.accepting = False
        done = self.dispatcher.stop(self.config.drain_s)
        for e in self.engines.values():
            e.close()
        return done

    def notify(self) -> None:
        """Records were stored: wake the long-polls (thread-safe)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._fire)

    def _fire(self) -> None:
        ev, self._event = self._event, asyncio.Event()
        if ev is not None:
            ev.set()

    # ------------------------------------------------------------------ problems
    def _client_problem(self, text: str, name: str | None, where: str) -> "Problem":
        from harness.serve.problem_probe import probe

        sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
        stem = _SLUG.sub("_", name or "problem").strip("_") or "problem"
        path = (self.config.results / "serve" / "problems" / sha[:24] / f"{stem}.py").resolve()
        key = str(path)
        with self._problems_lock:
            if key in self._problems:
                return self._problems[key]
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(text.encode("utf-8"))
            tmp.replace(path)
        try:
            prob = probe(path, self.config.results / "serve" / "probe-scratch")
        except ValueError as exc:
            raise RequestError(422, f"{where}problem_source", f"not a usable problem file: {exc}") from None
        with self._problems_lock:
            self._problems[key] = prob
        return prob

    def problem_of(self, spec: dict) -> "Problem":
        """The Problem of a stored task spec (registered, or the client's file, loaded once per process)."""
        ref = spec["problem_ref"]
        if ref.get("file"):
            try:
                return self._client_problem(spec["problem_source"], spec.get("problem"), "")
            except RequestError as exc:
                raise ValueError(str(exc)) from None
        return self.registry.get(ref["id"])

    def _resolve(self, sub: Submission, where: str) -> tuple["Problem", dict, list["Workload"]]:
        if sub.problem_source is not None:
            prob = self._client_problem(sub.problem_source, sub.problem, where)
            ref = {"id": prob.id, "file": True, "sha256": prob.source_sha256}
        else:
            try:
                prob = self.registry.get(sub.problem or "")
            except KeyError as exc:
                raise RequestError(422, f"{where}problem", str(exc)) from None
            ref = {"id": prob.id, "file": False, "sha256": prob.source_sha256}
        names = {w.name for w in prob.workloads}
        bad = [w for w in sub.workloads if w not in names]
        if bad:
            raise RequestError(422, f"{where}workloads", f"{bad} not workload(s) of '{prob.id}'; it has {sorted(names)}")
        wls = Selection(sub.workloads, sub.tags).resolve(prob, self.config.device)
        if not wls:
            field_name = "tags" if sub.tags else "workloads"
            raise RequestError(422, f"{where}{field_name}", f"selects no workload of '{prob.id}' on {self.config.device}; "
                               f"it has {[(w.name, list(w.tags)) for w in prob.workloads]}")
        return prob, ref, wls

    # ------------------------------------------------------------------ submissions
    def submit(self, client: Client | None, body: Any, *, batch: bool) -> list[dict]:
        """Queue one candidate (``batch=False``) or a batch; one summary per candidate, in order."""
        if not self.accepting:
            raise RequestError(503, "", "the service is shutting down; retry shortly", {"Retry-After": "5"})
        lanes = self.dispatcher.lanes.values()
        if all(s.state == "retired" for s in lanes):
            raise RequestError(503, "", "every lane of the service is retired (its engine failed repeatedly: "
                               + "; ".join(f"{s.name}: {s.last_error}" for s in lanes) + "); ask its operator to restart it")
        name = client.name if client is not None else "anonymous"
        presets = tuple(PRESETS)
        limits = self.config.limits
        subs = (parse_batch(body, client_name=name, presets=presets, limits=limits) if batch else
                [parse_submission(body, client_name=name, presets=presets, limits=limits)])
        others = {c.name for c in self.tokens.clients} - {name} if self.tokens is not None else set()
        from harness.serve.presets import time_kernels

        timed = time_kernels(self.config.device, self.config.timing)
        new, views = [], []
        for i, sub in enumerate(subs):
            where = f"candidates[{i}]." if batch else ""
            if sub.generator in others:
                raise RequestError(403, f"{where}generator", f"'{sub.generator}' is the name of another client of this "
                                   f"service; choose another name (the default is your client name, '{name}')")
            prob, ref, wls = self._resolve(sub, where)
            key = task_key(sub.source, prob, wls, self.env, sub.preset, self.config.thresholds, timed=timed, client=name)
            spec = {**sub.to_dict(), "problem_ref": ref, "problem_id": prob.id}
            new.append(NewTask(id="t" + secrets.token_hex(12), key=key, client=name, spec=spec,
                               workloads=tuple(w.name for w in wls), rerun=sub.rerun))
            views.append({"problem_id": prob.id, "workloads": [w.name for w in wls], "preset": sub.preset})
        if client is not None:
            if len(new) > client.burst:
                raise RequestError(413, "candidates", f"{len(new)} candidates exceed the burst of {client.burst} of "
                                   f"client '{client.name}' (tokens file); split the batch")
            wait = self.limiter.take(client, len(new))
            if wait > 0:
                raise RequestError(429, "", f"rate limit of client '{client.name}': {client.rate_per_s:g} candidates/s, "
                                   f"burst {client.burst}; retry in {wait:.1f} s",
                                   {"Retry-After": str(max(1, math.ceil(wait)))})
        try:
            ids = self.store.submit(new, self.config.max_queue)
        except GeneratorTaken as exc:
            if client is not None:
                self.limiter.refund(client, len(new))
            i = next(k for k, s in enumerate(subs) if s.generator == exc.name)
            raise RequestError(403, f"candidates[{i}].generator" if batch else "generator", str(exc)) from None
        except QueueFull as exc:
            if client is not None:
                self.limiter.refund(client, len(new))
            retry = self._retry_after(exc.queued + exc.wanted - exc.capacity)
            raise RequestError(429, "", f"{exc}; retry in {retry} s (Retry-After)", {"Retry-After": str(retry)}) from None
        self.dispatcher.wake()
        states = self.store.get([tid for tid, _ in ids])
        return [{"task_id": tid, "state": states[tid].state, "deduplicated": dup, **v}
                for (tid, dup), v in zip(ids, views)]

    def _retry_after(self, excess: int) -> int:
        done = self.store.tasks_finished_since(time.time() - RATE_WINDOW_S)
        if done == 0:
            return RETRY_AFTER_UNMEASURED_S
        window = min(RATE_WINDOW_S, time.time() - self.started_at) or 1.0
        return int(min(RETRY_AFTER_MAX_S, max(1, math.ceil(excess / (done / window)))))

    # ------------------------------------------------------------------ results
    def view(self, task: Task, include: Sequence[str], reward_config: Any) -> dict:
        """The JSON view of one task: state and times; when done, what ``include`` asks for."""
        spec = task.spec
        out: dict[str, Any] = {
            "task_id": task.id, "state": task.state, "problem_id": spec["problem_id"], "preset": spec["preset"],
            "workloads": list(task.workloads), "generator": spec["generator"],
            "generator_version": spec["generator_version"], "client": task.client, "attempts": task.attempts,
            "submitted_at": _iso(task.submitted_at), "started_at": _iso(task.started_at),
            "finished_at": _iso(task.finished_at),
            "latency_s": round(task.finished_at - task.submitted_at, 3) if task.finished_at else None,
        }
        if task.error:
            out["error"] = task.error
        if "source" in include:
            out["source"] = spec["source"]
        if task.state != DONE:
            return out
        recs = self.store.records(task.id)
        out["statuses"] = {r.workload: r.status.value for r in recs}
        if "records" in include:
            out["records"] = [r.to_dict() for r in recs]
        if "reward" in include:
            from harness.score.reward import reward_of

            out["reward"] = reward_of(recs, reward_config).to_dict()
        if "feedback" in include and recs:
            from harness.prompts.feedback import feedback_text

            out["feedback"] = feedback_text(recs, source=spec["source"])
        return out

    def lookup(self, task_ids: Sequence[str]) -> dict[str, Task]:
        """The tasks of ``task_ids``; 404 naming the unknown ones."""
        tasks = self.store.get(task_ids)
        unknown = [t for t in task_ids if t not in tasks]
        if unknown:
            raise RequestError(404, "task_ids", f"unknown task id(s) {unknown[:5]}{' ...' if len(unknown) > 5 else ''}; "
                               "use the ids the submission returned")
        return tasks

    async def wait(self, task_ids: Sequence[str], *, until: str, wait_s: float) -> dict[str, Task]:
        """The tasks once ``until`` holds ("all" done, "any" done) or after ``wait_s`` seconds, whichever is first."""
        deadline = time.monotonic() + max(0.0, min(wait_s, self.config.max_wait_s))
        while True:
            ev = self._event
            tasks = await asyncio.to_thread(self.lookup, task_ids)
            done = [t for t in tasks.values() if t.state == DONE]
            if (until == "all" and len(done) == len(tasks)) or (until == "any" and done):
                return tasks
            left = deadline - time.monotonic()
            if left <= 0 or ev is None:
                return tasks
            try:
                await asyncio.wait_for(ev.wait(), timeout=min(left, 1.0))
            except asyncio.TimeoutError:
                pass

    # ------------------------------------------------------------------ health
    def health(self) -> dict:
        counts = self.store.counts()
        now = time.time()
        window = min(RATE_WINDOW_S, now - self.started_at) or 1.0
        recs = self.store.records_since(now - RATE_WINDOW_S)
        lanes = [s.to_dict() for s in self.dispatcher.lanes.values()]
        ok = self.accepting and any(s["state"] not in ("retired", "stopped") for s in lanes)
        return {
            "status": "ok" if ok else "degraded", "accepting": self.accepting, "harness_version": __version__,
            "uptime_s": round(now - self.started_at, 1),
            "queue": {**counts, "capacity": self.config.max_queue},
            "lanes": lanes, "environment": self.env.to_dict(),
            "throughput": {"records_last_window": recs, "window_s": round(window, 1),
                           "evaluations_per_hour": round(recs / window * 3600.0, 1)},
            "presets": {k: p.to_dict() for k, p in PRESETS.items()},
            "limits": {**self.config.limits.to_dict(), "max_queue": self.config.max_queue,
                       "max_wait_s": self.config.max_wait_s},
            "auth": "tokens" if self.config.auth else "none",
            "recovery": None if self.recovery is None else {"requeued": len(self.recovery.requeued),
                                                             "completed": len(self.recovery.completed),
                                                             "appended": self.recovery.appended},
        }

    def problems(self) -> list[dict]:
        return [{"id": p.id, "category": p.category, "library_op": p.library_op, "version": p.version,
                 "workloads": [{"name": w.name, "dtype": w.dtype, "tags": list(w.tags)} for w in p.workloads]}
                for p in self.registry]


__all__ = ["DEFAULT_INCLUDE", "INCLUDE", "Service", "ServiceConfig", "build_engines", "task_key"]
