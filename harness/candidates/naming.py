"""Which problem a candidate file is for: its name against the loaded problems, with levels.

Rules, first match wins (each gives the problem id and a variant name):

1. A map entry (``--kernelbench-map FILE`` or the manifest's ``"map"``) keyed by
   the file name (``level_1_problem_19_sample_0_kernel.py``), its stem, or
   ``"LEVEL/NUMBER"`` (``"1/19"``).
2. The longest known problem id that the stem equals, or that is followed by
   ``__<variant>``: ``50_conv_standard_2D__square_input__square_kernel__v2``
   is problem ``50_conv_standard_2D__square_input__square_kernel``, variant
   ``v2`` (KernelBench ids contain ``__`` and end in ``_``, so splitting at the
   first ``__`` is wrong).
3. KernelBench run-file names, mapped with their level: a level-2 file never
   maps to a level-1 problem, and the problem's level must be known
   (:mod:`harness.problems.kernelbench`)::

       level_1_problem_19_sample_0_kernel.py   KernelBench's runs/ folders
       level_1_problem_19_solution_0_kernel.py  (solution instead of sample)
       level1_problem19_sample0.py              (compact spelling)
       problem_19_sample_0.py                   inside a levelL/ folder
       1_19.py, 1_19_2.py                       LEVEL_NUMBER[_K]

4. Otherwise the file is unmatched and gets an error naming the closest ids.

Without a list of known problems (``known`` empty) rule 2 falls back to the
stem up to its first ``__``, the only reading possible without the ids.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

_RUN_PATTERNS = (
    re.compile(r"^level_?(?P<level>\d+)_problem_?(?P<number>\d+)(?:_(?P<kind>sample|solution)_?(?P<sample>\d+))?"
               r"(?:_kernel)?$", re.IGNORECASE),
    re.compile(r"^problem_?(?P<number>\d+)(?:_(?P<kind>sample|solution)_?(?P<sample>\d+))?(?:_kernel)?$", re.IGNORECASE),
    re.compile(r"^(?P<level>\d+)_(?P<number>\d+)(?:_(?P<sample>\d+))?$"),
)
_NUMBER = re.compile(r"^(\d+)_")


@dataclass(frozen=True, slots=True)
class Match:
    """Where a candidate file maps: ``error`` is set (and ``problem_id`` is the stem) when it maps nowhere."""

    problem_id: str
    variant: str
    how: str
    """``map``, ``id`` or ``kernelbench run file``; ``unmatched`` with an error."""
    error: str | None = None
    level: int | None = None
    """The level the file's name (or folder) states, when it states one."""


class ProblemIndex:
    """The loaded problems as naming needs them: ids, and (level, number) -> id."""

    def __init__(self, levels: dict[str, int | None]):
        self.levels = dict(levels)
        self.ids = sorted(self.levels, key=len, reverse=True)
        self.by_number: dict[tuple[int | None, int], list[str]] = {}
        for pid, level in self.levels.items():
            m = _NUMBER.match(pid)
            if m:
                self.by_number.setdefault((level, int(m.group(1))), []).append(pid)

    def __bool__(self) -> bool:
        return bool(self.levels)

    def closest(self, stem: str, number: int | None = None, n: int = 3) -> list[str]:
        """Up to ``n`` known ids like ``stem``, by spelling, ids with the same problem number ranked up."""
        same = {pid for (_lvl, num), pids in self.by_number.items() if num == number for pid in pids}
        pool = same | set(difflib.get_close_matches(stem, list(self.levels), n=n, cutoff=0.4))
        score = lambda pid: difflib.SequenceMatcher(None, stem, pid).ratio() + (0.5 if pid in same else 0.0)
        return sorted(pool, key=lambda pid: (-score(pid), pid))[:n]


def _hint(ids: list[str]) -> str:
    return f"; did you mean {', '.join(repr(i) for i in ids)}?" if ids else ""


def _by_id(stem: str, index: ProblemIndex) -> Match | None:
    for pid in index.ids:  # longest first
        if stem == pid:
            return Match(pid, "", "id", level=index.levels[pid])
        if stem.startswith(pid + "__") and len(stem) > len(pid) + 2:
            return Match(pid, stem[len(pid) + 2:], "id", level=index.levels[pid])
    return None


