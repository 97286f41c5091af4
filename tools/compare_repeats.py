"""Repeatability: medians of the same candidates (and their library baselines) from two runs, above 20 us."""

from __future__ import annotations

import statistics
import sys

from harness.results.store import load_results


def _summary(label: str, diffs: list[float]) -> None:
    if diffs:
        within = sum(d <= 0.03 for d in diffs)
        print(f"{label}: {within}/{len(diffs)} within 3%; median diff {statistics.median(diffs):.2%}; "
              f"max {max(diffs):.2%}")


def main(a: str, b: str) -> int:
    ra = {(r.candidate, r.workload): r for r in load_results(a) if r.timing}
    rb = {(r.candidate, r.workload): r for r in load_results(b) if r.timing}
    kernel, library = [], []
    for key in sorted(ra.keys() & rb.keys()):
        ta, tb = ra[key].timing.median_ms, rb[key].timing.median_ms
        la, lb = ra[key].library_timing.median_ms, rb[key].library_timing.median_ms
        if min(la, lb) >= 0.020:
            library.append(abs(lb - la) / la)
        if min(ta, tb) < 0.020:
            continue
        d = abs(tb - ta) / ta
        kernel.append(d)
        print(f"{key[0]:45s} {key[1]:28s} run1 {ta:9.4f} ms  run2 {tb:9.4f} ms  diff {d:6.2%}   "
              f"library {la:8.4f} / {lb:8.4f} ms")
    _summary("kernels", kernel)
    _summary("library ops", library)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
