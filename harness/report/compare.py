"""Paired comparison of two generators (``a`` the baseline, ``b`` the challenger).

Only what both attempted is compared: for every problem each side's best
candidate is taken (:func:`harness.report.metrics.best_candidate`, the same
rule as the leaderboard) and its workloads are paired by name.

Time ratio of one paired workload (below 1: ``b`` is faster)::

    same run_id (paired timings, one session):   ratio = med(t_b) / med(t_a)
    different sessions:                          ratio = (med(t_b) / med(lib_b)) / (med(t_a) / med(lib_a))
                                                       = E_lib_a / E_lib_b

Normalising by each session's own library time removes most of the
difference between sessions (clocks, thermal state, another GPU of the same
model); only within one run are raw kernel times comparable directly.

Noise, from the raw ``samples_ms`` kept in every :class:`TimingStats`:

* per workload, a bootstrap of the ratio: each side's samples (and library
  samples when normalising) are resampled with replacement and the ratio of
  medians is recomputed ``n_boot`` times; the 95% CI is the 2.5 and 97.5
  percentiles;
* overall, the geometric mean of the ratios with a two-level bootstrap: each
  replicate resamples the paired workloads *and* uses each workload's own
  bootstrap replicate, so both the spread between problems and the timing
  noise within one are in the interval.

Rule for "beyond noise" (:data:`CHANGE_RULE`): a workload improved when its
ratio is below ``1 - min_effect`` *and* its 95% CI lies entirely below 1
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
    "a workload improved (regressed) when t_b/t_a is below 1 - min_effect (above 1 + min_effect) and its 95% bootstrap "
    "CI, from resampling each side's raw timing samples and taking medians, lies entirely below (above) 1; a fix "
    "(a failed, b PASSED) is an improvement and a break a regression; a problem improved when some workload improved "
    "and none regressed, regressed in the opposite case, mixed when both"
)


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


def _side(records: list[JobResult], gen: str, ver: str) -> dict[tuple[str, str], JobResult]:
    """(problem, workload) -> the record of this generator's best candidate on that problem."""
    by_problem: dict[str, list[JobResult]] = defaultdict(list)
    for r in records:
        if r.generator == gen and r.generator_version == ver:
            by_problem[r.problem_id].append(r)
    out: dict[tuple[str, str], JobResult] = {}
    for pid, recs in by_problem.items():
        best = M.best_candidate(recs)
        if best is None:
            continue
        for r in sorted((r for r in recs if r.candidate == best.candidate), key=lambda r: r.created_at):
            out[(pid, r.workload)] = r  # latest wins if the candidate's file changed between runs
    return out


def _timed(r: JobResult) -> bool:
    """PASSED with kernel and library timings that may be compared (never on the CPU path)."""
    return (r.status is Status.PASSED and r.timing is not None and r.library_timing is not None
            and not M.is_cpu_path(r))


def _boot_medians(np, rng, samples: tuple[float, ...], n_boot: int):
    x = np.asarray(samples, dtype=float)
    idx = rng.integers(0, len(x), size=(n_boot, len(x)))
    return np.median(x[idx], axis=1)


def _error_text(r: JobResult) -> str | None:
    """``Type: message`` of a record's error (the whole message; renderers shorten it), None without one."""
    return f"{r.error.type}: {r.error.message}" if r.error is not None else None


def _generalizes(r: JobResult) -> bool | None:
    """The record passed every judged held-out shape (None: it did not pass, or none was judged)."""
    return r.heldout.generalizes if r.status is Status.PASSED and r.heldout is not None else None


