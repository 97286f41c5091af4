"""Lint public API: lint_source's contract, the Finding record, rendering, import hygiene."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.diagnose.findings import Finding, format_findings
from harness.diagnose.lint import HINTS, RULES, lint_source

FIXTURES = Path(__file__).parent / "fixtures" / "lint"
REPO = Path(__file__).resolve().parents[2]


def test_parse_error_is_one_info_finding():
    (f,) = lint_source("def forward(self:\n", filename="bad.py")
    assert (f.rule, f.severity) == ("parse-error", "info")


def test_dsl_argument_is_validated_and_respected():
    src = (FIXTURES / "defect" / "triton_sum_scalar_loop.py").read_text()
    assert lint_source(src, dsl="tilelang") == []  # Triton kernel rules skipped
    with pytest.raises(ValueError):
        lint_source(src, dsl="cuda")


def test_candidate_code_is_never_executed(tmp_path):
    marker = tmp_path / "ran"
    src = f"open({str(marker)!r}, 'w').write('x')\nraise SystemExit(3)\n"
    assert lint_source(src) == []
    assert not marker.exists()


def test_finding_record_round_trips_and_is_frozen():
    f = Finding("tiny-tile", "defect", 3, "msg", "hint")
    assert Finding.from_dict(f.to_dict()) == f
    assert f.to_dict() == {"rule": "tiny-tile", "severity": "defect", "line": 3, "message": "msg", "hint": "hint"}
    with pytest.raises(Exception):
        f.rule = "x"  # type: ignore[misc]
    with pytest.raises(ValueError):
        Finding("r", "critical", None, "m", "h")
    with pytest.raises(ValueError):
        Finding.from_dict({**f.to_dict(), "extra": 1})


def test_format_findings_lines():
    fs = [Finding("tiny-tile", "defect", 7, "small block", "grow it"), Finding("parse-error", "info", None, "m", "h")]
    text = format_findings(fs, "cand.py")
    assert text.splitlines() == ["cand.py: [parse-error] m -- h", "cand.py:7: [tiny-tile] small block -- grow it"]
    assert format_findings({"b.py": fs[:1], "a.py": []}) == "b.py:7: [tiny-tile] small block -- grow it"
    assert format_findings([]) == ""


def test_rules_and_hints_are_consistent():
    assert set(RULES) == set(HINTS)


def test_package_import_does_no_work():
    code = (
        "import sys, harness.diagnose as d\n"
        "assert 'harness.diagnose.lint' not in sys.modules\n"
        "assert 'harness.diagnose.anticheat' not in sys.modules\n"
        "assert 'triton' not in sys.modules and 'tilelang' not in sys.modules and 'torch' not in sys.modules\n"
        "assert callable(d.lint_source) and callable(d.scan_source) and callable(d.format_findings)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
