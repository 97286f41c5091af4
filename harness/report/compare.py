"""Paired comparison of two generators (``a`` the baseline, ``b`` the challenger).

Only what both attempted is compared: for every problem each side's best
candidate stands for it (:func:`harness.report.metrics.best_candidate`, the
same rule as the leaderboard: correct on every attempted workload first,
then the largest smallest-E_lib, then the mean S), and its workloads are
paired by name. The output names that candidate per problem and side, with
how many candidates it was chosen from.

Time ratio of one paired workload (below 1: ``b`` is faster)::

    same run_id (paired timings, one session):   ratio = med(t_b) / med(t_a)
    different sessions:                          ratio = (med(t_b) / med(lib_b)) / (med(t_a) / med(lib_a))
                                                       = E_lib_a / E_lib_b

Normalising by each session's own library time removes most of the
difference between sessions (clocks, thermal state, another GPU of the same
model); only within one run are raw kernel times comparable directly.

Noise has two parts, and the interval of every paired workload holds both:

* within a run, from the raw ``samples_ms`` kept in every :class:`TimingStats`:
  each side's samples (and library samples when normalising) are resampled
  with replacement and the ratio of medians is recomputed ``n_boot`` times
  (the 2.5 and 97.5 percentiles);
* between runs: two runs of identical code differ by more than their samples
  say (clocks, another machine, an autotuner's choice). When a side holds
  records of several runs of the same candidate (repeats: a ``--rerun``, or
  merged results), their spread is measured: the ratio is that of the runs'
  geometric mean E_lib and the half-width ``t(0.975, df) * s * sqrt(1/n_a +
  1/n_b)`` (``s`` pooled over both sides). Otherwise the measured noise floor
  of the workload's class (:mod:`harness.report.noise`: device model, same
  machine or not, autotuned kernel or not) is the half-width; with repeats it
  is the least half-width (scaled to the number of runs). The two parts add in
  quadrature in log space::

      CI = ratio * exp(-+ sqrt(bootstrap_half_width^2 + run_to_run_half_width^2))

  A pair with neither repeats nor a measured floor (another device model) has
  the within-run part only, and a warning says so;
* overall, the geometric mean of the ratios with a two-level bootstrap (each
  replicate resamples the paired workloads *and* uses each workload's own
  replicate), widened by the root-mean-square run-to-run half-width (a
  machine-level shift moves every workload together).

Identical code (the same ``candidate_sha256``, problem version and
environment on both sides) is never reported as changed by speed: its
difference is run-to-run noise by definition (``identical_code`` in the pair).

Rule for "beyond noise" (:data:`CHANGE_RULE`): a workload improved when its
ratio is below ``1 - min_effect`` *and* its 95% CI (both parts) lies entirely below 1
(regressed: above ``1 + min_effect`` and CI entirely above 1). The minimum
effect (default 2%) keeps thousands of samples from flagging differences no
one would act on. A fix (``a`` failed, ``b`` PASSED) counts as an
improvement and a break as a regression. A problem improved when some of its
workloads improved and none regressed, regressed in the opposite case, and is
``mixed`` when both happened.

Generalization: per pair, ``generalizes_a``/``generalizes_b`` (a PASSED record that passed every judged held-out
shape, :attr:`harness.records.HeldoutResult.generalizes`; None when none was judged), and in the summary, per side,
how many of its paired PASSED records with judged held-out shapes passed them all (``generalizes_a`` of
``heldout_judged_a``).
"""

from __future__ import annotations

import difflib
import math
from collections import defaultdict

from harness.records import JobResult, Status
from harness.report import metrics as M
from harness.report._text import first_line, fmt, table
from harness.report.escape import terminal

