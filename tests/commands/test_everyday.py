"""Issue #16, "what a new user hits in the first hour": the CLI paths that were wrong, each through ``harness.cli.main``."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.results.store import load_results

ROOT = Path(__file__).resolve().parents[2]
GELU = ROOT / "submissions" / "triton-reference" / "gelu.py"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    """Never read or write the user's calibration cache."""
    monkeypatch.setenv("KERNELGATE_CACHE", str(tmp_path / "kg-cache"))


def _broken_problem_suite(tmp_path: Path) -> tuple[Path, Path]:
    """A problems folder where ``relu2.py`` raises at import, and a submission with a candidate for it."""
    probs = tmp_path / "probs"
    probs.mkdir()
    (probs / "gelu.py").write_text((ROOT / "problems" / "elementwise" / "gelu.py").read_text())
    (probs / "relu2.py").write_text("import torch\nraise RuntimeError('boom in the problem file')\n")
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "relu2.py").write_text(GELU.read_text())
    return probs, sub


def test_a_problem_file_that_fails_at_import_is_not_blamed_on_the_candidate(tmp_path, capsys):
    """Was: the candidate got INVALID_CANDIDATE "'relu2.py' matches no loaded problem ... did you mean 'gelu'?"."""
    probs, sub = _broken_problem_suite(tmp_path)
    out = tmp_path / "out"
    assert main(["run", str(sub), "--problems", str(probs), "--device", "cpu", "--no-timing", "--no-progress",
                 "--yes-execute", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    (rec,) = load_results(out)
    assert rec.status.value == "HARNESS_ERROR" and rec.error.type == "ProblemNotLoaded"
    assert f"problem file {probs / 'relu2.py'} did not load" in rec.error.message
    assert "boom in the problem file" in rec.error.message and "fix the problem file" in rec.error.message
    assert "matches no loaded problem" not in text and "did not load" in text


def test_only_naming_a_problem_whose_file_failed_says_so(tmp_path):
    probs, sub = _broken_problem_suite(tmp_path)
    with pytest.raises(SystemExit, match="--only relu2: problem file .*relu2.py did not load.*boom") as exc:
        main(["run", str(sub), "--problems", str(probs), "--device", "cpu", "--yes-execute", "--only", "relu2",
              "--out", str(tmp_path / "out")])
    assert exc.value.code not in (0, None)
