"""Static diagnosis of candidate kernels: authoring defects and reward hacks.

* :mod:`harness.diagnose.lint` -- slow-by-construction patterns in Triton /
  TileLang candidates (``lint_source``, ``lint_cuda_source``, ``lint_path``);
  a package: a rule registry, one module per DSL, host code and lowered CUDA;
* :mod:`harness.diagnose.anticheat` -- static screening for reward hacks
  (``scan_source``);
* :mod:`harness.diagnose.findings` -- the shared :class:`Finding` record and
  ``format_findings``.

Both analyzers read source text with ``ast`` only; they never import or run
candidate code. ``detect_dsl`` is :func:`harness.candidates.dsl.detect_dsl`,
the label discovery uses too. Importing this package does no work: the names below are
loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "Finding",
    "detect_dsl",
    "format_findings",
    "lint_cuda_source",
    "lint_path",
    "lint_source",
    "scan_source",
]

_LOCATIONS = {
    "Finding": "findings",
    "format_findings": "findings",
    "detect_dsl": "lint",  # re-exported from harness.candidates.dsl
    "lint_cuda_source": "lint",
    "lint_path": "lint",
    "lint_source": "lint",
    "scan_source": "anticheat",
}


def __getattr__(name: str) -> Any:
    if name in _LOCATIONS:
        module = importlib.import_module(f"{__name__}.{_LOCATIONS[name]}")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
