"""Turn a submission folder into a list of candidates, without importing any of them.

Layout of a submission folder::

    my-generator-v3/
      manifest.json          # optional: {"generator": "...", "version": "...", "notes": "...", "dsl": "triton"}
      layernorm.py           # candidate for problem 'layernorm'
      layernorm__v2.py       # a second candidate for the same problem
      level_1_problem_19_sample_0_kernel.py   # KernelBench run output (needs --kernelbench-map)

A candidate's problem id is its file stem up to the first ``__``. KernelBench
run files are mapped with ``--kernelbench-map``: ``auto`` matches
``level_L_problem_N`` to the problem whose id starts with ``N_`` (the names in
KernelBench's ``levelL/`` folders), or a JSON file maps ``"L/N"`` to an id.

Candidates are untrusted: this module only reads their bytes and parses them
with :mod:`ast` to guess the DSL.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

MANIFEST_NAMES = ("manifest.json", "kernelgate.json")
_KB_RE = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)(?:_kernel)?$")
_DSL_HEADER = re.compile(r"^#\s*kernelgate:\s*dsl\s*=\s*(\w+)", re.M)
DSLS = ("triton", "tilelang", "torch", "unknown")


class SubmissionError(ValueError):
    """A submission folder or manifest that cannot be used (names file and fix)."""


@dataclass(frozen=True, slots=True)
class Manifest:
    generator: str
    version: str
    notes: str = ""
    dsl: str | None = None

    def to_dict(self) -> dict:
        return {"generator": self.generator, "version": self.version, "notes": self.notes, "dsl": self.dsl}


@dataclass(frozen=True, slots=True)
class Candidate:
    """One candidate file as seen from the trusted side (never imported here)."""

    path: Path
    rel_path: str
    problem_id: str
    variant: str
    dsl: str
    sha256: str
    generator: str
    generator_version: str

    @property
    def name(self) -> str:
        return self.rel_path


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
        unknown = set(data) - {"generator", "version", "notes", "dsl"}
        if unknown:
            raise SubmissionError(f"{mpath}: unknown field(s) {sorted(unknown)}; allowed: generator, version, notes, dsl")
        for key in ("generator", "version"):
            if key in data and not isinstance(data[key], (str, int, float)):
                raise SubmissionError(f"{mpath}: field '{key}' must be a string")
        dsl = data.get("dsl")
        if dsl is not None and dsl not in DSLS:
            raise SubmissionError(f"{mpath}: field 'dsl' is '{dsl}'; expected one of {DSLS}")
        return Manifest(str(data.get("generator", folder.name)), str(data.get("version", "0")),
                        str(data.get("notes", "")), dsl)
    return Manifest(folder.name, "0")


def detect_dsl(source: str) -> str:
    """Which DSL a candidate uses: a ``# kernelgate: dsl=...`` header wins, else the kernels it defines, else its imports.

    One rule for discovery and the lint: :func:`harness.candidates.dsl.detect_dsl`.
    """
    from harness.candidates.dsl import detect_dsl as shared_detect_dsl

    return shared_detect_dsl(source)


def load_kernelbench_map(spec: str | None, problem_ids: list[str]) -> dict[tuple[int, int], str]:
    """Map (level, problem number) -> problem id for KernelBench run files."""
    if not spec:
        return {}
    if spec == "auto":
        out: dict[tuple[int, int], str] = {}
        for pid in problem_ids:
            m = re.match(r"^(\d+)_", pid)
            if m:
                out[(0, int(m.group(1)))] = pid
        return out
    path = Path(spec)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SubmissionError(f"--kernelbench-map {path}: cannot be read as JSON ({exc}); "
                              'expected {"1/19": "layernorm", ...}') from None
    out = {}
    for key, pid in raw.items():
        m = re.match(r"^(\d+)/(\d+)$", key)
        if not m:
            raise SubmissionError(f"--kernelbench-map {path}: key '{key}' must look like 'LEVEL/PROBLEM', e.g. '1/19'")
        out[(int(m.group(1)), int(m.group(2)))] = str(pid)
    return out


def problem_id_for(stem: str, kb_map: dict[tuple[int, int], str]) -> tuple[str, str]:
    """(problem id, variant) for a candidate file stem."""
    m = _KB_RE.match(stem)
    if m and kb_map:
        level, num, sample = (int(g) for g in m.groups())
        pid = kb_map.get((level, num)) or kb_map.get((0, num))
        if pid:
            return pid, f"sample{sample}"
    if "__" in stem:
        pid, variant = stem.split("__", 1)
        return pid, variant
    return stem, ""


def discover(folder: str | Path, *, kernelbench_map: str | None = None, problem_ids: list[str] | None = None) -> tuple[Manifest, list[Candidate]]:
    """List the candidates of one submission folder (sorted, stable)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise SubmissionError(f"{folder}: not a folder; pass a submission folder holding candidate .py files")
    manifest = read_manifest(folder)
    kb_map = load_kernelbench_map(kernelbench_map, problem_ids or [])
    out = []
    for path in sorted(folder.glob("*.py")):
        if path.name.startswith(("_", ".")):
            continue
        data = path.read_bytes()
        text = data.decode("utf-8", errors="replace")
        pid, variant = problem_id_for(path.stem, kb_map)
        dsl = manifest.dsl if manifest.dsl and not _DSL_HEADER.search(text) else detect_dsl(text)
        out.append(Candidate(
            path=path.resolve(), rel_path=f"{folder.name}/{path.name}", problem_id=pid, variant=variant, dsl=dsl,
            sha256=hashlib.sha256(data).hexdigest(), generator=manifest.generator, generator_version=manifest.version,
        ))
    return manifest, out