SCHEMA = "kernelgate.compare/1"
ERROR_WIDTH = 110
"""Characters per line of the error texts under the comparison table (wrapped at spaces, never cut)."""
MIN_EFFECT = 0.02
CHANGE_RULE = (
    "a workload improved (regressed) when t_b/t_a is below 1 - min_effect (above 1 + min_effect) and its 95% CI lies "
    "entirely below (above) 1; the CI holds the sample noise within each run (bootstrap of the raw timing samples) and "
    "the noise between runs (the spread of repeated runs, else the measured noise floor of the workload's class); "
    "identical code is never faster or slower; a fix (a failed, b PASSED) is an improvement and a break a regression; "
    "a problem improved when some workload improved and none regressed, regressed in the opposite case, mixed when both"
)
CANDIDATE_RULE = ("each side's best candidate per problem stands for it (the leaderboard's rule: correct on every "
                  "attempted workload first, then the largest smallest-E_lib, then the mean S)")
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)
"""Student's t 0.975 quantile for 1-10 degrees of freedom; 11-30 take the value for 10 (larger than theirs, so the
interval is wider, never narrower), beyond 30 the normal 1.96."""


def _t975(df: int) -> float:
    if df <= len(_T975):
        return _T975[max(df, 1) - 1]
    return 2.228 if df <= 30 else 1.96


