"""Turn a submission folder into a list of candidates, without importing any of them.

Layout of a submission folder::

    my-generator-v3/
      manifest.json          # optional: {"generator": "...", "version": "...", "notes": "...", "dsl": "triton",
                             #            "map": {"level_1_problem_19_sample_0_kernel.py": "19_ReLU"}}
      layernorm.py           # candidate for problem 'layernorm'
      layernorm__v2.py       # a second candidate for the same problem
      level_1_problem_19_sample_0_kernel.py   # KernelBench run output: level 1, problem 19

Which problem a file is for is decided by :mod:`harness.candidates.naming`:
the longest loaded problem id the stem starts with (then nothing or
``__<variant>``), KernelBench run-file names with their level, or a map. A
file that maps nowhere is still listed, with :attr:`Candidate.mapping_error`
naming the closest ids. Files in subfolders are refused with a message
naming the subfolders unless ``recursive=True`` (then a ``levelL/`` subfolder
also gives the level to names that lack one).

A file that is an LLM's Markdown reply has its ```python fence extracted
(:mod:`harness.candidates.fences`); :attr:`Candidate.source` is the code to
execute and :attr:`Candidate.sha256` is its hash.

Candidates are untrusted: this module only reads their bytes and parses them
with :mod:`ast` to guess the DSL.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from harness.candidates.fences import extract_source
from harness.candidates.naming import ProblemIndex, match_file

MANIFEST_NAMES = ("manifest.json", "kernelgate.json")
_DSL_HEADER = re.compile(r"^#\s*kernelgate:\s*dsl\s*=\s*(\w+)", re.M)
DSLS = ("triton", "tilelang", "torch", "unknown")
_MANIFEST_FIELDS = {"generator", "version", "notes", "dsl", "map"}


class SubmissionError(ValueError):
    """A submission folder or manifest that cannot be used (names file and fix)."""


@dataclass(frozen=True, slots=True)
class Manifest:
    generator: str
    version: str
    notes: str = ""
    dsl: str | None = None
    map: dict[str, str] = field(default_factory=dict)
    """File name, stem or ``"LEVEL/NUMBER"`` -> problem id, for files whose names say neither."""

    def to_dict(self) -> dict:
        return {"generator": self.generator, "version": self.version, "notes": self.notes, "dsl": self.dsl,
                "map": dict(self.map)}


@dataclass(frozen=True, slots=True)
class Candidate:
    """One candidate file as seen from the trusted side (never imported here).

    ``source`` is the code the worker must execute (the file's text, or the
    code extracted from a Markdown reply) and ``sha256`` is the hash of its
    UTF-8 bytes: write ``source`` into the worker's scratch folder and run that
    file, so what is hashed is what runs.
    """

    path: Path
    rel_path: str
    problem_id: str
    variant: str
    dsl: str
    sha256: str
    """sha256 of ``source`` encoded as UTF-8 (equals the file's hash unless code was extracted)."""
    generator: str
    generator_version: str
    source: str = ""
    file_sha256: str = ""
    """sha256 of the file's bytes as found on disk."""
    extraction: str = ""
    """Empty for a plain Python file; else what was extracted from a Markdown reply, from which lines (copy it
    into the record's warnings)."""
    source_error: str | None = None
    """Why no runnable code could be taken from the file (not UTF-8, a reply without a Python fence, ...):
    the candidate is INVALID_CANDIDATE / COMPILE_ERROR without running."""
    mapping_error: str | None = None
    """Why the file maps to no loaded problem (with "did you mean"); ``problem_id`` is then the file stem."""
    mapped_by: str = ""
    """How ``problem_id`` was found: ``id``, ``kernelbench run file``, ``map`` or ``unmatched``."""
    level: int | None = None
    """The KernelBench level the file's name or folder states, when it states one."""

    @property
    def name(self) -> str:
        return self.rel_path


def _string_map(raw: object, where: str) -> dict[str, str]:
    if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
        raise SubmissionError(f"{where}: must map file names or 'LEVEL/NUMBER' to problem ids, e.g. "
                              '{"level_1_problem_19_sample_0_kernel.py": "19_ReLU"} or {"1/19": "19_ReLU"}')
    for key in raw:
        if "/" in key and not re.fullmatch(r"\d+/\d+", key):
            raise SubmissionError(f"{where}: key '{key}' must be a file name, a file stem or 'LEVEL/PROBLEM' like '1/19'")
    return dict(raw)


def read_manifest(folder: Path) -> Manifest:
    """Read the folder's manifest; without one, the folder name is the generator."""
    for name in MANIFEST_NAMES:
        mpath = folder / name
        if not mpath.exists():
            continue
        try:
            data = json.loads(mpath.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise SubmissionError(f"{mpath}: cannot be read ({exc})") from None
        except json.JSONDecodeError as exc:
            raise SubmissionError(f"{mpath}:{exc.lineno}: invalid JSON ({exc.msg}); "
                                  'expected {"generator": "...", "version": "..."}') from None
        if not isinstance(data, dict):
            raise SubmissionError(f"{mpath}: must be a JSON object with 'generator' and 'version'")
        unknown = set(data) - _MANIFEST_FIELDS
        if unknown:
            raise SubmissionError(f"{mpath}: unknown field(s) {sorted(unknown)}; allowed: {', '.join(sorted(_MANIFEST_FIELDS))}")
        for key in ("generator", "version"):
            if key in data and not isinstance(data[key], (str, int, float)):
                raise SubmissionError(f"{mpath}: field '{key}' must be a string")
        dsl = data.get("dsl")
        if dsl is not None and dsl not in DSLS:
            raise SubmissionError(f"{mpath}: field 'dsl' is '{dsl}'; expected one of {DSLS}")
        mapping = _string_map(data["map"], f"{mpath}: field 'map'") if "map" in data else {}
        return Manifest(str(data.get("generator", folder.name)), str(data.get("version", "0")),
                        str(data.get("notes", "")), dsl, mapping)
    return Manifest(folder.name, "0")


def detect_dsl(source: str) -> str:
    """Which DSL a candidate uses: a ``# kernelgate: dsl=...`` header wins, else the kernels it defines, else its imports.

    One rule for discovery and the lint: :func:`harness.candidates.dsl.detect_dsl`.
    """
    from harness.candidates.dsl import detect_dsl as shared_detect_dsl

    return shared_detect_dsl(source)


def load_kernelbench_map(spec: str | None) -> dict[str, str]:
    """``--kernelbench-map``: a JSON file mapping file names, stems or ``"LEVEL/NUMBER"`` to problem ids.

    ``auto`` (or nothing) gives ``{}``: KernelBench run-file names are mapped
    by their level and number without a map.
    """
    if not spec or spec == "auto":
        return {}
    path = Path(spec)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SubmissionError(f"--kernelbench-map {path}: cannot be read as JSON ({exc}); "
                              'expected {"1/19": "19_ReLU", "my_relu.py": "19_ReLU", ...}') from None
    return _string_map(raw, f"--kernelbench-map {path}")


def _is_hidden(rel: Path) -> bool:
    return any(part.startswith(("_", ".")) for part in rel.parts)


def candidate_files(folder: Path, *, recursive: bool) -> list[Path]:
    """The candidate files of a folder (``_*``/``.*`` files and folders skipped), sorted.

    Raises SubmissionError naming the subfolders that hold ``.py`` files when
    ``recursive`` is False: silently ignoring them would drop candidates.
    """
    nested = sorted(p for p in folder.rglob("*.py") if p.parent != folder and not _is_hidden(p.relative_to(folder)))
    if nested and not recursive:
        subs: dict[str, int] = {}
        for p in nested:
            top = p.relative_to(folder).parts[0]
            subs[top] = subs.get(top, 0) + 1
        shown = ", ".join(f"{k}/ ({v} file{'s' if v > 1 else ''})" for k, v in sorted(subs.items())[:6])
        more = f" and {len(subs) - 6} more" if len(subs) > 6 else ""
        raise SubmissionError(f"{folder}: candidate files in subfolders {shown}{more} would not be evaluated; pass "
                              "each subfolder as its own submission folder, or recurse into them (--recursive)")
    top = sorted(p for p in folder.glob("*.py") if not p.name.startswith(("_", ".")))
    return sorted(top + nested) if recursive else top


def _read_source(path: Path) -> tuple[bytes, str, str, str | None]:
    """(file bytes, code to execute, extraction note, error) of one candidate file."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return data, data.decode("utf-8", errors="replace"), "", (
            f"not UTF-8 text (byte {exc.start}: {exc.reason}); save the candidate as UTF-8")
    ext = extract_source(text)
    return data, ext.source, ext.note, ext.error


def discover(folder: str | Path, *, kernelbench_map: str | None = None, problem_ids: list[str] | None = None,
             levels: dict[str, int | None] | None = None, recursive: bool = False) -> tuple[Manifest, list[Candidate]]:
    """List the candidates of one submission folder (sorted, stable).

    ``levels`` (``Registry.levels()``: problem id -> KernelBench level or None)
    is what naming matches against; ``problem_ids`` is the older form without
    levels (only KernelBench's own ids then have one, from the checked-in map). Raises
    SubmissionError for a missing folder, a bad manifest or map, or (unless
    ``recursive``) files in subfolders; a single file that maps nowhere or
    holds no runnable code is listed with ``mapping_error``/``source_error``.
    """
    from harness.problems.kernelbench import folder_level

    folder = Path(folder)
    if not folder.is_dir():
        raise SubmissionError(f"{folder}: not a folder; pass a submission folder holding candidate .py files")
    manifest = read_manifest(folder)
    mapping = {**manifest.map, **load_kernelbench_map(kernelbench_map)}
    if levels is None:  # ids only: KernelBench's own ids still have their level (the checked-in map)
        from harness.problems.categories import sidecar_entry

        levels = {pid: (sidecar_entry(pid) or {}).get("level") for pid in problem_ids or []}
    index = ProblemIndex(levels)
    out: list[Candidate] = []
    seen: dict[tuple[str, str], str] = {}
    for path in candidate_files(folder, recursive=recursive):
        rel = path.relative_to(folder).as_posix()
        data, source, note, source_error = _read_source(path)
        m = match_file(path, index, mapping=mapping or None,
                       folder_level=folder_level(path.parent) if path.parent != folder else None)
        mapping_error = m.error
        key = (m.problem_id, m.variant)
        if mapping_error is None and key in seen:
            mapping_error = (f"'{rel}' is problem '{m.problem_id}' variant '{m.variant or '(none)'}', like "
                             f"'{seen[key]}'; rename one (ID__VARIANT.py) so results are not mixed up")
        seen.setdefault(key, rel)
        dsl = manifest.dsl if manifest.dsl and not _DSL_HEADER.search(source) else detect_dsl(source)
        out.append(Candidate(
            path=path.resolve(), rel_path=f"{folder.name}/{rel}", problem_id=m.problem_id, variant=m.variant, dsl=dsl,
            sha256=hashlib.sha256(source.encode("utf-8")).hexdigest(), generator=manifest.generator,
            generator_version=manifest.version, source=source, file_sha256=hashlib.sha256(data).hexdigest(),
            extraction=note, source_error=source_error, mapping_error=mapping_error, mapped_by=m.how, level=m.level,
        ))
    return manifest, out
