"""Secret workloads: shapes a kernel cannot have been tuned to, drawn per run or kept in a private file.

Every public workload's sizes are in the problem file, so a generator (or a
person) can special-case them. A problem may therefore declare ranges::

    "secret": {"count": 2, "ranges": {"ROWS": [8192, 65536, 512], "COLS": [1024, 8192, 128]},
               "dtypes": ["float16", "bfloat16"], "tags": ["gpu"]}

and :func:`secret_workloads` draws ``count`` concrete workloads from them,
deterministically from the run's secret base seed (the one the correctness
rounds use, which never leaves the parent). Each range ``[lo, hi, step]``
gives the values ``lo, lo + step, ..., <= hi``. The workloads are named
``secret-1``, ``secret-2``, ... (nothing about the shape), flagged
``secret=True``, and their FLOPs and bytes are computed like any workload's.

A private workload file kept outside the problem folder does the same with
fixed shapes (:func:`load_private_workloads`)::

    {"layernorm": [{"name": "p1", "set": {"ROWS": 40000, "COLS": 3072}, "dtype": "bfloat16", "tags": ["gpu"]}]}
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.problems.problem import DTYPES, Problem, ProblemError, Workload
from harness.problems.workloads import build_workload, problem_context

_SPEC_KEYS = {"count", "ranges", "dtypes", "tags", "allow_tf32"}
_PRIVATE_KEYS = {"name", "set", "dtype", "tags", "allow_tf32"}


@dataclass(frozen=True, slots=True)
class SecretSpec:
    """Validated ``KERNELGATE["secret"]``: how many workloads to draw and from which ranges."""

    count: int
    ranges: dict[str, tuple[int, int, int]]
    """``{NAME: (lo, hi, step)}``: values ``lo + k * step <= hi``."""
    dtypes: tuple[str, ...]
    tags: tuple[str, ...]
    allow_tf32: bool = False

    def values(self, name: str) -> range:
        lo, hi, step = self.ranges[name]
        return range(lo, hi + 1, step)

    def corners(self) -> list[dict[str, int]]:
        """The all-lowest and all-highest size choices (a test bounds the memory of both)."""
        return [{k: self.values(k)[0] for k in self.ranges}, {k: self.values(k)[-1] for k in self.ranges}]

    def to_dict(self) -> dict:
        return {"count": self.count, "ranges": {k: list(v) for k, v in self.ranges.items()}, "dtypes": list(self.dtypes),
                "tags": list(self.tags), "allow_tf32": self.allow_tf32}


def parse_secret_spec(raw: Any, *, path: Path | str, sizes: dict[str, Any]) -> SecretSpec:
    """Validate a ``secret`` dict; raises :class:`ProblemError` naming the field and the fix."""
    f = "secret"
    if not isinstance(raw, dict):
        raise ProblemError(path, f, 'must be a dict like {"count": 2, "ranges": {"N": [1024, 8192, 128]}, '
                           '"dtypes": ["float16"], "tags": ["gpu"]}')
    bad = set(raw) - _SPEC_KEYS
    if bad:
        raise ProblemError(path, f, f"unknown key(s) {sorted(bad)}; known: {sorted(_SPEC_KEYS)}")
    count = raw.get("count", 1)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ProblemError(path, f"{f}.count", f"{count!r}: must be a positive integer")
    ranges = raw.get("ranges")
    if not isinstance(ranges, dict) or not ranges:
        raise ProblemError(path, f"{f}.ranges", 'must be a non-empty dict {"NAME": [lo, hi, step]}')
    out: dict[str, tuple[int, int, int]] = {}
    for name, r in ranges.items():
        where = f"{f}.ranges.{name}"
        if name not in sizes:
            raise ProblemError(path, where, f"the module has no size constant '{name}'; it has {sorted(sizes)}")
        if not (isinstance(r, (list, tuple)) and len(r) == 3 and all(isinstance(v, int) and not isinstance(v, bool)
                                                                        for v in r)):
            raise ProblemError(path, where, f"{r!r}: must be [lo, hi, step] integers, e.g. [1024, 8192, 128]")
        lo, hi, step = r
        if not (1 <= lo <= hi and step >= 1):
            raise ProblemError(path, where, f"{r!r}: needs 1 <= lo <= hi and step >= 1")
        out[name] = (lo, hi, step)
    dtypes = raw.get("dtypes", ["float16"])
    if not (isinstance(dtypes, list) and dtypes and all(d in DTYPES for d in dtypes)):
        raise ProblemError(path, f"{f}.dtypes", f"{dtypes!r}: must be a non-empty list of {list(DTYPES)}")
    tags = raw.get("tags", ["gpu"])
    if not (isinstance(tags, list) and all(isinstance(t, str) for t in tags)):
        raise ProblemError(path, f"{f}.tags", f"{tags!r}: must be a list of strings")
    allow_tf32 = raw.get("allow_tf32", False)
    if not isinstance(allow_tf32, bool):
        raise ProblemError(path, f"{f}.allow_tf32", f"{allow_tf32!r}: must be true or false")
    return SecretSpec(count=count, ranges=out, dtypes=tuple(dtypes), tags=tuple(tags), allow_tf32=allow_tf32)


def _rng(base_seed: int, problem: Problem, index: int) -> random.Random:
    """A generator for one secret workload: a hash of the base seed, the problem's id and version, the index."""
    digest = hashlib.sha256(f"kernelgate-secret|{base_seed}|{problem.id}|{problem.version}|{index}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def draw(spec: SecretSpec, base_seed: int, problem: Problem, index: int) -> tuple[dict[str, int], str]:
    """(sizes, dtype) of secret workload ``index`` (1-based); the same arguments always give the same draw."""
    rng = _rng(base_seed, problem, index)
    sizes = {name: rng.choice(spec.values(name)) for name in sorted(spec.ranges)}
    return sizes, rng.choice(spec.dtypes)


def secret_workloads(problem: Problem, base_seed: int, count: int | None = None) -> list[Workload]:
    """``count`` (default: the spec's) secret workloads of ``problem`` for the run whose secret seed is ``base_seed``.

    Returns [] for a problem without a ``secret`` spec. Raises
    :class:`ProblemError` when a drawn size makes the module fail.
    """
    spec: SecretSpec | None = problem.secret
    if spec is None:
        return []
    n = spec.count if count is None else count
    if n < 0:
        raise ValueError(f"count {n}: must be >= 0")
    ctx = problem_context(problem)
    out = []
    for i in range(1, n + 1):
        sizes, dtype = draw(spec, base_seed, problem, i)
        out.append(build_workload(problem, name=f"secret-{i}", set_=sizes, dtype=dtype, tags=spec.tags,
                                  allow_tf32=spec.allow_tf32, secret=True, where=f"secret (draw {i})", context=ctx))
    return out


def load_private_workloads(path: str | Path, registry: Any) -> dict[str, list[Workload]]:
    """Workloads from a private JSON file ``{problem_id: [{"name", "set", "dtype", "tags"}]}``, as secret workloads.

    ``registry`` is a :class:`harness.problems.registry.Registry` (or a dict of
    problems by id). Raises :class:`ProblemError` naming the file, the entry
    and the field (unknown problem ids get a "did you mean").
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProblemError(path, "<file>", f"cannot be read ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise ProblemError(path, "<file>", f"line {exc.lineno}: invalid JSON ({exc.msg}); expected "
                           '{"problem_id": [{"name": ..., "set": {...}, "dtype": ..., "tags": [...]}]}') from None
    if not isinstance(data, dict):
        raise ProblemError(path, "<file>", "must be a JSON object keyed by problem id")
    problems = getattr(registry, "problems", registry)
    out: dict[str, list[Workload]] = {}
    for pid, entries in data.items():
        if pid not in problems:
            import difflib

            close = difflib.get_close_matches(pid, list(problems), n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise ProblemError(path, pid, f"no problem '{pid}' is loaded{hint}")
        if not isinstance(entries, list) or not entries:
            raise ProblemError(path, pid, "must be a non-empty list of workloads")
        problem = problems[pid]
        ctx = problem_context(problem)
        seen: set[str] = set()
        wls = []
        for i, e in enumerate(entries):
            where = f"{pid}[{i}]"
            if not isinstance(e, dict):
                raise ProblemError(path, where, 'must be {"name": ..., "set": {...}, "dtype": ..., "tags": [...]}')
            bad = set(e) - _PRIVATE_KEYS
            if bad:
                raise ProblemError(path, where, f"unknown key(s) {sorted(bad)}; known: {sorted(_PRIVATE_KEYS)}")
            name = e.get("name")
            if not isinstance(name, str) or not name or name in seen:
                raise ProblemError(path, f"{where}.name", "must be a unique non-empty string")
            if any(name == w.name for w in problem.workloads):
                raise ProblemError(path, f"{where}.name", f"'{name}' is a public workload of '{pid}'; choose another")
            seen.add(name)
            set_ = e.get("set", {})
            if not isinstance(set_, dict):
                raise ProblemError(path, f"{where}.set", "must map size constant names to values")
            missing = set(set_) - set(problem.workloads[0].params)
            if missing:
                raise ProblemError(path, f"{where}.set", f"'{pid}' has no size constant(s) {sorted(missing)}; "
                                   f"it has {sorted(problem.workloads[0].params)}")
            tags = e.get("tags", ["gpu"])
            if not (isinstance(tags, list) and all(isinstance(t, str) for t in tags)):
                raise ProblemError(path, f"{where}.tags", "must be a list of strings")
            dtype = e.get("dtype", "float16")
            try:
                wls.append(build_workload(problem, name=name, set_=set_, dtype=dtype, tags=tuple(tags),
                                          allow_tf32=e.get("allow_tf32"), secret=True, where=where, context=ctx))
            except ProblemError as exc:
                raise ProblemError(path, exc.field, exc.why) from None
        out[pid] = wls
    return out
