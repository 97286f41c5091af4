"""KernelBench facts about a problem file: its level and its problem number.

KernelBench ids (``19_ReLU``, ``50_conv_standard_2D__square_input__square_kernel``,
``1_Square_matrix_multiplication_``) are kept exactly as KernelBench spells
them: they may contain ``__`` and end in ``_``. The number before the first
``_`` is the problem number *within its level*, so ``(level, number)`` is what
a KernelBench run file (``level_2_problem_19_sample_0_kernel.py``) names, and a
problem's level must be known to map it. In order of precedence:

1. ``KERNELGATE["level"]`` in the file;
2. the folder the file is in: ``level1``, ``level_2``, ``level-3`` (KernelBench's layout);
3. a ``kernelbench.json`` sidecar in that folder: ``{"level": 2}`` for every file,
   or ``{"levels": {"19_ReLU": 1}}`` per id (``kernelgate export --import-kernelbench``
   writes one for a single-level import);
4. the checked-in map of KernelBench ids (:mod:`harness.problems.categories`), when
   the id is one of KernelBench's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from harness.problems.categories import sidecar_entry

LEVEL_DIR = re.compile(r"^level[_-]?(\d+)$", re.IGNORECASE)
LEVEL_SIDECAR = "kernelbench.json"
_NUMBER = re.compile(r"^(\d+)_")


def problem_number(problem_id: str) -> int | None:
    """The KernelBench problem number (``19`` for ``19_ReLU``); None for an id without one."""
    m = _NUMBER.match(problem_id)
    return int(m.group(1)) if m else None


def folder_level(folder: Path) -> int | None:
    """``2`` for a folder named ``level2``/``level_2``/``level-2``, else None."""
    m = LEVEL_DIR.match(folder.name)
    return int(m.group(1)) if m else None


def _sidecar(folder: Path) -> dict:
    try:
        data = json.loads((folder / LEVEL_SIDECAR).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def problem_level(path: Path, problem_id: str, declared: object = None) -> tuple[int | None, str]:
    """(level, where it came from) for one problem file; (None, "") when nothing says.

    ``declared`` is ``KERNELGATE["level"]`` (validated by the caller).
    """
    if isinstance(declared, int) and not isinstance(declared, bool):
        return declared, "KERNELGATE['level']"
    level = folder_level(path.parent)
    if level is not None:
        return level, f"folder {path.parent.name}/"
    side = _sidecar(path.parent)
    per_id = side.get("levels", {})
    if isinstance(per_id, dict) and isinstance(per_id.get(problem_id), int):
        return per_id[problem_id], f"{LEVEL_SIDECAR} (levels)"
    if isinstance(side.get("level"), int):
        return side["level"], LEVEL_SIDECAR
    entry = sidecar_entry(problem_id)
    if entry and isinstance(entry.get("level"), int):
        return entry["level"], "KernelBench id"
    return None, ""
