"""evidence/ is organised by claim, each run named by its date and the commit it measured, with a README that says
how to reproduce it; leaderboards/ holds only the generated leaderboards and the README naming their command."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN_NAME = re.compile(r"(\d{4}-\d{2}-\d{2})-([0-9a-f]{7,40})")


def _runs() -> list[Path]:
    return sorted(run for claim in (ROOT / "evidence").iterdir() if claim.is_dir() for run in claim.iterdir())


def test_every_evidence_run_is_named_by_date_and_commit_and_says_how_to_reproduce_it():
    runs = _runs()
    assert len(runs) >= 7, runs
    for run in runs:
        m = RUN_NAME.fullmatch(run.name)
        assert run.is_dir() and m, f"{run.relative_to(ROOT)}: name it <YYYY-MM-DD>-<commit>"
        readme = (run / "README.md").read_text()
        assert m[2] in readme, f"{run.relative_to(ROOT)}/README.md does not name the commit it measured"
        assert "```bash" in readme, f"{run.relative_to(ROOT)}/README.md has no command to reproduce it"


def test_every_evidence_run_of_a_device_keeps_its_environment():
    """A run whose records came from a device keeps the environment they were measured in (a run that only
    compares committed records, such as a repeatability comparison, points to them instead)."""
    for run in _runs():
        records = list(run.rglob("*results.jsonl*")) + list(run.rglob("*.jsonl"))
        if records:
            assert list(run.rglob("environment.txt")), f"{run.relative_to(ROOT)}: records without environment.txt"


def test_leaderboards_holds_only_leaderboards():
    names = sorted(p.name for p in (ROOT / "leaderboards").iterdir())
    assert names == ["README.md", "h200.json", "h200.md"], names