def resolve_generator(results: list[JobResult], spec: str) -> tuple[str, str]:
    """``generator@version`` or a bare ``generator`` (when it has one version) -> (generator, version)."""
    labels = sorted({(r.generator, r.generator_version) for r in results})
    if "@" in spec:
        gen, ver = spec.rsplit("@", 1)
        if (gen, ver) in labels:
            return gen, ver
    matches = [lv for lv in labels if lv[0] == spec]
    if len(matches) == 1:
        return matches[0]
    known = [M.label(*lv) for lv in labels]
    if len(matches) > 1:
        raise ValueError(f"generator '{spec}' has {len(matches)} versions in these results; name one of "
                         f"{', '.join(M.label(*m) for m in matches)}")
    close = difflib.get_close_matches(spec, known + sorted({g for g, _ in labels}), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise ValueError(f"no generator '{spec}' in these results{hint} (known: {', '.join(known) or 'none'})")


def side_records(records: list[JobResult], gen: str, ver: str) -> dict[tuple[str, str], JobResult]:
    """(problem, workload) -> the latest record of this generator's best candidate on that problem."""
    return {k: runs[-1] for k, runs in _side_runs(records, gen, ver)[0].items()}


def _side_runs(records: list[JobResult], gen: str, ver: str) -> tuple[dict[tuple[str, str], list[JobResult]],
                                                                        dict[str, tuple[str, int]]]:
    """(problem, workload) -> the best candidate's records, one per run (the latest of each run_id), oldest first;
    and problem -> (that candidate, how many candidates it was chosen from).

    ``records`` may hold several runs of one job (a ``--rerun``, merged results files): the best candidate is
    chosen on each entry's latest record (:func:`harness.report.metrics.latest_records`), and its earlier runs
    are the repeats that measure the run-to-run noise.
    """
    mine = [r for r in records if r.generator == gen and r.generator_version == ver]
    latest, _ = M.latest_records(mine)
    by_problem: dict[str, list[JobResult]] = defaultdict(list)
    for r in latest:
        by_problem[r.problem_id].append(r)
    out: dict[tuple[str, str], list[JobResult]] = {}
    chosen: dict[str, tuple[str, int]] = {}
    for pid, recs in by_problem.items():
        best = M.best_candidate(recs)
        if best is None:
            continue
        chosen[pid] = (best.candidate, len({r.candidate for r in recs}))
        per_run: dict[tuple[str, str], dict[str, JobResult]] = defaultdict(dict)
        for r in sorted((r for r in mine if r.problem_id == pid and r.candidate == best.candidate),
                        key=lambda r: r.created_at):
            per_run[(pid, r.workload)][r.run_id] = r  # the latest record of each run
        for key, runs in per_run.items():
            ordered = sorted(runs.values(), key=lambda r: r.created_at)
            newest = ordered[-1]  # the candidate's file may have changed between runs: repeats are of the newest code
            out[key] = [r for r in ordered if r.candidate_sha256 == newest.candidate_sha256]
    return out, chosen


def _timed(r: JobResult) -> bool:
    """PASSED with kernel and library timings that may be compared (never on the CPU path)."""
    return (r.status is Status.PASSED and r.timing is not None and r.library_timing is not None
            and not M.is_cpu_path(r))


def _boot_medians(np, rng, samples: tuple[float, ...], n_boot: int):
    x = np.asarray(samples, dtype=float)
    idx = rng.integers(0, len(x), size=(n_boot, len(x)))
    return np.median(x[idx], axis=1)


def error_text(r: JobResult) -> str | None:
    """``Type: message`` of a record's error (the whole message; renderers shorten it), None without one."""
    return f"{r.error.type}: {r.error.message}" if r.error is not None else None


def _generalizes(r: JobResult) -> bool | None:
    """The record passed every judged held-out shape (None: it did not pass, or none was judged)."""
    return r.heldout.generalizes if r.status is Status.PASSED and r.heldout is not None else None


def _identical(ra: JobResult, rb: JobResult) -> bool:
    """The same code on the same problem in comparable environments: any difference is run-to-run noise."""
    return (ra.candidate_sha256 == rb.candidate_sha256 and ra.problem_version == rb.problem_version
            and ra.env.comparable_key() == rb.env.comparable_key() and ra.mode == rb.mode and ra.baseline == rb.baseline)


def _run_to_run(np, runs_a: list[JobResult], runs_b: list[JobResult], floors: list) -> tuple[float | None, dict]:
    """The run-to-run half-width (log scale) of one paired workload and where it came from (module docstring)."""
    from harness.report.noise import floor_for

    ta, tb = [r for r in runs_a if _timed(r)], [r for r in runs_b if _timed(r)]
    floor = floor_for(floors, ta[-1], tb[-1])
    na, nb = len(ta), len(tb)
    scale = math.sqrt((1 / na + 1 / nb) / 2)  # a floor is measured between two single runs
    h_floor = floor.half_width_log * scale if floor is not None else None
    info: dict = {"floor": floor.describe() if floor is not None else None, "runs_a": na, "runs_b": nb,
                  "repeats_half_width": None}
    if na + nb > 2 and max(na, nb) > 1:
        xa = np.log([M.e_lib_of(r) for r in ta])
        xb = np.log([M.e_lib_of(r) for r in tb])
        ss = float(((xa - xa.mean()) ** 2).sum() + ((xb - xb.mean()) ** 2).sum())
        df = (na - 1) + (nb - 1)
        h_rep = _t975(df) * math.sqrt(ss / df) * math.sqrt(1 / na + 1 / nb)
        info["repeats_half_width"] = h_rep
        return (max(h_rep, h_floor) if h_floor is not None else h_rep), info
    return h_floor, info


def _pair(np, rng, runs_a: list[JobResult], runs_b: list[JobResult], n_boot: int, min_effect: float,
          floors: list) -> tuple[dict, object | None, float]:
    """One paired workload: its row, its bootstrap replicates of log(ratio) (None when not timed on both sides),
    and the run-to-run half-width already in those replicates (0 when they hold the within-run part only)."""
    ra, rb = runs_a[-1], runs_b[-1]
    d = {
        "problem": ra.problem_id, "workload": ra.workload, "category": ra.category,
        "candidate_a": ra.candidate, "candidate_b": rb.candidate,
        "status_a": ra.status.value, "status_b": rb.status.value,
        "verdict_a": M.verdict_of(ra), "verdict_b": M.verdict_of(rb),
        "E_lib_a": M.e_lib_of(ra), "E_lib_b": M.e_lib_of(rb),
        "U_roof_a": M.u_roof_of(ra), "U_roof_b": M.u_roof_of(rb),
        "S_a": M.score_of(ra), "S_b": M.score_of(rb), "delta_S": None,
        "cpu_path_a": M.is_cpu_path(ra), "cpu_path_b": M.is_cpu_path(rb),
        "error_a": error_text(ra), "error_b": error_text(rb),
        "generalizes_a": _generalizes(ra), "generalizes_b": _generalizes(rb),
        "mode": None, "ratio": None, "ci95": None, "change": "same", "identical_code": _identical(ra, rb),
        "run_to_run_half_width": None, "noise": None,
    }
    if d["S_a"] is not None and d["S_b"] is not None:
        d["delta_S"] = d["S_b"] - d["S_a"]
    boot_log = None
    if not (M.is_attempted(ra) and M.is_attempted(rb)):
        d["change"] = "not_comparable"
    elif ra.status is not Status.PASSED and rb.status is Status.PASSED:
        d["change"] = "fixed"
    elif ra.status is Status.PASSED and rb.status is not Status.PASSED:
        d["change"] = "broke"
    elif ra.status is not Status.PASSED:
        d["change"] = "both_failed"
    elif M.is_cpu_path(ra) or M.is_cpu_path(rb):
        d["change"] = "cpu_path"
    elif not (_timed(ra) and _timed(rb)):
        d["change"] = "untimed"
    else:
        h, info = _run_to_run(np, runs_a, runs_b, floors)
        repeats = info["repeats_half_width"] is not None
        if repeats:  # several runs: their spread holds both parts; the ratio is of the runs' geometric means
            d["mode"] = "repeats"
            xa = np.log([M.e_lib_of(r) for r in runs_a if _timed(r)])
            xb = np.log([M.e_lib_of(r) for r in runs_b if _timed(r)])
            log_ratio = float(xa.mean() - xb.mean())
            ratio, lo, hi = math.exp(log_ratio), math.exp(log_ratio - h), math.exp(log_ratio + h)  # type: ignore[operator]
            boot_log = log_ratio + rng.normal(0.0, h / 1.96, n_boot)  # type: ignore[operator]
        else:
            ta, tb = ra.timing, rb.timing
            bta = _boot_medians(np, rng, ta.samples_ms, n_boot)
            btb = _boot_medians(np, rng, tb.samples_ms, n_boot)
            if ra.run_id == rb.run_id:
                d["mode"] = "raw"
                ratio = M.num(tb.median_ms) / M.num(ta.median_ms)
                boot = btb / bta
            else:
                d["mode"] = "library_normalized"
                la, lb = ra.library_timing, rb.library_timing
                ratio = (M.num(tb.median_ms) / M.num(lb.median_ms)) / (M.num(ta.median_ms) / M.num(la.median_ms))
                boot = (btb / _boot_medians(np, rng, lb.samples_ms, n_boot)) / (bta / _boot_medians(np, rng, la.samples_ms, n_boot))
            blo, bhi = (float(v) for v in np.percentile(boot, [2.5, 97.5]))
            r0, hh = math.log(ratio), h or 0.0
            lo = math.exp(r0 - math.sqrt((r0 - math.log(blo)) ** 2 + hh ** 2))
            hi = math.exp(r0 + math.sqrt((math.log(bhi) - r0) ** 2 + hh ** 2))
            boot_log = np.log(boot)
        d["ratio"], d["ci95"] = ratio, [lo, hi]
        d["run_to_run_half_width"] = h
        d["noise"] = info
        if d["identical_code"]:
            d["change"] = "same"  # the same code: whatever moved is run-to-run noise
        elif ratio < 1 - min_effect and hi < 1:
            d["change"] = "faster"
        elif ratio > 1 + min_effect and lo > 1:
            d["change"] = "slower"
        return d, boot_log, (h or 0.0) if repeats else 0.0
    return d, boot_log, 0.0


_IMPROVED = {"faster", "fixed"}
_REGRESSED = {"slower", "broke"}


def compare_generators(results: list[JobResult], a: str, b: str, *, results_b: list[JobResult] | None = None,
                       n_boot: int = 2000, seed: int = 0, min_effect: float = MIN_EFFECT,
                       floors: list | None = None) -> dict:
    """Compare generator ``b`` against baseline ``a`` on what both attempted (see the module docstring).

    ``a``/``b``: ``generator@version``, or a bare generator name when it has
    one version in ``results``. ``results_b``: read ``b`` from these records
    instead (then ``a`` and ``b`` may name the same generator@version: the
    same code in two runs, an A/A comparison). ``floors``: the run-to-run
    noise floors (default: the committed table, :func:`harness.report.noise.load_floors`).
    Raises ValueError naming the known generators when one cannot be resolved.
    Deterministic for a given ``seed``.
    """
    if n_boot < 100:
        raise ValueError(f"n_boot={n_boot}: use at least 100 bootstrap replicates for a 95% interval")
    other = results if results_b is None else results_b
    ga, gb = resolve_generator(results, a), resolve_generator(other, b)
    if ga == gb and results_b is None:
        raise ValueError(f"both sides are {M.label(*ga)}; name two different generators or versions (or read b from "
                         "other results: --results-b)")
    return compare_labels(results, ga, gb, records_b=None if results_b is None else results_b, n_boot=n_boot,
                          seed=seed, min_effect=min_effect, floors=floors)


def compare_labels(records: list[JobResult], ga: tuple[str, str], gb: tuple[str, str], *,
                   records_b: list[JobResult] | None = None, n_boot: int = 2000, seed: int = 0,
                   min_effect: float = MIN_EFFECT, floors: list | None = None) -> dict:
    """:func:`compare_generators` for two resolved (generator, version) pairs of ``records`` (``b`` from
    ``records_b`` when given). Every record may be passed, superseded runs included: they are the repeats.

    The report's generator-comparison section calls this for each pair it
    shows, so its ratios and CIs are exactly those of ``kernelgate compare``.
    """
    import numpy as np

    from harness.report.noise import load_floors

    if n_boot < 100:
        raise ValueError(f"n_boot={n_boot}: use at least 100 bootstrap replicates for a 95% interval")
    floors = load_floors() if floors is None else floors
    runs_a, chosen_a = _side_runs(records, *ga)
    runs_b, chosen_b = _side_runs(records if records_b is None else records_b, *gb)
    side_a = {k: v[-1] for k, v in runs_a.items()}
    side_b = {k: v[-1] for k, v in runs_b.items()}
    common = sorted(set(side_a) & set(side_b))
    rng = np.random.default_rng(seed)
    pairs, boots, floor_hw = [], [], []
    for key in common:
        d, bl, inside = _pair(np, rng, runs_a[key], runs_b[key], n_boot, min_effect, floors)
        pairs.append(d)
        if bl is not None:
            boots.append(bl)
            floor_hw.append(0.0 if inside else (d["run_to_run_half_width"] or 0.0))

    warnings: list[str] = []
    envs_a = {side_a[k].env.comparable_key() for k in side_a}
    envs_b = {side_b[k].env.comparable_key() for k in side_b}
    if envs_a != envs_b:
        def names(keys: set) -> str:
            return "; ".join(sorted(f"{k[1]} (driver {k[2]}, torch {k[3]}, triton {k[4]}, tilelang {k[5]})" for k in keys))

        warnings.append(f"the two generators ran in different environments (a: {names(envs_a)}; b: {names(envs_b)}): "
                        "times are compared through each session's own library time, which removes most but not all "
                        "of the difference")
    pv = sorted({k[0] for k in common if side_a[k].problem_version != side_b[k].problem_version})
    if pv:
        warnings.append(f"problem files changed between the two runs for {', '.join(pv)}: they were scored against "
                        "different problem versions")
    if not common:
        warnings.append("the two generators have no (problem, workload) in common: nothing to compare")
    for side, recs, g in (("a", side_a, ga), ("b", side_b, gb)):
        n_cpu = sum(M.is_cpu_path(r) for r in recs.values())
        if n_cpu:
            warnings.append(f"{M.CPU_PATH_NOTE}: {n_cpu} record(s) of {side} ({M.label(*g)}) come from the CPU path; "
                            "their workloads are compared on status only")
    bare = sorted({f"{side_a[(x['problem'], x['workload'])].env.device_name}" for x in pairs
                   if x["noise"] is not None and x["run_to_run_half_width"] is None})
    if bare:
        warnings.append(f"no run-to-run noise floor is recorded for {', '.join(bare)} and the sides hold one run each: "
                        "those intervals cover each run's sample noise only, and a difference between runs may be "
                        "noise; run each side twice (kernelgate run --rerun, then compare both runs' records)")

    summary: dict = {"n_pairs": len(pairs), "n_timed_pairs": len(boots), "geomean_ratio": None, "ci95": None,
                     "mode": None}
    if boots:
        logs = np.vstack(boots)  # (pairs, n_boot)
        point = float(np.exp(np.mean([math.log(d["ratio"]) for d in pairs if d["ratio"] is not None])))
        pick = rng.integers(0, logs.shape[0], size=(n_boot, logs.shape[0]))
        reps = np.exp(logs[pick, np.arange(n_boot)[:, None]].mean(axis=1))
        blo, bhi = (float(v) for v in np.percentile(reps, [2.5, 97.5]))
        hh = math.sqrt(sum(h * h for h in floor_hw) / len(floor_hw))  # a shift of the whole run moves every workload
        r0 = math.log(point)
        lo = math.exp(r0 - math.sqrt((r0 - math.log(blo)) ** 2 + hh ** 2))
        hi = math.exp(r0 + math.sqrt((math.log(bhi) - r0) ** 2 + hh ** 2))
        modes = {d["mode"] for d in pairs if d["mode"]}
        summary.update(geomean_ratio=point, ci95=[lo, hi], mode=modes.pop() if len(modes) == 1 else "mixed",
                       run_to_run_half_width=hh)
    for side, recs in (("a", side_a), ("b", side_b)):
        rs = [recs[k] for k in common]
        att = [r for r in rs if M.is_attempted(r)]
        summary[f"correct_{side}"] = sum(r.status is Status.PASSED for r in att)
        summary[f"attempted_{side}"] = len(att)
        summary[f"geomean_e_lib_{side}"] = M.geomean(M.e_lib_of(r) for r in rs)
        summary[f"mean_s_{side}"] = M.mean(M.score_of(r) for r in att)
        general = [g for g in (_generalizes(r) for r in att) if g is not None]
        summary[f"heldout_judged_{side}"] = len(general)
        summary[f"generalizes_{side}"] = sum(general)

    by_problem: dict[str, set[str]] = defaultdict(set)
    for d in pairs:
        by_problem[d["problem"]].add(d["change"])
    improved = sorted(p for p, ch in by_problem.items() if ch & _IMPROVED and not ch & _REGRESSED)
    regressed = sorted(p for p, ch in by_problem.items() if ch & _REGRESSED and not ch & _IMPROVED)
    mixed = sorted(p for p, ch in by_problem.items() if ch & _IMPROVED and ch & _REGRESSED)
    problems_a = {k[0] for k in side_a}
    problems_b = {k[0] for k in side_b}
    candidates = [{"problem": pid, "a": chosen_a[pid][0], "a_of": chosen_a[pid][1], "b": chosen_b[pid][0],
                   "b_of": chosen_b[pid][1]} for pid in sorted({k[0] for k in common})]
    return {
        "schema": SCHEMA, "a": M.label(*ga), "b": M.label(*gb), "n_boot": n_boot, "seed": seed, "min_effect": min_effect,
        "rule": CHANGE_RULE, "candidate_rule": CANDIDATE_RULE, "summary": summary, "pairs": pairs,
        "candidates": candidates, "improved": improved, "regressed": regressed, "mixed": mixed,
        "only_a": sorted(problems_a - problems_b), "only_b": sorted(problems_b - problems_a),
        "warnings": warnings,
    }


def _arrow(x: str | None, y: str | None) -> str:
    return x if x == y else f"{x} -> {y}"


def format_comparison(d: dict) -> str:
    """The comparison as text: warnings first, one row per paired workload, then the summary."""
    s = d["summary"]
    lines = [f"compare {d['a']} (a) -> {d['b']} (b): {s['n_pairs']} paired workload(s), {s['n_timed_pairs']} timed on "
             f"both sides" + (f"; only in a: {', '.join(d['only_a'])}" if d["only_a"] else "")
             + (f"; only in b: {', '.join(d['only_b'])}" if d["only_b"] else "")]
    lines += [f"warning: {w}" for w in d["warnings"]]
    if d.get("candidates"):
        lines += ["", f"candidates compared: {d['candidate_rule']}:"]
        for c in d["candidates"]:
            lines.append(f"  {c['problem']}: a {c['a']}" + (f" (best of {c['a_of']})" if c["a_of"] > 1 else "")
                         + f", b {c['b']}" + (f" (best of {c['b_of']})" if c["b_of"] > 1 else ""))
    rows = []
    for p in d["pairs"]:
        ci = p["ci95"]
        h = p.get("run_to_run_half_width")
        rows.append([p["problem"], p["workload"], _arrow(p["status_a"], p["status_b"]),
                     f"{fmt(p['E_lib_a'])} -> {fmt(p['E_lib_b'])}", f"{fmt(p['S_a'], '.2f')} -> {fmt(p['S_b'], '.2f')}",
                     fmt(p["ratio"], ".3f") + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""),
                     f"{100 * (math.exp(h) - 1):.1f}%" if h is not None else "-",
                     {"raw": "same run", "library_normalized": "lib-norm", "repeats": "repeats"}.get(p["mode"] or "", "-"),
                     p["change"] + (" (identical code)" if p.get("identical_code") and p["ratio"] is not None else "")])
    if rows:
        lines += ["", table(rows, ["problem", "workload", "status", "E_lib a -> b", "S a -> b", "t_b/t_a [95% CI]",
                                   "run-to-run", "timing", "change"])]
    if any(p["change"] == "cpu_path" for p in d["pairs"]):
        lines.append(f"cpu_path: {M.CPU_PATH_NOTE} (both PASSED; not compared by speed)")
    failures = [(p, side) for p in d["pairs"] for side in ("a", "b") if p[f"error_{side}"]]
    if failures:
        lines += ["", "errors (first line of each; the whole text is in the results file and in --json):"]
        for p, side in failures:
            head = f"  {side}: {p['problem']} {p['workload']} {p[f'candidate_{side}']}: "
            more = "(more lines: see the results file)" if "\n" in p[f"error_{side}"].strip() else ""
            body = first_line(p[f"error_{side}"], max(40, ERROR_WIDTH - len(head)), more)
            lines += [head + body[0]] + [" " * len(head) + x for x in body[1:]]
    lines.append("")
    if s["geomean_ratio"] is not None:
        g, (lo, hi) = s["geomean_ratio"], s["ci95"]
        verdict = ("b faster" if hi < 1 else "b slower" if lo > 1 else "no clear difference")
        lines.append(f"geomean t_b/t_a = {g:.3f}  95% CI [{lo:.3f}, {hi:.3f}] over {s['n_timed_pairs']} timed "
                     f"workload(s) ({s['mode']}; run-to-run +-{100 * (math.exp(s['run_to_run_half_width']) - 1):.1f}% "
                     f"included): {verdict}")
    else:
        lines.append("geomean t_b/t_a: - (no workload was timed on both sides)")
    lines.append(f"correct: a {s['correct_a']}/{s['attempted_a']}, b {s['correct_b']}/{s['attempted_b']};  "
                 f"geomean E_lib: a {fmt(s['geomean_e_lib_a'])}, b {fmt(s['geomean_e_lib_b'])};  "
                 f"mean S: a {fmt(s['mean_s_a'], '.3f')}, b {fmt(s['mean_s_b'], '.3f')}")
    if s["heldout_judged_a"] or s["heldout_judged_b"]:
        lines.append(f"generalizes (PASSED and every judged held-out shape passed): a {s['generalizes_a']}/"
                     f"{s['heldout_judged_a']}, b {s['generalizes_b']}/{s['heldout_judged_b']}")
    for name in ("improved", "regressed", "mixed"):
        lines.append(f"{name}: {', '.join(d[name]) or '-'}")
    lines.append(f"rule: {d['rule']} (min_effect {d['min_effect']:g}, {d['n_boot']} bootstrap replicates, seed {d['seed']})")
    return terminal("\n".join(lines))
