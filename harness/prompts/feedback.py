"""Feedback on one attempt, as text for the next turn of a generator.

One function, :func:`feedback_text`, used by ``kernelgate prompt --feedback``
(the "previous attempt" section of the prompt), by the evaluation service
(``include: ["feedback"]``) and by :mod:`harness.api` users. From one
candidate's records (one per workload) and, when known, its source it writes
Markdown::

    ## Your previous attempt (`<candidate>`, <generator@version>)
    ```python  <the code that was evaluated>  ```
    | workload | status | verdict | t_kernel ms | t_library ms | E_lib | U_roof | bound |
    Screening:          the verdict's reason per timed workload
    Errors:             each distinct error once (the workloads it hit, type, message, the
                        traceback's frames in the candidate's file)
    Static diagnostics: lint and anti-cheat findings with their fix hints
    Warnings:           the records' warnings
    <what to do next>

The code shown is what ran: for a source that is a saved Markdown reply,
the code taken out of its fence (:mod:`harness.candidates.fences`, as the
engine did), inside one fence of its own. Untrusted text (the candidate's
name, error messages, tracebacks, warnings) goes through
:mod:`harness.report.escape`: it cannot close a fence, open HTML or markup,
or carry terminal control characters into the prompt.

Why each choice: the code is shown because a generator in a refine loop
needs the exact text it is asked to fix; each error appears once (the engine
puts a failed round's reason both in ``error`` and ``correctness.detail``, and
a traceback ends with the message it raised) because repeated text costs
context and reads as two problems; traceback frames inside the harness, torch
or the worker's scratch folder are dropped (they name files the generator has
never seen and cannot change), the candidate's own frames are kept under its
file name. Long texts are clipped in the middle to ``MAX_ERROR_CHARS``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import PurePosixPath

from harness.records import JobResult, Status
from harness.report.escape import md_code, md_fence, md_text

MAX_ERROR_CHARS = 1500
"""Error messages and tracebacks are cut to this many characters (middle elided)."""
MAX_SOURCE_CHARS = 40_000
"""The previous code is cut to this many characters (middle elided); the bundled kernels are under 7 KB."""

_FRAME = re.compile(r'^  File "(?P<path>[^"]+)", line (?P<line>\d+)(?P<rest>.*)$')


def _fmt(x: float | None, spec: str = ".3g") -> str:
    return "-" if x is None else format(x, spec)


def _clip(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit // 2] + "\n[...]\n" + text[-limit // 2:]


def candidate_traceback(tb: str, candidate_file: str, drop_last: str = "") -> str:
    """The traceback's header, the frames in ``candidate_file`` (by file name) and the exception lines.

    Frames in other files (the worker, torch, Triton) are dropped and the
    scratch path of the candidate's copy is replaced by its file name; when
    no frame is the candidate's the text is kept whole. A trailing line equal
    to ``drop_last`` (the message shown above it) is removed.
    """
    lines = tb.strip("\n").splitlines()
    name = PurePosixPath(candidate_file).name
    frame_idx = [i for i, ln in enumerate(lines) if _FRAME.match(ln)]
    ours = [i for i in frame_idx if PurePosixPath(_FRAME.match(lines[i]).group("path")).name == name]  # type: ignore[union-attr]
    if ours:
        out = [ln for ln in lines[: frame_idx[0]]]
        for i in ours:
            m = _FRAME.match(lines[i])
            assert m is not None
            out.append(f'  File "{name}", line {m.group("line")}{m.group("rest")}')
            nxt = frame_idx[frame_idx.index(i) + 1] if frame_idx.index(i) + 1 < len(frame_idx) else None
            j = i + 1
            while j < len(lines) and (nxt is None or j < nxt) and lines[j].startswith("    "):
                out.append(lines[j])
                j += 1
        tail_start = frame_idx[-1] + 1
        while tail_start < len(lines) and lines[tail_start].startswith("    "):
            tail_start += 1
        out += lines[tail_start:]
        lines = out
    while lines and drop_last and lines[-1].strip() == drop_last.strip():
        lines.pop()
    return "\n".join(lines)


def _error_entries(recs: Sequence[JobResult]) -> list[dict]:
    """One entry per distinct failure, with the workloads it hit.

    A failed round's reason is both the record's ``error.message`` and its
    ``correctness.detail``: it is shown once, with the largest excess over the
    tolerance; a detail that says more than the error gets its own line.
    """
    entries: dict[tuple, dict] = {}

    def add(kind: str, msg: str, tb: str, workload: str) -> None:
        entry = entries.setdefault((kind, msg), {"workloads": [], "type": kind, "message": _clip(msg), "traceback": tb})
        entry["workloads"].append(workload)

    for r in recs:
        c = r.correctness
        incorrect = r.status.value.startswith("INCORRECT")
        excess = f" (max excess over tolerance {_fmt(c.max_excess)}x)" if incorrect and c and c.max_excess is not None else ""
        detail = c.detail.strip() if incorrect and c is not None and c.detail else ""
        if r.error is not None:
            msg = r.error.message.strip()
            tb = ""
            if r.error.traceback_tail:
                tb = _clip(candidate_traceback(r.error.traceback_tail, r.candidate, drop_last=f"{r.error.type}: {msg}"))
            if detail and detail in msg:
                msg, detail = msg + excess, ""
            add(r.error.type, msg, tb, r.workload)
        if detail:
            if not detail.startswith("round "):
                detail = f"round {c.failed_round}: {detail}"  # type: ignore[union-attr]
            add("correctness", detail + excess, "", r.workload)
    return list(entries.values())


def evaluated_code(source: str) -> str:
    """The code that ran for ``source``: the code in its ```python fence when it is a saved Markdown reply
    (:func:`harness.candidates.fences.extract_source`, the engine's rule), else ``source`` itself."""
    from harness.candidates.fences import extract_source

    ext = extract_source(source)
    return ext.source if ext.extracted else source


def _indent(block: str) -> str:
    """A fenced block indented under a list item (blank lines stay blank)."""
    return "\n".join(f"  {ln}" if ln else "" for ln in block.splitlines())


def _diagnostics(recs: Sequence[JobResult]) -> list[str]:
    out, seen = [], set()
    for r in recs:
        for d in r.diagnostics:
            key = (d.get("rule"), d.get("line"), d.get("message"))
            if key in seen:
                continue
            seen.add(key)
            sev = f" ({md_text(d['severity'])})" if d.get("severity") else ""
            line = f" line {d['line']}" if d.get("line") else ""
            hint = f" Fix: {md_text(d['hint'])}" if d.get("hint") else ""
            out.append(f"- [{md_text(d.get('rule', '?'))}]{sev}{line}: {md_text(d.get('message', ''))}{hint}")
    return out


def _heldout_lines(recs: Sequence[JobResult]) -> list[str]:
    """One line per failed held-out shape: the workload, the sizes, the status, the value profile, the worst element."""
    out = []
    for r in recs:
        for s in (r.heldout.shapes if r.heldout is not None else ()):
            if s.status is None or s.status == Status.PASSED.value:
                continue
            sizes = ", ".join(f"{k}={v}" for k, v in s.sizes.items())
            prof = f" (value profile '{s.failed_profile}')" if s.failed_profile else ""
            w = s.worst
            worst = (f"; worst element at [{', '.join(map(str, w.index))}]: got {w.got:.6g}, expected {w.expected:.6g}"
                     if w is not None else "")
            out.append(f"- {md_text(r.workload)} at {md_text(sizes)}: {s.status}{prof}{md_text(worst)}: "
                       f"{md_text(s.detail.splitlines()[0][:300] if s.detail else '')}")
    return out


def feedback_text(records: JobResult | Sequence[JobResult], *, source: str | None = None,
                  problem_id: str | None = None) -> str:
    """Markdown feedback on one attempt (see the module docstring), ending with one newline.

    ``records``: the attempt's records, one per workload, of one candidate.
    ``source``: the code that was evaluated (shown first), or None when it is
    not known. ``problem_id``: when given, records of another problem are
    refused. Raises ValueError for no records or records of several
    candidates or problems.
    """
    from harness.report import metrics as M

    recs = [records] if isinstance(records, JobResult) else list(records)
    if not recs:
        raise ValueError("feedback: no result records given")
    problems = sorted({r.problem_id for r in recs})
    if problem_id is not None and problems != [problem_id]:
        raise ValueError(f"feedback records are for problem(s) {sorted(set(problems) - {problem_id})}, not '{problem_id}'")
    if len(problems) > 1:
        raise ValueError(f"feedback records are for several problems {problems}; pass one candidate's records")
    if len({r.candidate_sha256 for r in recs}) > 1:
        raise ValueError(f"feedback records are of several candidates ({sorted({r.candidate for r in recs})}); "
                         "pass one candidate's records")
    recs = sorted(recs, key=lambda r: r.workload)
    out = [f"## Your previous attempt ({md_code(recs[0].candidate)}, {md_text(M.record_label(recs[0]))})", ""]
    if source is not None:
        out += [md_fence(_clip(evaluated_code(source), MAX_SOURCE_CHARS), "python"), ""]
    host = [r for r in recs if M.host_times_ms(r) is not None]
    out += ["| workload | status | verdict | t_kernel ms | t_library ms | E_lib | U_roof | bound |",
            "|---|---|---|---|---|---|---|---|"]
    for r in recs:
        tk, tl = M.shown_times_ms(r)
        out.append(f"| {md_text(r.workload)} | {r.status.value} | {M.verdict_of(r)} | {_fmt(tk, '.4g')} | "
                   f"{_fmt(tl, '.4g')} | {_fmt(M.e_lib_of(r))} | {_fmt(M.u_roof_of(r))} | "
                   f"{r.screening.bound if r.screening is not None else '-'} |")
    if host:
        out += ["", f"Times of {', '.join(md_text(r.workload) for r in host)}: {M.HOST_CLOCK_NOTE}."]
    reasons = [f"- {md_text(r.workload)}: {r.screening.reason}" for r in recs  # the harness's own text
               if r.screening is not None and r.screening.reason]
    if reasons:
        out += ["", "Screening:"] + reasons
    errors = _error_entries(recs)
    if errors:
        out += ["", "Errors:"]
        for e in errors:
            lines = e["message"].splitlines() or [""]
            out.append(f"- {md_text(', '.join(e['workloads']))}: {md_code(e['type'])}: {md_text(lines[0])}")
            if len(lines) > 1:
                out += ["", _indent(md_fence(e["message"], "text")), ""]
            if e["traceback"]:
                out += ["", _indent(md_fence(e["traceback"], "text"))]
    held = _heldout_lines(recs)
    if held:
        out += ["", "Held-out shapes (sizes beside the public ones, drawn per run) where it failed:"] + held
    diags = _diagnostics(recs)
    if diags:
        out += ["", "Static diagnostics:"] + diags
    warnings = sorted({w for r in recs for w in r.warnings})
    if warnings:
        out += ["", "Warnings:"] + [f"- {md_text(w)}" for w in warnings]
    out.append("")
    attempted = [r for r in recs if r.status not in (Status.LOWERED, Status.HARNESS_ERROR)]
    if any(r.status is Status.REWARD_HACK for r in recs):
        out.append("It was flagged as a reward hack: compute the result in your own kernels, on the current stream, "
                   "with nothing cached between calls; such a kernel scores nothing.")
    elif any(r.status is not Status.PASSED for r in attempted):
        out.append("Fix the failure first: a kernel that is not correct on every workload scores nothing.")
    elif not attempted and all(r.status is Status.LOWERED for r in recs):
        out.append("It compiled to device source but was not executed here (no GPU); keep it correct and make it fast.")
    elif not attempted:
        out.append("The harness could not evaluate it (HARNESS_ERROR: not a fault of the code); it can be submitted again.")
    elif held:
        out.append("It was correct at the public shapes but not at the held-out ones above: compute grids and masks "
                   "from the inputs' shapes and mask every tail, so any size works.")
    elif any(M.e_lib_of(r) is not None for r in recs):
        out.append("It was correct. Make it faster: remove the defects above and move E_lib above 1 and U_roof towards 1.")
    else:
        out.append("It was correct but not timed; keep it correct and make it fast.")
    return "\n".join(out) + "\n"


__all__ = ["MAX_ERROR_CHARS", "candidate_traceback", "evaluated_code", "feedback_text"]
