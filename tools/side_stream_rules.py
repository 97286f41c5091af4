"""Would another side-stream rule have told load from a side stream? Replayed on committed records.

    python tools/side_stream_rules.py RESULTS.jsonl[.gz] [...]

The timing phase times both sides device-wide when the candidate's work seems to outlive its timed stream:
its median gap from the stream's end event to the device-wide end exceeds the library's by more than
max(20 us, 10% of its stream time) (:func:`harness.measure.timing.choose_windows`). Under load on an H200
honest kernels crossed that line when the gap was the device-wide end as the host saw it.
Records keep the scored set's gap statistics in ``phase_s``
(:func:`harness.measure.timing.tail_gap_stats`); this tool says, per record, which rules fire on them:

* ``net``: the rule in force: each call's device-wide end less the host's round trip to the
  idle GPU measured right after it;
* ``host``: the rule before it (the device-wide end as the host saw it, medians);
* ``floor``: ``host`` on each side's 10th percentile (a disturbance in part of the set moves the median, not
  the floor; work on a side stream in nine calls of ten moves both);
* ``pair``: the median over alternating pairs of the candidate's host-seen gap minus the library's.

The ``side us`` column is the profiler's GPU time of the forward's kernels and copies on other streams
(``kernels.side_us``): device-wide windows stand only where it is above 0 (or no profiler ran;
:func:`harness.measure.timing.confirm_side_work`). Records timed device-wide have the stream time estimated as
their scored median minus their median gap.
Records without the statistics (made by a harness that did not record them) are counted, not judged.
"""

from __future__ import annotations

import gzip
import json
import statistics
import sys

SLACK_MS = 0.020
SHARE = 0.1


def _records(path: str) -> list[dict]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def judge(rec: dict) -> dict | None:
    """The three rules' verdicts on one record, or None when it has no gap statistics."""
    ph = rec.get("phase_s") or {}
    need = ("tail_gap_kernel_s", "tail_gap_library_s", "tail_gap_kernel_p10_s", "tail_gap_library_p10_s")
    if not all(k in ph for k in need) or not rec.get("timing"):
        return None
    device_wide = any("timed device-wide" in w for w in rec.get("warnings") or ())
    has_net = "tail_gap_kernel_net_s" in ph and "tail_gap_library_net_s" in ph
    gap_s = ph["tail_gap_kernel_net_s"] if has_net else ph["tail_gap_kernel_s"]
    stream_ms = rec["timing"]["median_ms"] - (gap_s * 1e3 if device_wide else 0.0)
    limit_ms = max(SLACK_MS, SHARE * stream_ms)
    extra = {"host": (ph["tail_gap_kernel_s"] - ph["tail_gap_library_s"]) * 1e3,
             "floor": (ph["tail_gap_kernel_p10_s"] - ph["tail_gap_library_p10_s"]) * 1e3}
    if "tail_gap_pair_extra_s" in ph:
        extra["pair"] = ph["tail_gap_pair_extra_s"] * 1e3
    if has_net:
        extra["net"] = (ph["tail_gap_kernel_net_s"] - ph["tail_gap_library_net_s"]) * 1e3
    idle = (ph.get("tail_gap_kernel_idle_s"), ph.get("tail_gap_library_idle_s"))
    return {"name": f"{rec['candidate']} {rec['workload']}", "device_wide": device_wide, "limit_ms": limit_ms,
            "extra_ms": extra, "idle_s": idle, "side_us": (rec.get("kernels") or {}).get("side_us"),
            "fires": {k: v > limit_ms for k, v in extra.items()}}


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    judged, missing = [], 0
    for path in argv:
        for rec in _records(path):
            j = judge(rec)
            if j is None:
                missing += rec.get("timing") is not None
            else:
                judged.append(j)
    rows = [j for j in judged if j["device_wide"] or any(j["fires"].values())]
    rules = ("net", "host", "floor", "pair")
    print(f"{'record':56s} {'scored':6s} {'limit us':>8s} " + " ".join(f"{r + ' us':>8s}" for r in rules)
          + f" {'idle us (k/l)':>13s} {'side us':>8s}  fires")
    for j in rows:
        e = j["extra_ms"]
        cells = " ".join(f"{e[r] * 1e3:8.1f}" if r in e else f"{'-':>8s}" for r in rules)
        ik, il = j["idle_s"]
        idle = f"{ik * 1e6:6.1f}/{il * 1e6:<6.1f}" if ik is not None and il is not None else f"{'-':>13s}"
        side = f"{j['side_us']:8.1f}" if j["side_us"] is not None else f"{'-':>8s}"
        print(f"{j['name'][-56:]:56s} {'device' if j['device_wide'] else 'stream':6s} {j['limit_ms'] * 1e3:8.1f} "
              f"{cells} {idle:>13s} {side}  {','.join(k for k, v in j['fires'].items() if v) or '-'}")
    both = [j for j in judged if j["idle_s"][0] is not None and j["idle_s"][1] is not None]
    if both:
        ik = statistics.median(j["idle_s"][0] for j in both) * 1e6
        il = statistics.median(j["idle_s"][1] for j in both) * 1e6
        print(f"\nhost round trip to the idle GPU, median over {len(both)} records: candidate {ik:.1f} us, "
              f"library {il:.1f} us")
    counts = {k: sum(j["fires"].get(k, False) for j in judged) for k in rules}
    print(f"\n{len(judged)} timed record(s) with gap statistics ({missing} without); fires: "
          + ", ".join(f"{k} {v}" for k, v in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
