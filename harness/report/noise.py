"""Run-to-run noise of kernel timings: a floor measured from repeated runs of identical code, and its table.

Two runs of the same candidate on the same device do not give the same time,
however many samples each takes: each run's median is precise, but the runs
differ (clocks and thermal state, another machine of the same model, an
autotuner that picks another configuration). ``kernelgate compare`` must not
call that difference a change, so each paired workload's interval is widened
by the run-to-run half-width of its class (:func:`floor_for`) or, when a side
has records of several runs, by the spread of those repeats
(:mod:`harness.report.compare`).

The floor of a class is the largest run-to-run change seen between two runs
of identical code in that class::

    d = | log(E_lib in run a / E_lib in run b) |      per (candidate, workload) both runs PASSED and timed
    half_width_log(class) = max d over the measured pairs of runs

(E_lib, the kernel's time over its own session's library time, is what a
comparison across runs uses.) Classes: the device model; the same machine
(both runs on one GPU, ``env.device_uuid``) or another machine of the model;
a kernel that autotuned (``phase_s["autotune_s"]``: its configuration is
chosen per run) or not. Workload size was measured as a class too (kernel
time below and above 0.5 ms) and made no difference once autotuned kernels
were apart, so it is not a class.

The committed table (``noise_floor.json`` beside this module) names every
pair of runs it was measured on (``blob:SHA``, the records' git object), so ``python -m
harness.report.noise harness/report/noise_floor.json --check`` measures it
again from the repository's history. Each class also records a
leave-one-pair-out check: for each pair, the largest change in it against the
floor measured without it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from harness.records import JobResult, Status

TABLE = Path(__file__).resolve().parent / "noise_floor.json"
SCHEMA = "kernelgate.noise_floor/1"


@dataclass(frozen=True, slots=True)
class NoiseFloor:
    """The run-to-run half-width of one class (see the module docstring)."""

    device_name: str
    same_machine: bool
    autotuned: bool
    half_width_log: float
    """Largest |log E_lib ratio| between two runs of identical code in this class."""
    n_pairs: int
    n_workloads: int

    def describe(self) -> str:
        return (f"{self.device_name}, {'same machine' if self.same_machine else 'another machine'}, "
                f"{'autotuned' if self.autotuned else 'fixed'} kernel: +-{100 * (math.exp(self.half_width_log) - 1):.2f}% "
                f"(largest of {self.n_workloads} workload(s) in {self.n_pairs} pair(s) of runs)")


def is_autotuned(r: JobResult) -> bool:
    """Whether the record's kernel autotuned (its configuration may differ from run to run)."""
    return bool(r.phase_s) and "autotune_s" in r.phase_s


def load_floors(path: Path = TABLE) -> list[NoiseFloor]:
    """The floors of the table at ``path`` (read when called, never at import); [] when there is none."""
    if not path.is_file():
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("schema") != SCHEMA:
        raise ValueError(f"{path}: schema {data.get('schema')!r} is not {SCHEMA!r}; measure it again "
                         "(python -m harness.report.noise)")
    return [NoiseFloor(f["device_name"], f["same_machine"], f["autotuned"], f["half_width_log"], f["n_pairs"],
                       f["n_workloads"]) for f in data["floors"]]


def floor_for(floors: Sequence[NoiseFloor], a: JobResult, b: JobResult) -> NoiseFloor | None:
    """The floor for comparing ``a`` with ``b``: their device model, one machine or two, autotuned if either is."""
    if a.env.device_name != b.env.device_name:
        return None
    same = a.env.device_uuid is not None and a.env.device_uuid == b.env.device_uuid
    tuned = is_autotuned(a) or is_autotuned(b)
    return next((f for f in floors if (f.device_name, f.same_machine, f.autotuned) == (a.env.device_name, same, tuned)),
                None)


def _timed(recs: Iterable[JobResult]) -> dict[tuple, JobResult]:
    return {(r.generator, r.candidate, r.workload): r for r in recs
            if r.status is Status.PASSED and r.timing is not None and r.library_timing is not None}


