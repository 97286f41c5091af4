"""Repeatability of two runs of the same candidates: kernel and library medians, E_lib and verdicts.

    python tools/compare_repeats.py RUN_A RUN_B            # results.jsonl[.gz] files or run folders
    python tools/compare_repeats.py RUN_A RUN_B --elib     # also E_lib within 3% and the verdicts that differ

Kernel medians below 20 us are left out (launch jitter is a large share of them); so are library medians below
20 us. One line per shared (candidate, workload) record, then the summaries.
"""

from __future__ import annotations

import argparse
import statistics
import sys

from harness.results.store import load_results


def _summary(label: str, diffs: list[float]) -> None:
    if diffs:
        within = sum(d <= 0.03 for d in diffs)
        print(f"{label}: {within}/{len(diffs)} within 3%; median diff {statistics.median(diffs):.2%}; "
              f"max {max(diffs):.2%}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python tools/compare_repeats.py", description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("run_a", help="the first run's results (a results.jsonl[.gz] file or a run folder)")
    ap.add_argument("run_b", help="the second run's results")
    ap.add_argument("--elib", action="store_true", help="also compare E_lib (within 3%%) and the verdicts")
    args = ap.parse_args(argv)
    ra = {(r.candidate, r.workload): r for r in load_results(args.run_a) if r.timing}
    rb = {(r.candidate, r.workload): r for r in load_results(args.run_b) if r.timing}
    kernel, library, elib, moved = [], [], [], []
    for key in sorted(ra.keys() & rb.keys()):
        a, b = ra[key], rb[key]
        ta, tb = a.timing.median_ms, b.timing.median_ms
        la, lb = a.library_timing.median_ms, b.library_timing.median_ms
        if min(la, lb) >= 0.020:
            library.append(abs(lb - la) / la)
        if a.screening is not None and b.screening is not None and a.screening.e_lib and b.screening.e_lib:
            elib.append(abs(b.screening.e_lib - a.screening.e_lib) / a.screening.e_lib)
            if a.screening.verdict != b.screening.verdict:
                moved.append(f"{key[0]} {key[1]}: {a.screening.verdict.value} (E_lib {a.screening.e_lib:.3f}) -> "
                             f"{b.screening.verdict.value} (E_lib {b.screening.e_lib:.3f})")
        if min(ta, tb) < 0.020:
            continue
        d = abs(tb - ta) / ta
        kernel.append(d)
        print(f"{key[0]:45s} {key[1]:28s} run1 {ta:9.4f} ms  run2 {tb:9.4f} ms  diff {d:6.2%}   "
              f"library {la:8.4f} / {lb:8.4f} ms")
    if args.elib:
        _summary("E_lib", elib)
        print(f"verdicts: {len(elib) - len(moved)}/{len(elib)} the same" + "".join(f"\n  {m}" for m in moved))
    _summary("kernels", kernel)
    _summary("library ops", library)
    return 0


if __name__ == "__main__":
    sys.exit(main())
