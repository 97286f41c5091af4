"""Hugging Face ``datasets`` export of problems and results, and import of KernelBench-layout data.

Export (:func:`export_hf`) writes plain parquet files that ``datasets`` (or
pandas, DuckDB, ...) reads back, plus a dataset card whose ``configs`` let
``datasets.load_dataset(out_dir, "problems")`` find them::

    out_dir/problems.parquet   one row per problem: id, category, code, workloads (JSON), library_op,
                               flops / bytes per workload (JSON), version, ...
    out_dir/results.parquet    one row per JobResult, nested records flattened to columns
    out_dir/README.md          dataset card

Import (:func:`import_kernelbench`) turns a local KernelBench-layout dataset
(columns ``code``, ``level``, ``name``, ``problem_id``; a parquet, JSON lines
or arrow file, or a ``save_to_disk`` folder) into one problem file per row.
Plain KernelBench files load without metadata (FLOPs and bytes are derived),
so the code is written unchanged. Nothing here touches the network.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Iterable, Iterator

from harness.jsonio import atomic_write_text, dumps
from harness.problems.loader import Problem
from harness.records import JobResult

CARD = """\
---
configs:
- config_name: problems
  data_files: problems.parquet
{results_config}---

# KernelGate export

Written by `kernelgate export --format hf`. `problems`: one row per problem (source code in `code`, workloads,
FLOPs and minimum bytes per workload as JSON). {results_text}