def _by_run_name(stem: str, index: ProblemIndex, folder_level: int | None) -> Match | None:
    for pattern in _RUN_PATTERNS:
        m = pattern.match(stem)
        if not m:
            continue
        groups = m.groupdict()
        number = int(groups["number"])
        level = int(groups["level"]) if groups.get("level") else folder_level
        sample = groups.get("sample")
        prefix = "v" if pattern is _RUN_PATTERNS[2] else (groups.get("kind") or "sample").lower()
        variant = f"{prefix}{sample}" if sample is not None else ""
        if level is None:
            return Match(stem, variant, "unmatched", level=None, error=(
                f"'{stem}' names KernelBench problem {number} but no level; put the file in a levelL/ folder, name it "
                f"level_L_problem_{number}_..., or map it (--kernelbench-map){_hint(index.closest(stem, number))}"))
        pids = index.by_number.get((level, number), [])
        if len(pids) == 1:
            return Match(pids[0], variant, "kernelbench run file", level=level)
        if len(pids) > 1:
            return Match(stem, variant, "unmatched", level=level, error=(
                f"'{stem}': level {level} problem {number} is ambiguous: {sorted(pids)} are all loaded; map the file "
                "(--kernelbench-map)"))
        unknown_level = index.by_number.get((None, number), [])
        if unknown_level:
            return Match(stem, variant, "unmatched", level=level, error=(
                f"'{stem}' is for level {level} problem {number}, and {sorted(unknown_level)} has that number but no "
                "known level; load problems from KernelBench's levelL/ folders, or set KERNELGATE['level']"))
        loaded = sorted({lvl for (lvl, _num) in index.by_number if lvl is not None})
        return Match(stem, variant, "unmatched", level=level, error=(
            f"'{stem}' is for level {level} problem {number}, which is not loaded (levels loaded: "
            f"{', '.join(map(str, loaded)) or 'none with a known level'}); pass that level's folder to --problems"
            f"{_hint(index.closest(stem, number))}"))
    return None


def _map_key_candidates(path: Path, folder_level: int | None) -> list[str]:
    keys = [path.name, path.stem]
    for pattern in _RUN_PATTERNS:
        m = pattern.match(path.stem)
        if m:
            level = m.groupdict().get("level") or folder_level
            if level is not None:
                keys.append(f"{int(level)}/{int(m.group('number'))}")
            break
    return keys


def match_file(path: Path, index: ProblemIndex, *, mapping: dict[str, str] | None = None,
               folder_level: int | None = None) -> Match:
    """The problem ``path`` (a candidate file) is for, by the rules in the module docstring."""
    stem = path.stem
    for key in _map_key_candidates(path, folder_level) if mapping else ():
        if key in mapping:
            pid = mapping[key]
            if index and pid not in index.levels:
                return Match(stem, "", "unmatched", error=(f"the map sends '{key}' to '{pid}', which is not a loaded "
                                                          f"problem{_hint(index.closest(pid))}"))
            m = _by_run_name(stem, index, folder_level) if index else None
            variant = m.variant if m is not None and m.error is None else ("" if key.count("/") else stem)
            return Match(pid, variant if variant != pid else "", "map", level=index.levels.get(pid) if index else None)
    if not index:
        if "__" in stem:
            pid, variant = stem.split("__", 1)
            return Match(pid, variant, "id")
        return Match(stem, "", "id")
    found = _by_id(stem, index)
    if found is not None:
        return found
    found = _by_run_name(stem, index, folder_level)
    if found is not None:
        return found
    m = _NUMBER.match(stem)
    return Match(stem, "", "unmatched", error=(
        f"'{path.name}' matches no loaded problem: a candidate is named after a problem id ('ID.py' or "
        f"'ID__VARIANT.py'), a KernelBench run file (level_L_problem_N_sample_S_kernel.py) or an entry of "
        f"--kernelbench-map{_hint(index.closest(stem, int(m.group(1)) if m else None))}"))
