"""Where the timing phase's alternating pairs spend their time, per record (ms per pair, medians over records).

    python tools/pair_costs.py RUN_DIR [RUN_DIR ...]

Reads ``phase_s`` of each record (written by ``harness.execute.parent.timing_phase``): per pair of calls, the
parent's round trip to the worker (``call rt``) and to the checker (``lib rt``), and inside them what each
side reported: making the inputs and poisoning the allocator (``prep``), the timed kernel window (``kernel``),
and the rest of its handler (flush, hold, synchronize, the report). ``hold`` is the GPU sleep both sides
queued before their call. The worker's numbers are its own claims: this is a diagnostic, never a score.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from harness.results.store import load_results

COLUMNS = ("call rt", "call wall", "call prep", "call kernel", "lib rt", "lib wall", "lib prep", "lib kernel",
           "hold (both)", "pairs")
KEYS = ("pair_call_s", "call_wall_s", "call_prep_s", "call_kernel_s", "pair_lib_s", "lib_wall_s", "lib_prep_s",
        "lib_kernel_s", "hold_s")


def rows(run_dir: str) -> list[tuple[str, list[float]]]:
    out = []
    for r in load_results(run_dir):
        ph = r.phase_s or {}
        n = r.verification.timed_calls if r.verification else 0
        if not n or "pair_call_s" not in ph:
            continue
        out.append((f"{Path(r.candidate).stem} {r.workload} {r.dtype}", [ph.get(k, 0.0) * 1e3 / n for k in KEYS] + [n]))
    return out


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    table = [row for d in argv for row in rows(d)]
    if not table:
        print("no record with pair costs (phase_s.pair_call_s) under " + ", ".join(argv))
        return 1
    width = max(len(name) for name, _ in table)
    print(f"{'record':<{width}} " + " ".join(f"{c:>11}" for c in COLUMNS) + "   (ms per pair)")
    for name, vals in table:
        print(f"{name:<{width}} " + " ".join(f"{v:>11.3f}" for v in vals[:-1]) + f" {int(vals[-1]):>11d}")
    med = [statistics.median(v[i] for _, v in table) for i in range(len(KEYS))]
    print(f"{'median':<{width}} " + " ".join(f"{v:>11.3f}" for v in med))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