Load with `datasets.load_dataset("{name}", "problems")` from this folder, or read the parquet files directly.
"""


def _problem_row(p: Problem, root: Path | None) -> dict:
    try:
        rel = str(p.path.relative_to(root)) if root else p.path.name
    except ValueError:
        rel = p.path.name
    return {
        "id": p.id, "category": p.category, "file": rel, "code": p.path.read_text(encoding="utf-8"),
        "description": p.description, "library_op": p.library_op, "library_aten": list(p.library_aten),
        "input_transform": p.input_transform, "in_place": p.in_place, "derived": p.derived,
        "workloads": dumps([w.to_dict() for w in p.workloads]),
        "flops": dumps({w.name: w.flops for w in p.workloads}),
        "bytes": dumps({w.name: w.min_bytes for w in p.workloads}),
        "version": p.version, "source_sha256": p.source_sha256,
    }


def _f(x: object) -> float | None:
    return None if x is None else float(x)  # type: ignore[arg-type]


_NESTED = ("env", "error", "correctness", "timing", "library_timing", "screening")


def flatten_result(r: JobResult) -> dict:
    """One JobResult as flat columns (nested records prefixed by their field name, lists kept as lists).

    Top-level scalar fields are copied generically, so a field added to
    :class:`JobResult` later becomes a column without a change here.
    """
    row: dict = {}
    for k, v in r.to_dict().items():
        if k in _NESTED:
            continue
        if k == "diagnostics":
            row[k] = dumps(list(v))
        elif k == "warnings":
            row[k] = list(v)
        else:
            row[k] = v
    for k, v in r.env.to_dict().items():
        row[f"env_{k}"] = v
    e = r.error
    row.update(error_type=e.type if e else None, error_message=e.message if e else None,
               error_traceback_tail=e.traceback_tail if e else None)
    c = r.correctness
    row.update(correctness_rounds_run=c.rounds_run if c else None, correctness_rounds_passed=c.rounds_passed if c else None,
               correctness_max_abs_err=_f(c.max_abs_err) if c else None,
               correctness_max_excess=_f(c.max_excess) if c else None, correctness_atol=_f(c.atol) if c else None,
               correctness_rtol=_f(c.rtol) if c else None, correctness_failed_round=c.failed_round if c else None,
               correctness_detail=c.detail if c else None)
    for prefix, t in (("timing", r.timing), ("library_timing", r.library_timing)):
        row.update({f"{prefix}_median_ms": _f(t.median_ms) if t else None, f"{prefix}_iqr_ms": _f(t.iqr_ms) if t else None,
                    f"{prefix}_min_ms": _f(t.min_ms) if t else None, f"{prefix}_mean_ms": _f(t.mean_ms) if t else None,
                    f"{prefix}_samples_ms": [float(x) for x in t.samples_ms] if t else None,
                    f"{prefix}_timer": t.timer if t else None, f"{prefix}_l2_flush": t.l2_flush if t else None})
    s = r.screening
    row.update({f"screening_{k}": (_f(getattr(s, k)) if s else None)
                for k in ("e_lib", "u_roof", "u_roof_library", "t_floor_ms", "tau_lib", "tau_roof")})
    row.update(screening_bound=s.bound if s else None, screening_ceiling_name=s.ceiling_name if s else None,
               screening_verdict=s.verdict.value if s else None, screening_borderline=s.borderline if s else None,
               screening_reason=s.reason if s else None)
    return row


def _result_features(rows: list[dict]):
    """Column types: declared for the known columns, inferred from the values for any newer top-level field."""
    from datasets import Features, List, Value

    s, i, f, b = Value("string"), Value("int64"), Value("float64"), Value("bool")
    cols = {
        "job_id": s, "run_id": s, "candidate": s, "candidate_sha256": s, "generator": s, "generator_version": s,
        "problem_id": s, "category": s, "workload": s, "dtype": s, "dsl": s, "status": s, "flops": i, "min_bytes": i,
        "created_at": s, "problem_version": s, "schema_version": i, "warnings": List(s), "diagnostics": s,
        "env_device_kind": s, "env_device_name": s, "env_device_uuid": s, "env_driver": s, "env_python": s,
        "env_torch": s, "env_triton": s, "env_tilelang": s, "env_harness": s, "env_sandbox": s,
        "env_sm_clock_mhz": i, "env_mem_clock_mhz": i,
        "error_type": s, "error_message": s, "error_traceback_tail": s,
        "correctness_rounds_run": i, "correctness_rounds_passed": i, "correctness_max_abs_err": f,
        "correctness_max_excess": f, "correctness_atol": f, "correctness_rtol": f, "correctness_failed_round": i,
        "correctness_detail": s,
        "screening_e_lib": f, "screening_u_roof": f, "screening_u_roof_library": f, "screening_t_floor_ms": f,
        "screening_tau_lib": f, "screening_tau_roof": f, "screening_bound": s, "screening_ceiling_name": s,
        "screening_verdict": s, "screening_borderline": b, "screening_reason": s,
    }
    for prefix in ("timing", "library_timing"):
        cols.update({f"{prefix}_median_ms": f, f"{prefix}_iqr_ms": f, f"{prefix}_min_ms": f, f"{prefix}_mean_ms": f,
                     f"{prefix}_samples_ms": List(f), f"{prefix}_timer": s, f"{prefix}_l2_flush": b})
    for row in rows:
        for k, v in row.items():
            if k not in cols and v is not None:
                cols[k] = b if isinstance(v, bool) else i if isinstance(v, int) else f if isinstance(v, float) else s
    for row in rows:
        for k in row:
            cols.setdefault(k, s)  # only None seen
    for row in rows:  # a newer field stored as text when its type could not be declared
        for k, v in row.items():
            if cols[k] == s and v is not None and not isinstance(v, str):
                row[k] = dumps(v)
    return Features(cols)


def _problem_features():
    from datasets import Features, List, Value

    s = Value("string")
    return Features({"id": s, "category": s, "file": s, "code": s, "description": s, "library_op": s,
                     "library_aten": List(s), "input_transform": s, "in_place": Value("bool"),
                     "derived": Value("bool"), "workloads": s, "flops": s, "bytes": s, "version": s,
                     "source_sha256": s})


def export_hf(registry: Iterable[Problem], results: list[JobResult] | None, out_dir: str | os.PathLike) -> dict[str, Path]:
    """Write ``problems.parquet`` (and ``results.parquet`` when ``results`` is given) plus a card into ``out_dir``.

    Returns ``{"problems": path, "results": path, "card": path}`` (``results``
    only when written). Results are written as given, every record (pass the
    output of :func:`harness.report.metrics.latest_records` for one per job).
    """
    from datasets import Dataset

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    problems = list(registry)
    if not problems:
        raise ValueError("no problems to export (the registry is empty; check --problems)")
    root = os.path.commonpath([str(p.path.parent) for p in problems])
    rows = [_problem_row(p, Path(root)) for p in problems]
    paths: dict[str, Path] = {}
    paths["problems"] = _to_parquet(Dataset.from_list(rows, features=_problem_features()), out / "problems.parquet")
    if results is not None:
        rrows = [flatten_result(r) for r in results]
        ds = Dataset.from_list(rrows, features=_result_features(rrows))
        paths["results"] = _to_parquet(ds, out / "results.parquet")
    card = CARD.format(
        results_config="- config_name: results\n  data_files: results.parquet\n" if results is not None else "",
        results_text=(f"`results`: {len(results)} result record(s), one per (candidate, workload), nested fields "
                      "flattened (`timing_samples_ms` keeps every raw sample)." if results is not None else ""),
        name=out.name or str(out))
    atomic_write_text(out / "README.md", card)
    paths["card"] = out / "README.md"
    return paths


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """No ``datasets`` progress bars inside (restored afterwards): the CLI prints its own summary."""
    from datasets.utils import logging as dlog

    was_enabled = dlog.is_progress_bar_enabled()
    dlog.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            dlog.enable_progress_bar()


def _to_parquet(ds, path: Path) -> Path:
    """Write a parquet file atomically (temp name in the same folder, then rename)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with _quiet():
            ds.to_parquet(str(tmp))
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


# --------------------------------------------------------------------------- import

_KB_COLUMNS = ("code", "level", "name", "problem_id")


