"""What a client may submit, validated: every refusal names the field and the fix.

One candidate (``POST /v1/tasks``)::

    {"source": "<the candidate file's text>",        required
     "problem": "layernorm",                          a problem id of the service's registry, or
     "problem_source": "<a problem file's text>",     a KernelBench problem file (if the service allows it)
     "workloads": ["smoke"],                          workload names; else
     "tags": ["gpu"],                                 workload tags; else the device default (gpu / smoke)
     "preset": "quick",                               quick | standard | thorough (harness.serve.presets)
     "generator": "my-policy", "generator_version": "step-120",   default: the client's name, "0"
     "dsl": "triton",                                 triton | tilelang | torch; default: detected
     "rerun": false}                                  true: evaluate again even if an identical task exists

A batch (``POST /v1/batches``): ``{"candidates": [<candidate>, ...], <any
candidate field but source as a default for all>}``.

:class:`RequestError` carries the HTTP status (400 malformed, 403 not
allowed, 413 too large, 422 invalid) and the field path
(``candidates[3].source``).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, fields
from typing import Any

DSLS = ("triton", "tilelang", "torch")
MAX_NAME_CHARS = 200
_DEFAULTABLE = ("problem", "problem_source", "workloads", "tags", "preset", "generator", "generator_version", "dsl", "rerun")


class RequestError(Exception):
    """A request the service refuses, with the HTTP status, the offending field and how to fix it."""

    def __init__(self, status: int, field: str, message: str, headers: dict[str, str] | None = None):
        super().__init__(f"{field}: {message}" if field else message)
        self.status, self.field, self.message, self.headers = status, field, message, headers or {}

    def to_dict(self) -> dict:
        return {"error": {"status": self.status, "field": self.field, "message": str(self)}}


@dataclass(frozen=True, slots=True)
class Limits:
    """Request limits of one service (``kernelgate serve --max-source-bytes`` etc.)."""

    max_source_bytes: int = 256 * 1024
    """Largest candidate (UTF-8 bytes); the largest bundled candidate is 6.3 KB."""
    max_batch: int = 1024
    """Most candidates in one request."""
    allow_problem_source: bool = False
    """Whether clients may send problem files (they run unsandboxed in the trusted checker)."""
    max_body_bytes: int = 64 * 1024 * 1024
    """Largest request body, read only after the token is checked (1024 candidates of 64 KB, escaped, fit)."""

    def to_dict(self) -> dict:
        return {"max_source_bytes": self.max_source_bytes, "max_batch": self.max_batch,
                "max_body_bytes": self.max_body_bytes, "allow_problem_source": self.allow_problem_source}


@dataclass(frozen=True, slots=True)
class Submission:
    """One validated candidate submission (problem and workloads not yet resolved against the registry)."""

    source: str
    problem: str | None
    problem_source: str | None
    workloads: tuple[str, ...]
    tags: tuple[str, ...]
    preset: str
    generator: str
    generator_version: str
    dsl: str | None
    rerun: bool

    def to_dict(self) -> dict:
        return {"source": self.source, "problem": self.problem, "problem_source": self.problem_source,
                "workloads": list(self.workloads), "tags": list(self.tags), "preset": self.preset,
                "generator": self.generator, "generator_version": self.generator_version, "dsl": self.dsl,
                "rerun": self.rerun}

    @classmethod
    def from_dict(cls, d: dict) -> "Submission":
        d = dict(d)
        d["workloads"], d["tags"] = tuple(d["workloads"]), tuple(d["tags"])
        return cls(**d)


_FIELDS = tuple(f.name for f in fields(Submission))


def _unknown(obj: dict, known: tuple[str, ...], where: str) -> None:
    for k in obj:
        if k not in known:
            close = difflib.get_close_matches(str(k), known, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f"; known fields: {', '.join(known)}"
            raise RequestError(422, f"{where}{k}", f"unknown field{hint}")


def _str(v: Any, field: str, *, limit: int = MAX_NAME_CHARS, empty: bool = False) -> str:
    if not isinstance(v, str):
        raise RequestError(422, field, f"expected a string, got {type(v).__name__}")
    if not empty and not v.strip():
        raise RequestError(422, field, "must not be empty")
    if len(v) > limit:
        raise RequestError(422, field, f"{len(v)} characters; at most {limit}")
    return v


def _str_list(v: Any, field: str) -> tuple[str, ...]:
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise RequestError(422, field, f'expected a list of non-empty strings such as ["smoke"], got {v!r:.80}')
    return tuple(dict.fromkeys(v))


def _text(v: Any, field: str, limit: int, what: str) -> str:
    if not isinstance(v, str):
        raise RequestError(422, field, f"expected {what} as a JSON string, got {type(v).__name__}")
    try:
        n = len(v.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise RequestError(422, field, f"not valid UTF-8 text (a lone surrogate at index {exc.start}); send the "
                           "file's text as written") from None
    if n > limit:
        raise RequestError(413, field, f"{n} bytes; the service accepts at most {limit} bytes "
                           "(kernelgate serve --max-source-bytes); send a smaller file")
    if not v.strip():
        raise RequestError(422, field, f"is empty; send {what}")
    return v


def parse_submission(obj: Any, *, where: str = "", defaults: dict | None = None, client_name: str = "api",
                     presets: tuple[str, ...] = (), limits: Limits = Limits()) -> Submission:
    """Validate one candidate object (``where``: the field path prefix, e.g. ``candidates[3].``)."""
    if not isinstance(obj, dict):
        raise RequestError(422, where.rstrip(".") or "body",
                           'expected a JSON object like {"source": "...", "problem": "gelu"}')
    _unknown(obj, _FIELDS, where)
    merged = {**(defaults or {}), **obj}
    if "source" not in obj:
        raise RequestError(422, f"{where}source", "missing; send the candidate file's text")
    source = _text(obj["source"], f"{where}source", limits.max_source_bytes, "the candidate file's text")
    problem = merged.get("problem")
    problem_source = merged.get("problem_source")
    if problem is None and problem_source is None:
        raise RequestError(422, f"{where}problem", "missing; send a problem id (GET /v1/problems lists them) "
                           "or problem_source")
    if problem is not None:
        problem = _str(problem, f"{where}problem")
    if problem_source is not None:
        if not limits.allow_problem_source:
            raise RequestError(403, f"{where}problem_source", "this service evaluates registered problems only "
                               "(GET /v1/problems); its operator can allow problem files with "
                               "'kernelgate serve --allow-problem-source'")
        problem_source = _text(problem_source, f"{where}problem_source", limits.max_source_bytes, "a problem file's text")
    workloads = _str_list(merged.get("workloads", []), f"{where}workloads")
    tags = _str_list(merged.get("tags", []), f"{where}tags")
    preset = merged.get("preset", "quick")
    if not isinstance(preset, str) or (presets and preset not in presets):
        raise RequestError(422, f"{where}preset", f"{preset!r} is not a preset; use one of {list(presets)}")
    generator = _str(merged.get("generator", client_name), f"{where}generator")
    version = merged.get("generator_version", "0")
    if isinstance(version, (int, float)) and not isinstance(version, bool):
        version = str(version)
    version = _str(version, f"{where}generator_version")
    dsl = merged.get("dsl")
    if dsl is not None and dsl not in DSLS:
        raise RequestError(422, f"{where}dsl", f"{dsl!r} is not one of {list(DSLS)} (or leave it out: detected)")
    rerun = merged.get("rerun", False)
    if not isinstance(rerun, bool):
        raise RequestError(422, f"{where}rerun", f"expected true or false, got {rerun!r:.40}")
    return Submission(source, problem, problem_source, workloads, tags, preset, generator.strip(), version.strip(),
                      dsl, rerun)


def parse_batch(body: Any, *, client_name: str, presets: tuple[str, ...], limits: Limits) -> list[Submission]:
    """Validate a batch body ``{"candidates": [...], <defaults>}``."""
    if not isinstance(body, dict):
        raise RequestError(422, "body", 'expected a JSON object like {"candidates": [{"source": "...", "problem": "gelu"}]}')
    _unknown(body, ("candidates",) + _DEFAULTABLE, "")
    cands = body.get("candidates")
    if not isinstance(cands, list) or not cands:
        raise RequestError(422, "candidates", "expected a non-empty list of candidate objects")
    if len(cands) > limits.max_batch:
        raise RequestError(413, "candidates", f"{len(cands)} candidates; at most {limits.max_batch} per request "
                           "(kernelgate serve --max-batch); split the batch")
    defaults = {k: body[k] for k in _DEFAULTABLE if k in body}
    return [parse_submission(c, where=f"candidates[{i}].", defaults=defaults, client_name=client_name, presets=presets,
                             limits=limits) for i, c in enumerate(cands)]


__all__ = ["DSLS", "Limits", "RequestError", "Submission", "parse_batch", "parse_submission"]
