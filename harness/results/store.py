"""Append-only results store: ``<out>/results.jsonl``, one :class:`JobResult` per line.

Written by the runner only, one locked+fsynced line per record, so a killed
run loses at most the record in flight and two runs appending to the same
file never interleave. ``--resume`` reads the job ids already present and
skips them. Reading never drops a valid record because of a bad line: bad
lines are reported with file and line number.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterable

from harness.jsonio import append_jsonl, read_jsonl
from harness.records import JobResult

RESULTS_NAME = "results.jsonl"

EntryKey = tuple[str, str, str, str, str, str]


def entry_key(r: JobResult) -> EntryKey:
    """What makes two records the same entry: (generator, version, candidate, problem, workload, job_id).

    A later record with the same key supersedes an earlier one (a rerun) in
    leaderboards, comparisons and ``export --latest``; any difference, the
    generator version included, makes a separate entry. The job id alone is
    not enough: an unchanged file submitted as ``gen@1`` and ``gen@2`` may
    share one, and neither version's record may hide the other's.
    """
    return (r.generator, r.generator_version, r.candidate, r.problem_id, r.workload, r.job_id)


def _warn(path: Path, lineno: int, msg: str) -> None:
    print(f"warning: {msg}", file=sys.stderr)


def results_path(out_dir: str | Path) -> Path:
    p = Path(out_dir)
    return p if p.suffix == ".jsonl" or p.name.endswith(".jsonl.gz") else p / RESULTS_NAME


def load_results(paths: str | Path | Iterable[str | Path]) -> list[JobResult]:
    """Every valid record of one or more results files or folders, in file order."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    out: list[JobResult] = []
    for p in paths:
        rp = results_path(p)
        if not rp.exists():
            raise FileNotFoundError(f"{rp}: no results file; run 'kernelgate run' first or pass --results PATH")
        for lineno, d in enumerate(read_jsonl(rp, on_bad_line=_warn), start=1):
            try:
                out.append(JobResult.from_dict(d))
            except (ValueError, KeyError, TypeError) as exc:
                _warn(rp, lineno, f"{rp}: record {lineno} does not match the result schema ({exc}); skipped")
    return out


class ResultStore:
    def __init__(self, out_dir: str | Path):
        self.path = results_path(out_dir)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def done_job_ids(self) -> set[str]:
        if not self.path.exists():
            return set()
        return {d["job_id"] for d in read_jsonl(self.path, on_bad_line=_warn) if "job_id" in d}

    def append(self, result: JobResult) -> None:
        append_jsonl(self.path, result.to_dict())

    def load(self) -> list[JobResult]:
        return load_results(self.path) if self.path.exists() else []
