"""The report's generator comparison: every generator@version side by side, each compared with its reference.

Which pairs are shown (:data:`VERSIONS_RULE`, :func:`comparison_plan`) and
the per-problem table the report renders; every ratio, interval and change
is :func:`harness.report.compare.compare_labels`'s, so the report says
exactly what ``kernelgate compare REF ROW`` says.
"""

from __future__ import annotations

from collections import defaultdict

from harness.records import JobResult
from harness.report import metrics as M
from harness.report.compare import (CHANGE_RULE, MIN_EFFECT, compare_labels, error_text, resolve_generator,
                                    side_records)


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
    sides = {g: side_records(records, *g) for g in order}
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
                "error": error_text(r), "reference": M.label(*ref) if ref and p else None,
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
