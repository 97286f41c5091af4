"""Render docs/correctness-profiles.md: which value profiles and held-out shapes are fair, per problem (never edit
that file by hand).

Usage: python tools/correctness_profiles.py [--kernelbench KERNELBENCH_DIR [--kernelbench-commit REF]] \
           > docs/correctness-profiles.md

``--kernelbench``: a KernelBench checkout's ``KernelBench`` folder (``level1/``, ``level2/``); each of its problems
that no file here covers is probed too, at sizes reduced until its inputs and parameters fit
:data:`REDUCED_BYTES` (the largest size constant halved, one at a time; kernel sizes, strides, paddings,
dilations and group counts are kept), float32.

For every bundled problem (its ``smoke`` workload, and its GPU workloads' dtypes at the smoke sizes) and every
KernelBench-format file in the repository (``tests/fixtures/kernelbench`` and
``tests/execute/fixtures/correctness/kernelbench``, level 1 and 2, at their own sizes, float32), it runs the
checker's own rules on the CPU: the fairness probe (:func:`harness.execute.checker.fairness.judge` on
:func:`~harness.execute.checker.fairness.local_reference`), the held-out extents and boundary values
(:mod:`harness.problems.heldout`), two held-out shapes drawn with the documentation seed :data:`SEED` within the
GPU's byte budget (the CPU path's is smaller) and the standard profile's verdict at each. Verdicts on a GPU are probed by the checker on that GPU at the workload's own
sizes (and cached); this table is the CPU's at the sizes named.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the harness package, installed or not

SEED = 0
"""The base seed the held-out shapes of the table are drawn with (a run draws its own, in secret)."""
KERNELBENCH_FOLDERS = (ROOT / "tests" / "fixtures" / "kernelbench", ROOT / "tests" / "execute" / "fixtures" /
                       "correctness" / "kernelbench")


REDUCED_BYTES = 8 << 20
"""The byte budget (inputs and parameters, float32) KernelBench problems are reduced to for the CPU's probe."""
_KEPT = re.compile(r"kernel|stride|pad|dilation|group|head|factor|dim$|axis|bias|eps|momentum|margin|alpha|beta",
                   re.I)
"""Size constants left as they are when reducing: their meaning is not a size to halve (``dim`` is a reduction
axis in most KernelBench files; ``dim1``, ``dim2`` are extents and do match none of these)."""


