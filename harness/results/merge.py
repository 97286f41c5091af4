"""Combine results files into one, without duplicate records (``kernelgate merge``).

Records are kept in input order; a record already seen is dropped, where a
record is identified by (generator, generator_version, candidate, problem,
workload, job_id, created_at): the same job id under two generator versions
is two records, never a duplicate. Reruns of a job (same identity, later
created_at) are all kept, the leaderboard uses the latest. OUT is written
atomically.
"""

from __future__ import annotations

import sys
from pathlib import Path


def merge_results(inputs: list[str | Path], out: str | Path, *, force: bool = False) -> dict:
    """Merge results files (see EPILOG); return counts {files, read, written, duplicates, invalid, out}."""
    from harness.jsonio import atomic_write_text, dumps, read_jsonl
    from harness.records import JobResult
    from harness.results.store import entry_key, results_path

    out_path = results_path(out)
    in_paths = [results_path(p) for p in inputs]
    for p in in_paths:
        if not p.exists():
            raise FileNotFoundError(f"{p}: no results file")
    if out_path.exists() and not force and out_path.resolve() not in {p.resolve() for p in in_paths}:
        raise FileExistsError(f"{out_path} exists; list it as an input to merge into it, or pass --force to replace it")
    seen: set[tuple[str, ...]] = set()
    lines: list[str] = []
    counts = {"files": len(in_paths), "read": 0, "written": 0, "duplicates": 0, "invalid": 0, "out": str(out_path)}

    def bad(path, lineno, msg):
        counts["invalid"] += 1
        print(f"warning: {msg}", file=sys.stderr)

    for p in in_paths:
        for lineno, d in enumerate(read_jsonl(p, on_bad_line=bad), start=1):
            counts["read"] += 1
            try:
                rec = JobResult.from_dict(d)
            except (ValueError, KeyError, TypeError) as exc:
                bad(p, lineno, f"{p}: record {lineno} does not match the result schema ({exc}); skipped")
                continue
            key = (*entry_key(rec), rec.created_at)
            if key in seen:
                counts["duplicates"] += 1
                continue
            seen.add(key)
            lines.append(dumps(d))
    atomic_write_text(out_path, "".join(line + "\n" for line in lines))
    counts["written"] = len(lines)
    return counts
