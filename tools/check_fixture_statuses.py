"""Compare each adversarial fixture's recorded status with the 'expect: STATUS' in its docstring."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from harness.results.store import load_results

ROOT = Path(__file__).resolve().parents[1] / "tests" / "execute" / "fixtures"


def main(results_dir: str) -> int:
    expected = {}
    for f in ROOT.glob("*/*.py"):
        m = re.search(r"expect: ([A-Z_|]+)", f.read_text().splitlines()[0])
        if m:
            expected[f"{f.parent.name}/{f.name}"] = m.group(1)
    bad = 0
    for r in sorted(load_results(results_dir), key=lambda r: r.candidate):
        want = expected.get(r.candidate, "?")
        ok = r.status.value in want.split("|")
        bad += not ok
        extra = f"E_lib={r.screening.e_lib:.2f}" if r.screening else (r.error.message[:70] if r.error else "")
        print(f"{'ok ' if ok else 'BAD'} {r.candidate:45s} {r.status.value:20s} expected {want:20s} {extra}")
    print(f"{bad} fixture(s) with an unexpected status")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