def _reduced(problem) -> tuple:
    """(workload, the constants changed) for ``problem`` at sizes within :data:`REDUCED_BYTES`, or (None, why)."""
    from harness.problems.workloads import build_workload

    w = problem.workloads[0]
    sizes: dict = {}
    tried: set = set()
    while w.min_bytes > REDUCED_BYTES:
        params = {**dict(w.params), **sizes}
        cands = sorted(((v, k) for k, v in params.items() if type(v) is int and v > 1 and not _KEPT.search(k)
                        and k not in tried), reverse=True)
        if not cands:
            return None, f"no size constant left to halve at {w.min_bytes / 2**20:.0f} MiB"
        v, k = cands[0]
        try:
            w = build_workload(problem, name="reduced", set_={**sizes, k: v // 2}, dtype="float32", tags=())
            sizes[k] = v // 2
        except Exception:  # noqa: BLE001 - the file refuses this size (a divisibility, a shape rule): keep k
            tried.add(k)
    return w, sizes


def _why(reason: str) -> str:
    """A verdict's reason, short enough for a table cell."""
    if reason.startswith("changes no input"):
        return "changes no input"
    if "NaN/Inf" in reason:
        return "reference NaN/Inf"
    if "needs more than" in reason:
        return "library needs > 0.5 of the tolerance"
    return reason.split(":")[0][:60]


def _verdicts(problem, workload, dtype: str) -> list:
    from harness.execute.checker.fairness import judge, local_reference
    from harness.execute.shared.value_profiles import candidate_profiles

    ref = local_reference(problem.path, dict(workload.params), dtype, mode=problem.default_mode,
                          input_transform=problem.input_transform)
    return judge(ref, candidate_profiles(problem.input_transform), atol=workload.atol, rtol=workload.rtol,
                 reduction_length=workload.reduction_length)


def _profiles_cells(verdicts: list) -> tuple[str, str]:
    fair = ", ".join(v.name for v in verdicts if v.fair) or "-"
    groups: dict[str, list[str]] = {}
    for v in verdicts:
        if not v.fair:
            groups.setdefault(_why(v.reason), []).append(v.name)
    unfair = "; ".join(f"{', '.join(names)}: {why}" for why, names in groups.items()) or "-"
    return fair, unfair


def _heldout_cells(problem, workload) -> tuple[str, str]:
    from harness.problems import heldout as H

    exts = H.extents(problem, workload)
    if not exts:
        return "none (no size constant is an extent)", "-"
    ext_text = "; ".join(f"{e.label()}={e.value}: {', '.join(map(str, sorted(H.boundary_values(e.value))))}"
                         for e in exts)
    shapes = []
    for h in H.heldout_workloads(problem, workload, SEED, H.DEFAULT_COUNT):
        sizes = ", ".join(f"{k}={v}" for k, v in H.moved_sizes(workload, h).items())
        normal = next(v for v in _verdicts(problem, h, h.dtype) if v.profile == 0)
        shapes.append(f"{sizes} ({'fair' if normal.fair else 'not fair: ' + _why(normal.reason)})")
    return ext_text, "; ".join(shapes) or "none drawn (no valid boundary size)"


def _rows(problem, workloads: list) -> list[list[str]]:
    """One row per (workload, label, whether to draw its held-out shapes)."""
    rows = []
    for w, label, heldout in workloads:
        fair, unfair = _profiles_cells(_verdicts(problem, w, w.dtype))
        exts, shapes = _heldout_cells(problem, w) if heldout else ("as above", "as above")
        rows.append([problem.id, label, fair, unfair, exts, shapes])
    return rows


def _table(rows: list[list[str]]) -> list[str]:
    head = ["problem", "workload", "fair profiles", "not fair (why)", "held-out extents: boundary values",
            f"held-out shapes drawn with seed {SEED}, GPU byte budget (standard profile there)"]
    out = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse
    import warnings

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="example: python tools/correctness_profiles.py --kernelbench "
                                        "../KernelBench/KernelBench > docs/correctness-profiles.md")
    ap.add_argument("--kernelbench", type=Path, default=None,
                    help="a KernelBench checkout's KernelBench folder (level1/, level2/): probe all its problems")
    ap.add_argument("--kernelbench-commit", default="", metavar="REF",
                    help="the KernelBench commit the checkout is at, named in the table")
    args = ap.parse_args(argv)
    kernelbench = args.kernelbench
    at = f"(This table: KernelBench at commit {args.kernelbench_commit}.) " if args.kernelbench_commit else ""

    warnings.simplefilter("ignore")
    from harness.execute.shared.value_profiles import PROFILES
    from harness.problems.registry import load_registry
    from harness.problems.workloads import build_workload

    lines = ["# Value profiles and held-out shapes per problem", "",
             "Generated by `python tools/correctness_profiles.py --kernelbench KERNELBENCH_CHECKOUT/KernelBench > "
             "docs/correctness-profiles.md` from the probing "
             "code itself (`harness/execute/checker/fairness.py`, `harness/problems/heldout.py`); do not edit by hand. "
             "What the profiles and the rules are: [correctness.md](correctness.md).", "",
             "Conditions: the CPU (torch's CPU kernels are the library), float64 reference, 2 public probe seeds per "
             "profile, the library within half the tolerance. A GPU run probes on its own device at the workload's "
             "own sizes and dtype and caches the verdicts; half-precision rows here are the CPU's kernels at the "
             "smoke sizes, an indication, not the GPU's verdict. A public workload always uses the `normal` profile "
             "(its public distribution) whatever its verdict; a held-out shape whose `normal` verdict is not fair is "
             "not judged.", "",
             "## The profiles", "", "| # | name | values | catches |", "| --- | --- | --- | --- |"]
    lines += [f"| {p.index} | {p.name} | {p.values} | {p.catches} |" for p in PROFILES]
    lines += ["", "## Bundled problems", "",
              "The `smoke` workload as the CPU path runs it, then each other dtype the problem's GPU workloads use, "
              "at the smoke sizes.", ""]
    rows = []
    reg = load_registry()
    for pid in sorted(reg.problems):
        p = reg.problems[pid]
        smoke = next(w for w in p.workloads if w.is_smoke)
        extra = sorted({w.dtype for w in p.workloads if w.is_gpu} - {smoke.dtype})
        half = [build_workload(p, name=f"smoke-{d}", set_=dict(smoke.overrides), dtype=d, tags=("smoke",))
                for d in extra]  # the dtype's own tolerance
        rows += _rows(p, [(smoke, f"smoke ({smoke.dtype})", True)] + [(w, f"smoke sizes, {w.dtype}", False) for w in half])
    lines += _table(rows)
    from harness.problems.categories import kernelbench_map

    known = kernelbench_map()
    covered: set[str] = set()
    for level in (1, 2):
        lines += ["", f"## KernelBench level {level} (the files in this repository)", ""]
        rows, seen = [], set()
        for folder in KERNELBENCH_FOLDERS:
            for path in sorted(folder.rglob("*.py")):
                reg = load_registry(path)
                for p in reg.problems.values():
                    if (p.level or 1) != level or p.id in seen:
                        continue
                    seen.add(p.id)
                    covered.add(p.id)
                    w = p.workloads[0]
                    sizes = ", ".join(f"{k}={v}" for k, v in sorted(w.params.items()))
                    rows += _rows(p, [(w, f"{w.dtype}, {sizes}", True)])
        lines += _table(rows) if rows else ["None in the repository."]
    failed: dict[int, list[str]] = {1: [], 2: []}
    if kernelbench is not None:
        for level in (1, 2):
            lines += ["", f"## KernelBench level {level}, the whole level (a KernelBench checkout, reduced sizes)", "",
                      f"{at}Every problem of `{kernelbench.name}/level{level}/` not covered above, float32, its size "
                      f"constants halved until its inputs and parameters fit {REDUCED_BYTES >> 20} MiB (the sizes "
                      "changed are named; the GPU probes at the workload's own sizes).", ""]
            rows = []
            paths = sorted((kernelbench / f"level{level}").glob("*.py"), key=lambda q: int(q.name.split("_")[0]))
            for path in paths:
                if path.stem in covered:
                    continue
                try:
                    p = next(iter(load_registry(path).problems.values()))
                    w, changed = _reduced(p)
                    if w is None:
                        failed[level].append(f"{path.stem} ({changed})")
                        continue
                    sizes = ", ".join(f"{k}={v}" for k, v in sorted(changed.items())) or "its own sizes"
                    rows += _rows(p, [(w, f"float32, {sizes}", True)])
                    covered.add(path.stem)
                except Exception as exc:  # noqa: BLE001 - a file the CPU cannot run: named below
                    failed[level].append(f"{path.stem} ({type(exc).__name__}: {str(exc)[:80]})")
            lines += _table(rows) if rows else ["None."]
    missing = {lv: sorted((k for k, v in known.items() if v["level"] == lv and k not in covered),
                          key=lambda k: int(k.split("_")[0])) for lv in (1, 2)}
    total = {lv: sum(1 for v in known.values() if v["level"] == lv) for lv in (1, 2)}
    lines += ["", "## Not covered", "",
              "KernelBench problems (`harness/problems/kernelbench_categories.json`) not probed here: "
              f"level 1: {len(missing[1])} of {total[1]}, level 2: {len(missing[2])} of {total[2]}"
              + ("" if kernelbench is not None else " (run with `--kernelbench` and a KernelBench checkout to probe "
                 "them)") + ". Their verdicts are decided the same way, by the checker, the first time a run "
              "evaluates them, and cached under `~/.cache/kernelgate/fairness/`."]
    for level in (1, 2):
        if failed[level]:
            lines += ["", f"Level {level} files the CPU probe could not run: " + "; ".join(failed[level]) + "."]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
