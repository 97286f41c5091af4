"""The leaderboard: a schema-versioned dict generated from results records only.

``build_leaderboard`` never reads anything but the records it is given, so a
leaderboard file can always be regenerated (``kernelgate leaderboard --out``)
and two builds from the same records are byte-identical JSON (no timestamps,
every list sorted).

What it contains (``"schema": "kernelgate.leaderboard/1"``):

* ``entries``: one row per (generator, version, problem, workload, candidate),
  the latest record per entry only (:func:`harness.report.metrics.latest_records`:
  generator, version, candidate, problem, workload and job id), with the
  error text, warnings and static findings of the record;
* ``generators``: per ``generator@version``, ``overall`` and ``by_category``
  aggregates (below);
* ``problems``: per ``generator@version`` and problem, the best candidate and
  the facts fast_p is computed from;
* ``ranking`` and the ``ranking_rule`` that ordered it;
* ``envs`` (every environment snapshot the records name; rows point to them by
  index), ``thresholds`` (what the verdicts were screened with), ``inputs``
  and ``warnings``.

Aggregates of a group of records (one generator@version, optionally one category):

* ``correctness_rate`` = PASSED / attempted (candidate, workload) records;
  LOWERED records (compiled, not executable here) are not attempted and are
  counted in ``n_lowered`` ("compiled only"), HARNESS_ERROR ones in
  ``n_harness_error``;
* ``fast_p[p]`` for p in 0, 0.5, 0.8, 1, 1.5, 2 = (problems whose best
  candidate is fast_p) / (attempted problems). Per problem the generator's
  best candidate is taken (correct first, then largest ``e_lib_min``). A
  candidate is fast_p on a problem when it PASSED every attempted workload of
  the problem and, for p > 0, its smallest E_lib over its timed workloads
  exceeds p. fast_0 is the problem-level correctness rate. ``fast_p`` for
  p > 0 is None when the group has correct problems but none of its records
  was timed (a ``--no-timing`` run): speed cannot be judged;
* ``geomean_e_lib`` / ``geomean_u_roof``: geometric means over the correct,
  timed (candidate, workload) records;
* ``mean_s``: mean speed-of-light score S over attempted records, failures
  counted as 0 (:mod:`harness.report.metrics`); PASSED records without S
  (untimed) are left out, and ``mean_s`` is None when no PASSED record has S;
* ``generalization_rate``: among the PASSED records whose held-out shapes were judged (``n_heldout_judged``), the
  share that passed every one of them (``JobResult.heldout.generalizes``); None when none was judged. A row's
  ``generalizes`` is that record's value (None: no held-out shape judged);
* ``verdicts``: record counts per :data:`harness.report.metrics.VERDICT_BUCKETS`;
* ``n_cpu_path``: records of the CPU path (correctness only: no E_lib, U_roof,
  S or verdict, so such a group ranks by correctness alone).
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

from harness.jsonio import dumps, loads, write_json
from harness.records import JobResult, Status
from harness.report import metrics as M
from harness.report._text import fmt, pct, table
from harness.report.escape import md_code, md_text, terminal

SCHEMA = "kernelgate.leaderboard/1"

RANKING_RULE = (
    "primary: mean speed-of-light score S over all attempted (candidate, workload) records, failures counted as 0, "
    "higher first (no scored record: ranked after every scored one); tie-breaks: correctness rate, then geomean "
    "E_lib over correct timed workloads (higher first; absent values last); then generator@version by name"
)

DEFINITIONS = {
    "E_lib": "t_library / t_kernel, median times of the same session (>1: faster than the library)",
    "U_roof": "t_floor / t_kernel, t_floor = max(FLOPs / measured peak, min_bytes / measured DRAM bandwidth)",
    "S": "speed-of-light score 1/(1 + (t_kernel - t_floor)/(t_library - t_floor)) clamped to [0, 1]: 1 at the floor, "
         "0.5 at library speed; failures count 0; 0.5*t_library/t_kernel when t_library <= t_floor",
    "correctness_rate": "PASSED / attempted (candidate, workload) records; LOWERED and HARNESS_ERROR are not attempted",
    "fast_p": "fraction of attempted problems whose best candidate PASSED every attempted workload and, for p > 0, "
              "has E_lib > p on every timed workload",
    "attempted": "every status except LOWERED (compiled only) and HARNESS_ERROR (not the candidate's fault)",
    "generalizes": "a PASSED record also passed every judged held-out shape (sizes drawn per run beside the public "
                   "one); generalization_rate is the share of such records among the PASSED ones with judged shapes",
}


def _fast_key(p: float) -> str:
    return f"{p:g}"


def _heldout_failures(r: JobResult) -> list[str]:
    """One line per held-out shape the record failed: sizes, status, value profile, worst element."""
    out = []
    for s in (r.heldout.shapes if r.heldout is not None else ()):
        if s.status is None or s.status == Status.PASSED.value:
            continue
        text = ", ".join(f"{k}={v}" for k, v in s.sizes.items()) + f": {s.status}"
        if s.failed_profile:
            text += f" (value profile '{s.failed_profile}')"
        if s.worst is not None:
            text += (f"; worst at [{', '.join(map(str, s.worst.index))}]: got {s.worst.got:.6g}, expected "
                     f"{s.worst.expected:.6g}")
        out.append(text)
    return out


def _row(r: JobResult, env_index: int) -> dict:
    s = M.screening_of(r)
    return {
        "generator": r.generator, "version": r.generator_version, "candidate": r.candidate, "problem": r.problem_id,
        "category": r.category, "workload": r.workload, "dtype": r.dtype, "dsl": r.dsl, "status": r.status.value,
        "verdict": M.verdict_of(r), "borderline": bool(s.borderline) if s is not None else False,
        "t_kernel_ms": M.t_kernel_ms(r), "t_library_ms": M.t_library_ms(r), "t_floor_ms": M.t_floor_ms(r),
        "host_times_ms": list(M.host_times_ms(r) or ()) or None,
        "E_lib": M.e_lib_of(r), "U_roof": M.u_roof_of(r), "U_roof_library": M.u_roof_library_of(r),
        "bound": s.bound if s is not None else None, "S": M.score_of(r),
        "diagnostics": sorted({str(d.get("rule", "?")) for d in r.diagnostics}),
        "findings": [{"rule": str(d.get("rule", "?")), "severity": str(d.get("severity", "")), "line": d.get("line"),
                      "message": str(d.get("message", "")), "hint": str(d.get("hint", ""))}
                     for d in sorted(r.diagnostics, key=lambda d: (d.get("line") or 0, str(d.get("rule", ""))))],
        "generalizes": r.heldout.generalizes if r.heldout is not None else None,
        "heldout_passed": f"{r.heldout.passed}/{r.heldout.judged}" if r.heldout is not None else None,
        "heldout_failures": _heldout_failures(r),
        "error": r.error.type if r.error is not None else None,
        "error_message": r.error.message if r.error is not None else None,
        "error_traceback": (r.error.traceback_tail or None) if r.error is not None else None,
        "warnings": list(r.warnings), "cpu_path": M.is_cpu_path(r),
        "flops": r.flops, "min_bytes": r.min_bytes, "run_id": r.run_id, "env": env_index, "job_id": r.job_id,
        "created_at": r.created_at,
    }


def _problem_outcomes(records: list[JobResult]) -> dict[str, M.ProblemOutcome]:
    by_problem: dict[str, list[JobResult]] = defaultdict(list)
    for r in records:
        by_problem[r.problem_id].append(r)
    out = {}
    for pid in sorted(by_problem):
        best = M.best_candidate(by_problem[pid])
        if best is not None:
            out[pid] = best
    return out


def aggregate(records: list[JobResult]) -> dict:
    """The aggregate metrics of one group of records (see the module docstring)."""
    att = [r for r in records if M.is_attempted(r)]
    passed = [r for r in att if r.status is Status.PASSED]
    e_libs = [M.e_lib_of(r) for r in passed]
    timed = [e for e in e_libs if e is not None]
    scores = [M.score_of(r) for r in att]
    scored_pass = [r for r in passed if M.score_of(r) is not None]
    outcomes = [o for o in _problem_outcomes(records).values() if o.attempted]
    fast = {}
    for p in M.FAST_P:
        # untimed correct problems cannot be judged fast or slow; failed ones are simply not fast
        ok = outcomes and (p <= 0 or timed or not any(o.correct for o in outcomes))
        fast[_fast_key(p)] = sum(o.fast(p) for o in outcomes) / len(outcomes) if ok else None
    verdicts = dict.fromkeys(M.VERDICT_BUCKETS, 0)
    for r in records:
        verdicts[M.verdict_of(r)] += 1
    general = [r.heldout.generalizes for r in passed if r.heldout is not None and r.heldout.generalizes is not None]
    return {
        "n_candidates": len({r.candidate for r in records}),
        "n_records": len(records),
        "n_attempted": len(att),
        "n_passed": len(passed),
        "n_timed": len(timed),
        "n_scored": sum(s is not None for s in scores),
        "n_lowered": sum(r.status is Status.LOWERED for r in records),
        "n_harness_error": sum(r.status is Status.HARNESS_ERROR for r in records),
        "n_cpu_path": sum(M.is_cpu_path(r) for r in records),
        "n_problems": len(outcomes),
        "n_problems_correct": sum(o.correct for o in outcomes),
        "correctness_rate": len(passed) / len(att) if att else None,
        "n_heldout_judged": len(general),
        "generalization_rate": sum(general) / len(general) if general else None,
        "fast_p": fast,
        "geomean_e_lib": M.geomean(e_libs),
        "geomean_u_roof": M.geomean(M.u_roof_of(r) for r in passed),
        "mean_s": None if (passed and not scored_pass) else M.mean(scores),
        "verdicts": verdicts,
    }


def _thresholds(records: list[JobResult], given: object | None, warnings: list[str]) -> dict:
    from harness.score.gates import HACK_U_ROOF, Thresholds

    seen: dict[str, set[float]] = {"tau_lib": set(), "tau_roof_memory": set(), "tau_roof_compute": set()}
    for r in records:
        s = M.screening_of(r)
        if s is None or r.status not in (Status.PASSED, Status.REWARD_HACK):
            continue
        seen["tau_lib"].add(float(s.tau_lib))
        seen["tau_roof_memory" if s.bound == "memory" else "tau_roof_compute"].add(float(s.tau_roof))
    default = Thresholds().to_dict()
    if given is not None:
        out = dict(given.to_dict() if hasattr(given, "to_dict") else given)  # type: ignore[union-attr]
        out.setdefault("hack_u_roof", HACK_U_ROOF)
        out["source"] = "argument"
        differs = [k for k, vals in seen.items() if vals and vals != {out.get(k)}]
        if differs:
            warnings.append(
                f"the records were screened with other thresholds ({', '.join(f'{k}={sorted(seen[k])}' for k in differs)}) "
                "than the ones given; verdicts are shown as recorded: re-run to screen with the new thresholds")
        return out
    if not any(seen.values()):
        return {**default, "source": "default (no screened records)"}
    out = {**default, "source": "records"}
    for k, vals in seen.items():
        if len(vals) == 1:
            out[k] = next(iter(vals))
        elif vals:
            out[k] = sorted(vals)
            warnings.append(f"records were screened with different {k} values {sorted(vals)}; their verdicts mix thresholds")
    return out


def _rank_key(entry: dict) -> tuple:
    def neg(x: float | None) -> float:
        return -x if x is not None else float("inf")

    return (neg(entry["mean_s"]), neg(entry["correctness_rate"]), neg(entry["geomean_e_lib"]), entry["label"])


def build_leaderboard(results: list[JobResult], *, thresholds: dict | None = None, source: str = "") -> dict:
    """Build the leaderboard dict from results records (see the module docstring for every metric).

    ``thresholds``: the gate thresholds to record (a dict or a
    :class:`harness.score.gates.Thresholds`); by default the ones the records
    were screened with. Verdicts are never re-screened here. ``source``: a
    free-text note of where the records came from (e.g. the results paths).
    """
    records, superseded = M.latest_records(results)
    # one canonical order, so that float sums (and thus the JSON bytes) do not depend on the input order
    records.sort(key=lambda r: (r.generator, r.generator_version, r.problem_id, r.workload, r.candidate, r.job_id))
    warnings: list[str] = []

    env_dicts = sorted({dumps(r.env.to_dict()) for r in records})
    env_index = {e: i for i, e in enumerate(env_dicts)}
    envs = [loads(e) for e in env_dicts]
    rec_env = [env_index[dumps(r.env.to_dict())] for r in records]

    keys = {r.env.comparable_key() for r in records}
    if len(keys) > 1:
        names = sorted({f"{r.env.device_name} (driver {r.env.driver}, torch {r.env.torch}, triton {r.env.triton}, "
                        f"tilelang {r.env.tilelang})" for r in records})
        warnings.append(f"records come from {len(keys)} environments that are not comparable ({'; '.join(names)}): "
                        "absolute times differ between them; E_lib and S are relative to a library timed in the same "
                        "session, so they remain indicative")

    rows = sorted((_row(r, i) for r, i in zip(records, rec_env)),
                  key=lambda d: (d["generator"], d["version"], d["problem"], d["workload"], d["candidate"], d["job_id"]))

    groups: dict[tuple[str, str], list[JobResult]] = defaultdict(list)
    for r in records:
        groups[(r.generator, r.generator_version)].append(r)

    generators = []
    problems = []
    for (gen, ver), recs in sorted(groups.items()):
        by_cat: dict[str, list[JobResult]] = defaultdict(list)
        for r in recs:
            by_cat[r.category].append(r)
        gkeys = {r.env.comparable_key() for r in recs}
        generators.append({
            "generator": gen, "version": ver, "label": M.label(gen, ver),
            "dsls": sorted({r.dsl for r in recs}),
            "envs": sorted({i for r, i in zip(records, rec_env) if (r.generator, r.generator_version) == (gen, ver)}),
            "run_ids": sorted({r.run_id for r in recs}),
            "overall": aggregate(recs),
            "by_category": {c: aggregate(rs) for c, rs in sorted(by_cat.items())},
        })
        if len(gkeys) > 1:
            warnings.append(f"{M.label(gen, ver)}: its records come from {len(gkeys)} different environments")
        cats = {r.problem_id: r.category for r in recs}
        for pid, o in _problem_outcomes(recs).items():
            problems.append({
                "generator": gen, "version": ver, "label": M.label(gen, ver), "problem": pid, "category": cats[pid],
                "best_candidate": o.candidate, "attempted": o.attempted, "correct": o.correct,
                "e_lib_min": o.e_lib_min, "mean_s": o.mean_s,
                "fast": {_fast_key(p): o.fast(p) for p in M.FAST_P},
                "cpu_path": any(M.is_cpu_path(r) for r in recs if r.problem_id == pid and r.candidate == o.candidate),
            })

    ranking = sorted(({"label": g["label"], "generator": g["generator"], "version": g["version"],
                       "mean_s": g["overall"]["mean_s"], "correctness_rate": g["overall"]["correctness_rate"],
                       "geomean_e_lib": g["overall"]["geomean_e_lib"],
                       "reward_hacks": g["overall"]["verdicts"]["reward_hack"]} for g in generators), key=_rank_key)
    for i, e in enumerate(ranking, start=1):
        e["rank"] = i
    cpu = [g["label"] for g in generators if g["overall"]["n_cpu_path"]]
    if cpu:
        warnings.append(f"{M.CPU_PATH_NOTE}: {', '.join(cpu)} ran on the CPU path (Triton interpreter; timed, on "
                        "the host clock, only with --timing); their records are judged on correctness only and are "
                        "not ranked, plotted or compared by speed")
    if any(e["reward_hacks"] for e in ranking):
        warnings.append("some records were flagged reward_hack (scored 0): audit those candidates before trusting "
                        "the generator's other numbers")

    return {
        "schema": SCHEMA,
        "inputs": {
            "source": source, "n_records_read": len(records) + superseded, "n_superseded": superseded,
            "n_records": len(records), "run_ids": sorted({r.run_id for r in records}),
            "latest_created_at": max((r.created_at for r in records), default=None),
        },
        "definitions": DEFINITIONS,
        "fast_p_thresholds": list(M.FAST_P),
        "thresholds": _thresholds(records, thresholds, warnings),
        "envs": envs,
        "ranking_rule": RANKING_RULE,
        "ranking": ranking,
        "generators": generators,
        "problems": problems,
        "entries": rows,
        "warnings": warnings,
    }


def write_leaderboard(path: str | os.PathLike, lb: dict) -> Path:
    """Write the leaderboard JSON atomically (sorted keys, so identical input gives identical bytes)."""
    if lb.get("schema") != SCHEMA:
        raise ValueError(f"not a leaderboard dict (schema {lb.get('schema')!r}, expected {SCHEMA!r})")
    write_json(path, lb)
    return Path(path)


_SHORT = {"efficient": "eff", "authoring_defect": "defect", "structural_residual": "struct", "beats_weak_baseline": "weak-lib",
          "borderline": "border", "not_timed": "untimed", "cpu_path": "cpu-path", "incorrect": "incorrect",
          "failed": "failed",
          "reward_hack": "HACK", "lowered": "lowered", "harness_error": "harness-err"}


def _verdict_text(v: dict) -> str:
    return " ".join(f"{_SHORT[k]}={n}" for k, n in v.items() if n)


def _cells(name: str, agg: dict, rank: str) -> list[str]:
    fp = agg["fast_p"]
    return [rank, name, str(agg["n_candidates"]), f"{agg['n_problems_correct']}/{agg['n_problems']}",
            pct(agg["correctness_rate"]), pct(agg.get("generalization_rate")),
            str(agg["n_lowered"]) if agg["n_lowered"] else "-",
            *[pct(fp[_fast_key(p)]) for p in M.FAST_P],
            fmt(agg["geomean_e_lib"]), fmt(agg["geomean_u_roof"]), fmt(agg["mean_s"], ".3f"), _verdict_text(agg["verdicts"])]


def format_leaderboard_markdown(lb: dict) -> str:
    """The leaderboard as Markdown, for a committed ``leaderboards/*.md`` beside its JSON: the ranking table with
    one row per category under each generator (the columns of :func:`format_leaderboard`), then the ranking rule,
    the thresholds, the inputs and the warnings. Every cell passes through :func:`md_text` (generator names are
    the submitters')."""
    gens = {g["label"]: g for g in lb["generators"]}
    headers = ["rank", "generator@version", "cands", "problems ok", "correct", "generalizes", "compiled-only",
               *[f"fast_{_fast_key(p)}" for p in M.FAST_P], "E_lib gm", "U_roof gm", "mean S", "verdicts (records)"]
    rows = []
    for e in lb["ranking"]:
        g = gens[e["label"]]
        row = [md_text(c) for c in _cells(e["label"], g["overall"], str(e["rank"]))]
        rows.append([row[0], f"**{row[1]}**", *row[2:]])
        for cat, agg in g["by_category"].items():
            row = [md_text(c) for c in _cells(cat, agg, "")]
            rows.append([row[0], f"&nbsp;&nbsp;{row[1]}", *row[2:]])
    th, inputs = lb["thresholds"], lb["inputs"]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _ in headers) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    lines += ["", f"Ranking: {md_text(lb['ranking_rule'])}.", "",
              f"Thresholds ({md_text(th.get('source'))}): tau_lib {th.get('tau_lib')}, tau_roof {th.get('tau_roof_memory')} "
              f"memory-bound / {th.get('tau_roof_compute')} compute-bound.", "",
              f"{inputs['n_records']} record(s) from {len(inputs['run_ids'])} run(s)"
              + (f", {inputs['n_superseded']} superseded record(s) ignored" if inputs["n_superseded"] else "")
              + (f"; source: {md_code(inputs['source'])}" if inputs["source"] else "") + "."]
    lines += [f"* warning: {md_text(w)}" for w in lb["warnings"]]
    return "\n".join(lines) + "\n"


def format_leaderboard(lb: dict, by: str | None = None) -> str:
    """The leaderboard as a text table; ``by="category"`` adds one row per category under each generator."""
    if by not in (None, "category"):
        raise ValueError(f"by={by!r}: expected None or 'category'")
    gens = {g["label"]: g for g in lb["generators"]}
    rows = []
    for e in lb["ranking"]:
        g = gens[e["label"]]
        rows.append(_cells(e["label"], g["overall"], str(e["rank"])))
        if by == "category":
            for cat, agg in g["by_category"].items():
                rows.append(_cells(f"  {cat}", agg, ""))
    headers = ["rank", "generator@version", "cands", "problems ok", "correct", "generalizes", "compiled-only",
               *[f"fast_{_fast_key(p)}" for p in M.FAST_P], "E_lib gm", "U_roof gm", "mean S", "verdicts (records)"]
    th = lb["thresholds"]
    lines = [table(rows, headers), "",
             f"ranking: {lb['ranking_rule']}",
             f"thresholds ({th.get('source')}): tau_lib={th.get('tau_lib')} tau_roof_memory={th.get('tau_roof_memory')} "
             f"tau_roof_compute={th.get('tau_roof_compute')}",
             f"{lb['inputs']['n_records']} record(s) from {len(lb['inputs']['run_ids'])} run(s)"
             + (f", {lb['inputs']['n_superseded']} superseded record(s) ignored" if lb["inputs"]["n_superseded"] else "")
             + (f"; source: {lb['inputs']['source']}" if lb["inputs"]["source"] else "")]
    if any(g["overall"]["n_cpu_path"] for g in lb["generators"]):
        lines.append(f"cpu-path: {M.CPU_PATH_NOTE} (E_lib, U_roof and S are not shown for these records)")
    lines += [f"warning: {w}" for w in lb["warnings"]]
    return terminal("\n".join(lines))  # generator names and warnings are the submitters' text