def _pair(np, rng, ra: JobResult, rb: JobResult, n_boot: int, min_effect: float) -> tuple[dict, object | None]:
    d = {
        "problem": ra.problem_id, "workload": ra.workload, "category": ra.category,
        "candidate_a": ra.candidate, "candidate_b": rb.candidate,
        "status_a": ra.status.value, "status_b": rb.status.value,
        "verdict_a": M.verdict_of(ra), "verdict_b": M.verdict_of(rb),
        "E_lib_a": M.e_lib_of(ra), "E_lib_b": M.e_lib_of(rb),
        "U_roof_a": M.u_roof_of(ra), "U_roof_b": M.u_roof_of(rb),
        "S_a": M.score_of(ra), "S_b": M.score_of(rb), "delta_S": None,
        "cpu_path_a": M.is_cpu_path(ra), "cpu_path_b": M.is_cpu_path(rb),
        "error_a": _error_text(ra), "error_b": _error_text(rb),
        "generalizes_a": _generalizes(ra), "generalizes_b": _generalizes(rb),
        "mode": None, "ratio": None, "ci95": None, "change": "same",
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
        lo, hi = (float(v) for v in np.percentile(boot, [2.5, 97.5]))
        d["ratio"], d["ci95"] = ratio, [lo, hi]
        if ratio < 1 - min_effect and hi < 1:
            d["change"] = "faster"
        elif ratio > 1 + min_effect and lo > 1:
            d["change"] = "slower"
        boot_log = np.log(boot)
    return d, boot_log


_IMPROVED = {"faster", "fixed"}
_REGRESSED = {"slower", "broke"}


def compare_generators(results: list[JobResult], a: str, b: str, *, n_boot: int = 2000, seed: int = 0,
                       min_effect: float = MIN_EFFECT) -> dict:
    """Compare generator ``b`` against baseline ``a`` on what both attempted (see the module docstring).

    ``a``/``b``: ``generator@version``, or a bare generator name when it has
    one version in ``results``. Raises ValueError naming the known generators
    when one cannot be resolved. Deterministic for a given ``seed``.
    """
    if n_boot < 100:
        raise ValueError(f"n_boot={n_boot}: use at least 100 bootstrap replicates for a 95% interval")
    records, _ = M.latest_records(results)
    ga, gb = resolve_generator(records, a), resolve_generator(records, b)
    if ga == gb:
        raise ValueError(f"both sides are {M.label(*ga)}; name two different generators or versions")
    return compare_labels(records, ga, gb, n_boot=n_boot, seed=seed, min_effect=min_effect)


def compare_labels(records: list[JobResult], ga: tuple[str, str], gb: tuple[str, str], *, n_boot: int = 2000,
                   seed: int = 0, min_effect: float = MIN_EFFECT) -> dict:
    """:func:`compare_generators` for two resolved (generator, version) pairs of already-latest ``records``.

    The report's generator-comparison section calls this for each pair it
    shows, so its ratios and CIs are exactly those of ``kernelgate compare``.
    """
    import numpy as np

    if n_boot < 100:
        raise ValueError(f"n_boot={n_boot}: use at least 100 bootstrap replicates for a 95% interval")
    side_a, side_b = _side(records, *ga), _side(records, *gb)
    common = sorted(set(side_a) & set(side_b))
    rng = np.random.default_rng(seed)
    pairs, boots = [], []
    for key in common:
        d, bl = _pair(np, rng, side_a[key], side_b[key], n_boot, min_effect)
        pairs.append(d)
        if bl is not None:
            boots.append(bl)

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

    summary: dict = {"n_pairs": len(pairs), "n_timed_pairs": len(boots), "geomean_ratio": None, "ci95": None,
                     "mode": None}
    if boots:
        logs = np.vstack(boots)  # (pairs, n_boot)
        point = float(np.exp(np.mean([math.log(d["ratio"]) for d in pairs if d["ratio"] is not None])))
        pick = rng.integers(0, logs.shape[0], size=(n_boot, logs.shape[0]))
        reps = np.exp(logs[pick, np.arange(n_boot)[:, None]].mean(axis=1))
        lo, hi = (float(v) for v in np.percentile(reps, [2.5, 97.5]))
        modes = {d["mode"] for d in pairs if d["mode"]}
        summary.update(geomean_ratio=point, ci95=[lo, hi], mode=modes.pop() if len(modes) == 1 else "mixed")
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
    return {
        "schema": SCHEMA, "a": M.label(*ga), "b": M.label(*gb), "n_boot": n_boot, "seed": seed, "min_effect": min_effect,
        "rule": CHANGE_RULE, "summary": summary, "pairs": pairs,
        "improved": improved, "regressed": regressed, "mixed": mixed,
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
    rows = []
    for p in d["pairs"]:
        ci = p["ci95"]
        rows.append([p["problem"], p["workload"], _arrow(p["status_a"], p["status_b"]),
                     f"{fmt(p['E_lib_a'])} -> {fmt(p['E_lib_b'])}", f"{fmt(p['S_a'], '.2f')} -> {fmt(p['S_b'], '.2f')}",
                     fmt(p["ratio"], ".3f") + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""),
                     {"raw": "same run", "library_normalized": "lib-norm"}.get(p["mode"] or "", "-"), p["change"]])
    if rows:
        lines += ["", table(rows, ["problem", "workload", "status", "E_lib a -> b", "S a -> b", "t_b/t_a [95% CI]",
                                   "timing", "change"])]
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
                     f"workload(s) ({s['mode']}): {verdict}")
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