def _load_any(path: Path):
    """A local dataset file or folder as one ``datasets.Dataset`` (all splits concatenated).

    Parquet and JSON files are read into memory through a throw-away cache
    folder, so importing leaves nothing in the user's Hugging Face cache.
    """
    import tempfile

    import datasets

    if path.is_dir():
        obj = datasets.load_from_disk(str(path))
        if isinstance(obj, datasets.DatasetDict):
            return datasets.concatenate_datasets([obj[k] for k in sorted(obj)]) if len(obj) else None
        return obj
    suffix = "".join(path.suffixes[-2:]) if path.suffix == ".gz" else path.suffix
    if suffix in (".parquet", ".jsonl", ".json", ".jsonl.gz", ".json.gz"):
        reader = datasets.Dataset.from_parquet if suffix == ".parquet" else datasets.Dataset.from_json
        with tempfile.TemporaryDirectory(prefix="kernelgate-import-") as cache, _quiet():
            return reader(str(path), cache_dir=cache, keep_in_memory=True)
    if suffix == ".arrow":
        return datasets.Dataset.from_file(str(path))
    raise ValueError(f"{path}: unsupported format '{suffix}'; expected .parquet, .jsonl/.json, .arrow or a "
                     "datasets.save_to_disk folder")


_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def sanitize(name: str) -> str:
    """A file stem that is also a valid problem id: each run of characters other than letters, digits, '_'
    and '-' becomes one '_' and leading '_' go (a stem starting with '_' is skipped as private); everything
    else is kept (KernelBench ids end in '_' and contain '__', and those are part of the id)."""
    return _UNSAFE.sub("_", name).lstrip("_") or "problem"


_LEVEL_DIR = re.compile(r"^level[_-]?\d+$", re.IGNORECASE)


def _stem(row: dict) -> str:
    if "name" in row and "problem_id" in row and row["name"] is not None:
        name = str(row["name"])
        name = name[:-3] if name.endswith(".py") else name
        pid = str(row["problem_id"])
        return sanitize(name if name.startswith(f"{pid}_") else f"{pid}_{name}")
    return sanitize(str(row["id"]))


def import_kernelbench(path: str | os.PathLike, out_dir: str | os.PathLike, *, level: int | None = None) -> list[Path]:
    """Write one problem file per row of a local KernelBench-layout dataset; return the paths written.

    File names are ``<problem_id>_<name>.py`` (a ``name`` that already
    starts with ``<problem_id>_``, as KernelBench's do, is not prefixed twice),
    kept exactly as KernelBench spells them (trailing ``_`` and ``__``
    included); only characters a file stem cannot hold become ``_``. Rows of
    several levels go to ``out_dir/level<L>/`` so the ids of different levels
    never collide (KernelBench's own layout); a single level is written
    directly into ``out_dir`` with a ``kernelbench.json`` sidecar recording
    the level (:mod:`harness.problems.kernelbench`). ``level`` keeps only
    that level. A KernelGate ``problems.parquet`` export (columns ``id`` and
    ``code``) is accepted too, written as ``<id>.py``. Raises ValueError when
    a required column is missing or two rows map to the same file.
    """
    src = Path(path)
    if not src.exists():
        raise FileNotFoundError(f"{src}: no such file or folder")
    ds = _load_any(src)
    if ds is None or len(ds) == 0:
        raise ValueError(f"{src}: the dataset has no rows")
    cols = set(ds.column_names)
    kernelbench = {"code", "name", "problem_id"} <= cols
    if not kernelbench and not {"code", "id"} <= cols:
        raise ValueError(f"{src}: columns {sorted(cols)}; expected KernelBench's {list(_KB_COLUMNS)} "
                         "(or a KernelGate export's id, code)")
    rows = list(ds)
    if level is not None:
        if "level" not in cols:
            raise ValueError(f"{src}: no 'level' column to filter on")
        rows = [r for r in rows if r.get("level") is not None and int(r["level"]) == int(level)]
        if not rows:
            raise ValueError(f"{src}: no row has level {level}")
    levels = sorted({int(r["level"]) for r in rows if r.get("level") is not None}) if "level" in cols else []
    out = Path(out_dir)
    planned: dict[Path, int] = {}
    for i, r in enumerate(rows):
        folder = out / f"level{int(r['level'])}" if len(levels) > 1 and r.get("level") is not None else out
        target = folder / f"{_stem(r)}.py"
        if target in planned:
            raise ValueError(f"{src}: rows {planned[target]} and {i} both map to {target}; filter by level "
                             "(--level) or fix the names")
        planned[target] = i
    written = []
    for target, i in planned.items():
        code = rows[i]["code"]
        if not isinstance(code, str) or not code.strip():
            raise ValueError(f"{src}: row {i} ({target.name}) has no code")
        atomic_write_text(target, code)
        written.append(target)
    if len(levels) == 1 and not _LEVEL_DIR.match(out.name):
        # a flat single-level folder: record the level, so run files (level_L_problem_N_...) map by it
        from harness.problems.kernelbench import LEVEL_SIDECAR

        atomic_write_text(out / LEVEL_SIDECAR, dumps({"level": levels[0]}, indent=True) + "\n")
    return written


def read_parquet_rows(path: str | os.PathLike) -> list[dict]:
    """Rows of a parquet file written by :func:`export_hf` (JSON columns left as text)."""
    import pyarrow.parquet as pq

    return pq.read_table(str(path)).to_pylist()


__all__ = ["export_hf", "flatten_result", "import_kernelbench", "read_parquet_rows", "sanitize"]