def pair_changes(run_a: Iterable[JobResult], run_b: Iterable[JobResult]) -> list[tuple[tuple, bool, bool, float]]:
    """(key, same machine, autotuned, log E_lib ratio) of every (candidate, workload) timed in both runs."""
    A, B = _timed(run_a), _timed(run_b)
    out = []
    for k in sorted(set(A) & set(B)):
        ra, rb = A[k], B[k]
        d = math.log((ra.library_timing.median_ms / ra.timing.median_ms)  # type: ignore[union-attr]
                     / (rb.library_timing.median_ms / rb.timing.median_ms))  # type: ignore[union-attr]
        same = ra.env.device_uuid is not None and ra.env.device_uuid == rb.env.device_uuid
        out.append((k, same, is_autotuned(ra) or is_autotuned(rb), d))
    return out


def read_source(source: str, root: Path) -> list[JobResult]:
    """Records of ``source``: ``blob:SHA`` or ``COMMIT:PATH`` (read with git from the repository at ``root``), or a
    path."""
    kind, _, ref = source.partition(":")
    if kind == "blob" and ref:
        data = subprocess.run(["git", "cat-file", "blob", ref], cwd=root, check=True, capture_output=True).stdout
    elif ref and len(kind) >= 7 and all(c in "0123456789abcdef" for c in kind):
        data = subprocess.run(["git", "show", source], cwd=root, check=True, capture_output=True).stdout
    else:
        data = Path(source).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return [JobResult.from_dict(json.loads(line)) for line in data.decode("utf-8").splitlines() if line.strip()]


def measure(pairs: Sequence[dict], root: Path) -> dict:
    """The table for ``pairs`` (``{"a": SOURCE, "b": SOURCE, "classes": ["fixed", "autotuned"]}`` each)."""
    per_class: dict[tuple, list[tuple[int, tuple, float]]] = {}
    device = {}
    for i, p in enumerate(pairs):
        run_a, run_b = read_source(p["a"], root), read_source(p["b"], root)
        for k, same, tuned, d in pair_changes(run_a, run_b):
            if ("autotuned" if tuned else "fixed") not in p["classes"]:
                continue
            name = run_a[0].env.device_name
            device[i] = name
            per_class.setdefault((name, same, tuned), []).append((i, k, d))
    floors = []
    for (name, same, tuned), rows in sorted(per_class.items()):
        worst = max(rows, key=lambda r: abs(r[2]))
        held_out = []
        for i in sorted({r[0] for r in rows}):
            rest = [abs(r[2]) for r in rows if r[0] != i]
            mine = max(abs(r[2]) for r in rows if r[0] == i)
            held_out.append({"pair": i, "largest_log": round(mine, 6),
                             "floor_without_it_log": round(max(rest), 6) if rest else None,
                             "within": bool(rest) and mine <= max(rest)})
        floors.append({"device_name": name, "same_machine": same, "autotuned": tuned,
                       "half_width_log": round(abs(worst[2]), 6), "n_pairs": len({r[0] for r in rows}),
                       "n_workloads": len(rows), "worst": {"pair": worst[0], "candidate": worst[1][1],
                                                           "workload": worst[1][2]},
                       "leave_one_pair_out": held_out})
    return {"schema": SCHEMA, "statistic": "largest |log(E_lib_a / E_lib_b)| between two runs of identical code, "
            "per (device model, same machine or not, autotuned or not)", "pairs": list(pairs), "floors": floors}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.report.noise",
                                 description="Measure the run-to-run noise floor table from the pairs it names.")
    ap.add_argument("table", type=Path, help="the table (its 'pairs' are the recipe), e.g. harness/report/noise_floor.json")
    ap.add_argument("--check", action="store_true", help="measure again and exit 1 if it differs (writes nothing)")
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2],
                    help="the repository that COMMIT:PATH sources are read from (default: this checkout)")
    args = ap.parse_args(argv)
    old = json.loads(args.table.read_text(encoding="utf-8"))
    new = measure(old["pairs"], args.root)
    if args.check:
        same = new["floors"] == old["floors"]
        print(f"{args.table}: {'as measured' if same else 'differs from a new measurement'}")
        return 0 if same else 1
    args.table.write_text(json.dumps(new, indent=1) + "\n", encoding="utf-8")
    for f in new["floors"]:
        print(json.dumps({k: f[k] for k in ("device_name", "same_machine", "autotuned", "half_width_log", "n_pairs")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