VERSIONS_RULE = (
    "each version of a generator is compared with its previous version (versions ordered by their first record); "
    "the first version of every other generator with the baseline; pairing (each side's best candidate per "
    "problem, workloads by name), ratios, CIs and the change rule are those of 'kernelgate compare'"
)


def _label_order(records: list[JobResult]) -> list[tuple[str, str]]:
    """Every (generator, version), grouped by generator, versions in order of their first record's created_at."""
    first: dict[tuple[str, str], str] = {}
    for r in records:
        key = (r.generator, r.generator_version)
        first[key] = min(first.get(key, r.created_at), r.created_at)
    return sorted(first, key=lambda g: (g[0], first[g], g[1]))


def comparison_plan(records: list[JobResult], baseline: tuple[str, str]) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """(reference, compared) pairs the report shows (:data:`VERSIONS_RULE`), in display order.

    Versions always chain forward (v2 against v1, v3 against v2), also in the
    baseline's own generator, whose first version is then compared with
    nothing; the baseline is the reference of other generators only.
    """
    order = _label_order(records)
    plan = []
    for i, g in enumerate(order):
        if i and order[i - 1][0] == g[0]:
            plan.append((order[i - 1], g))
        elif g[0] != baseline[0]:
            plan.append((baseline, g))
    return plan


def version_comparison(results: list[JobResult], *, baseline: str | None = None, default_baseline: str | None = None,
                       n_boot: int = 2000, seed: int = 0, min_effect: float = MIN_EFFECT) -> dict | None:
    """The report's generator comparison: per problem and workload, every generator@version side by side.

    ``baseline``: ``generator@version`` (or a generator with one version)
    that other generators are compared with; by default ``default_baseline``
    (the report passes the leaderboard's first-ranked label), else the first
    label by name. Returns None when the records hold fewer than two
    generator@version labels. Each compared row carries the paired ratio
    t_row / t_reference with its 95% CI from :func:`compare_labels`, so the
    numbers are exactly those of ``kernelgate compare REF ROW``.
    """
    records, _ = M.latest_records(results)
    order = _label_order(records)
    if len(order) < 2:
        return None
    base = resolve_generator(records, baseline or default_baseline or M.label(*order[0]))
    plan = comparison_plan(records, base)
    comparisons, by_row = [], {}
    for ref, g in plan:
        d = compare_labels(records, ref, g, n_boot=n_boot, seed=seed, min_effect=min_effect)
        comparisons.append(d)
        by_row[g] = (ref, {(p["problem"], p["workload"]): p for p in d["pairs"]})
    sides = {g: _side(records, *g) for g in order}
    problems: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    cats: dict[str, str] = {}
    for g in order:
        for (pid, wl), r in sides[g].items():
            cats[pid] = r.category
            ref, pairs = by_row.get(g, (None, {}))
            p = pairs.get((pid, wl))
            problems[pid][wl].append({
                "label": M.label(*g), "candidate": r.candidate, "status": r.status.value, "verdict": M.verdict_of(r),
                "E_lib": M.e_lib_of(r), "U_roof": M.u_roof_of(r), "S": M.score_of(r), "cpu_path": M.is_cpu_path(r),
                "error": _error_text(r), "reference": M.label(*ref) if ref and p else None,
                "ratio": p["ratio"] if p else None, "ci95": p["ci95"] if p else None,
                "mode": p["mode"] if p else None, "change": p["change"] if p else None,
                "baseline": g == base,
            })
    return {
        "baseline": M.label(*base), "rule": VERSIONS_RULE, "change_rule": CHANGE_RULE, "min_effect": min_effect,
        "n_boot": n_boot, "seed": seed, "comparisons": comparisons,
        "problems": [{"problem": pid, "category": cats[pid],
                      "workloads": [{"workload": wl, "rows": rows} for wl, rows in sorted(problems[pid].items())]}
                     for pid in sorted(problems, key=lambda p: (cats[p], p))],
    }
