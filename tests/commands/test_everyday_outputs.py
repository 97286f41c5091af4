"""What a run's outputs say to a user who reads them from elsewhere: the previous code for a prompt from any folder,
a candidate named by its absolute path, and the times a --timing run recorded on the CPU path."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.results.store import load_results

ROOT = Path(__file__).resolve().parents[2]
GELU = (ROOT / "submissions" / "triton-reference" / "gelu.py").read_text()


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELGATE_CACHE", str(tmp_path / "kg-cache"))


def test_prompt_feedback_finds_the_evaluated_code_from_any_folder(default_cpu_run, tmp_path, monkeypatch, capsys):
    """Was: the record's candidate path ('sub/gelu.py') was looked up relative to the working directory only, so the
    code was found only from the folder the run started in; the run now keeps each candidate's code in its results."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["prompt", "gelu", "--dsl", "triton", "--feedback", str(default_cpu_run.results),
                 "--candidate", "sub/gelu.py"]) == 0
    captured = capsys.readouterr()
    assert "pass --code FILE" not in captured.err
    assert "```python\n" + GELU.rstrip("\n") + "\n```" in captured.out


def test_prompt_candidate_given_as_an_absolute_path(default_cpu_run, tmp_path, monkeypatch, capsys):
    """Was: 'no result record for problem 'gelu' and candidate '/.../sub/gelu.py'' although --help accepts a path."""
    monkeypatch.chdir(tmp_path)
    path = default_cpu_run.cwd / "sub" / "gelu.py"
    assert main(["prompt", "gelu", "--dsl", "triton", "--feedback", str(default_cpu_run.results),
                 "--candidate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "(`sub/gelu.py`," in out and "threads=" not in out  # the named candidate, not its neighbour


def test_a_timed_cpu_run_shows_its_host_clock_times(tmp_path, capsys):
    """Was: 'run --timing' recorded times on the CPU path but its table (and the report) showed '-'."""
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "gelu.py").write_text(GELU)
    out = tmp_path / "timed"
    assert main(["run", str(sub), "--device", "cpu", "--no-progress", "--yes-execute", "--seed", "7", "--timing",
                 "--out", str(out), "--report", str(tmp_path / "report")]) == 0
    text = capsys.readouterr().out
    (rec,) = load_results(out)
    assert rec.timing is not None and rec.screening is None
    row = next(line for line in text.splitlines() if line.startswith("sub/gelu.py"))
    assert f"{rec.timing.median_ms:.4g} host" in row and f"{rec.library_timing.median_ms:.4g} host" in row
    assert "host: host-clock times of the Triton interpreter" in text
    md = (tmp_path / "report" / "report.md").read_text()
    assert f"{rec.timing.median_ms:.4g} host" in md and "host-clock times" in md
    html = (tmp_path / "report" / "report.html").read_text()
    assert f"{rec.timing.median_ms:.4g} host" in html
