"""Render a generation prompt for one problem and one DSL (``triton`` or ``tilelang``).

The prompt is built only from trusted inputs (the problem file and its
metadata) plus, for feedback loops, a previous attempt's result records. It
states the rules exactly as :mod:`harness.execute` and :mod:`harness.score`
enforce them, so a generator is never scored against a rule it was not told.

Templates live in ``harness/prompts/templates``: ``prompt.md.j2`` includes
``dsl_<dsl>.md.j2`` for the DSL's conventions and a skeleton. Rendering uses
``StrictUndefined`` so a template that names a missing field fails loudly.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from harness.jsonio import atomic_write_text
from harness.problems.loader import Problem
from harness.records import JobResult

DSLS = ("triton", "tilelang")
TEMPLATES = Path(__file__).resolve().parent / "templates"


def _human(n: float, unit: str) -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= scale:
            return f"{n / scale:.3g} {prefix}{unit}"
    return f"{n:.3g} {unit}"


def _fmt(x: float | None, spec: str = ".3g") -> str:
    return "-" if x is None else format(x, spec)


def prompt_context(problem: Problem, dsl: str, *, feedback: JobResult | Sequence[JobResult] | None = None,
                   feedback_source: str | None = None) -> dict:
    """The values the templates render (exposed for tests and other front ends).

    ``feedback`` becomes the text of :func:`harness.prompts.feedback.feedback_text`
    (with ``feedback_source``, the previous code, when given).
    """
    from harness.prompts.feedback import feedback_text

    if dsl not in DSLS:
        raise ValueError(f"dsl {dsl!r}: expected one of {DSLS}")
    try:
        source = problem.path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"{problem.path}: cannot read the problem file ({exc.strerror})") from None
    workloads = [{
        "name": w.name, "dtype": w.dtype, "tags": ", ".join(w.tags) or "-",
        "sizes": " ".join(f"{k}={v}" for k, v in sorted(w.params.items())) or "(file defaults)",
        "flops": _human(w.flops, "FLOP"), "bytes": _human(w.min_bytes, "B"),
        "intensity": _fmt(w.flops / w.min_bytes if w.min_bytes else None), "atol": f"{w.atol:g}", "rtol": f"{w.rtol:g}",
        "tf32": "yes" if w.allow_tf32 else "no", "timed": w.is_gpu, "smoke": w.is_smoke,
    } for w in problem.workloads]
    from harness.execute.shared.inputs import N_ROUNDS_MIN
    from harness.execute.shared.value_profiles import NORMAL, PROFILES
    from harness.score.gates import HACK_U_ROOF, Thresholds

    return {
        "problem": problem, "dsl": dsl, "source": source.rstrip("\n"), "workloads": workloads,
        "dtypes": sorted({w.dtype for w in problem.workloads}),
        "any_tf32": any(w.allow_tf32 for w in problem.workloads),
        "library_aten": list(problem.library_aten), "n_rounds": N_ROUNDS_MIN,
        "transforms": [p.name.replace("_", " ") for p in PROFILES if p.index != NORMAL],
        "thresholds": Thresholds(), "hack_u_roof": HACK_U_ROOF,
        "feedback": (feedback_text(feedback, source=feedback_source, problem_id=problem.id)
                     if feedback is not None else None),
    }


def _environment():
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=False,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                              keep_trailing_newline=True)


def render_prompt(problem: Problem, dsl: str, *, feedback: JobResult | Sequence[JobResult] | None = None,
                  feedback_source: str | None = None) -> str:
    """The generation prompt for ``problem`` in ``dsl`` (Markdown text).

    ``feedback``: the previous attempt's record, or all its records (one per
    workload), for this problem; the prompt then ends with
    :func:`harness.prompts.feedback.feedback_text` (its code when
    ``feedback_source`` is given, status, verdict, E_lib/U_roof, errors and
    diagnostics) and asks for a fixed version. Raises ValueError for an
    unknown DSL or feedback that belongs to another problem.
    """
    ctx = prompt_context(problem, dsl, feedback=feedback, feedback_source=feedback_source)
    return _environment().get_template("prompt.md.j2").render(**ctx)


def prompt_filename(problem: Problem, dsl: str) -> str:
    return f"{problem.id}.{dsl}.md"


def render_all(registry: Iterable[Problem], dsl: str, out_dir: str | os.PathLike) -> list[Path]:
    """Write one prompt per problem, ``out_dir/<problem id>.<dsl>.md`` (atomic writes); return the paths."""
    out = Path(out_dir)
    paths = []
    for problem in registry:
        path = out / prompt_filename(problem, dsl)
        atomic_write_text(path, render_prompt(problem, dsl))
        paths.append(path)
    return paths
