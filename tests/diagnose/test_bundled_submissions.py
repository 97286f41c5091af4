"""The bundled submissions calibrate the linter: each known-slow kernel is named, the references are clean.

``submissions/defects/<problem>__<defect>.py`` are correct-but-slow kernels,
each reproducing one authoring defect; the suffix after ``__`` names it and
:data:`EXPECTED` maps it to the rules that may report it. A new defect file
must add its suffix here. Files whose name says ``structural`` or
``untuned`` are reasonably written kernels whose gap to the library is not an
authoring defect: they must get no ``defect`` finding, like every file in
``submissions/triton-reference`` and ``submissions/tilelang-reference``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.diagnose.findings import format_findings
from harness.diagnose.lint import REGISTRY, RULES, lint_source

REPO = Path(__file__).resolve().parents[2]
SUBMISSIONS = REPO / "submissions"
DEFECTS = SUBMISSIONS / "defects"
REFERENCES = ("triton-reference", "tilelang-reference")

# defect suffix -> rules that count as naming it (at least one "defect" finding of one of them)
EXPECTED: dict[str, frozenset[str]] = {
    "tl_serial_row": frozenset({"sequential-reduction"}),
    "tl_serial": frozenset({"sequential-reduction"}),
    "scalar_loop": frozenset({"sequential-reduction"}),
    "fp64_promotion": frozenset({"fp64-promotion"}),
    "three_pass": frozenset({"unfused-multipass"}),
    "one_elem_per_program": frozenset({"one-element-per-program"}),
    "cast_in_loop": frozenset({"cast-in-inner-loop", "fp64-promotion", "tiny-tile"}),
    "naive_direct": frozenset({"matmul-without-tensor-cores", "sequential-reduction"}),
    "scalar_channel_loop": frozenset({"matmul-without-tensor-cores", "sequential-reduction"}),
    "no_tensor_cores": frozenset({"matmul-without-tensor-cores", "sequential-reduction"}),
}
STRUCTURAL_MARKERS = ("structural", "untuned")


def _py_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.py") if not p.name.startswith("_")) if folder.is_dir() else []


def _lint(path: Path):
    return lint_source(path.read_text(encoding="utf-8"), filename=str(path.relative_to(REPO)))


def _is_structural(path: Path) -> bool:
    return any(m in path.stem for m in STRUCTURAL_MARKERS)


DEFECT_FILES = _py_files(DEFECTS)
REFERENCE_FILES = [p for folder in REFERENCES for p in _py_files(SUBMISSIONS / folder)]


def test_expected_rules_are_real_rules():
    for suffix, rules in EXPECTED.items():
        for rule in rules:
            REGISTRY.get(rule)  # an unknown id raises with the closest known ids
        assert rules and rules <= set(RULES), suffix


def test_defects_folder_is_present():
    assert DEFECT_FILES, f"no candidate files under {DEFECTS}"


@pytest.mark.parametrize("path", [p for p in DEFECT_FILES if not _is_structural(p)], ids=lambda p: p.name)
def test_defect_submission_is_named_by_its_rule(path):
    assert "__" in path.stem, f"{path.name}: defect files are named <problem>__<defect>.py"
    suffix = path.stem.split("__", 1)[1]
    assert suffix in EXPECTED, (
        f"{path.name}: defect suffix {suffix!r} has no expected rule; add it to EXPECTED in {Path(__file__).name}"
    )
    findings = _lint(path)
    named = [f for f in findings if f.severity == "defect" and f.rule in EXPECTED[suffix]]
    assert named, (
        f"{path.name}: expected a 'defect' finding from {sorted(EXPECTED[suffix])}, got:\n"
        + (format_findings(findings, path.name) or "(clean)")
    )


@pytest.mark.parametrize("path", [p for p in DEFECT_FILES if _is_structural(p)], ids=lambda p: p.name)
def test_structural_residual_submission_gets_no_defect(path):
    findings = _lint(path)
    assert not [f for f in findings if f.severity == "defect"], format_findings(findings, path.name)


@pytest.mark.parametrize("path", REFERENCE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_reference_submission_gets_no_defect(path):
    findings = _lint(path)
    assert not [f for f in findings if f.severity == "defect"], format_findings(findings, path.name)
