"""leaderboards/ is generated: the committed files are what their documented command writes from the committed
records, and the Markdown table escapes what submitters choose."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _documented_command() -> list[str]:
    text = (ROOT / "leaderboards" / "README.md").read_text()
    lines = [ln for ln in text.splitlines() if ln.startswith("kernelgate leaderboard ")]
    assert len(lines) == 1, lines
    return shlex.split(lines[0])


def test_the_committed_leaderboard_is_its_command_s_output(tmp_path, monkeypatch, capsys):
    from harness.cli import main

    argv = _documented_command()
    outs = {"--out": tmp_path / "h200.json", "--markdown": tmp_path / "h200.md"}
    committed = {opt: ROOT / argv[argv.index(opt) + 1] for opt in outs}
    for opt, path in outs.items():
        argv[argv.index(opt) + 1] = str(path)
    monkeypatch.chdir(ROOT)  # the results path (recorded in the leaderboard) is relative to the repository
    assert main(argv[1:]) == 0
    capsys.readouterr()
    for opt, path in outs.items():
        assert path.read_text() == committed[opt].read_text(), (
            f"{committed[opt].relative_to(ROOT)} is stale: run the command in leaderboards/README.md")


def test_the_leaderboard_reads_the_newest_h200_results():
    """The committed leaderboard is of the newest H200 suite results in evidence/ (folders are named
    <date>-<commit>, so the newest sorts last)."""
    argv = _documented_command()
    results = Path(argv[argv.index("--results") + 1])
    newest = sorted(p for p in (ROOT / "evidence" / "h200-results").iterdir() if p.is_dir())[-1]
    assert results.parent == newest.relative_to(ROOT) and (ROOT / results).is_file()
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}-[0-9a-f]{7,40}", newest.name)


def test_the_markdown_table_escapes_submitter_text():
    sys.path.insert(0, str(ROOT / "tests" / "report"))
    from synth_results import LN1, record

    from harness.report.leaderboard import build_leaderboard, format_leaderboard_markdown

    evil = record("a|b <img src=x onerror=alert(1)>", "1", "layernorm", LN1)
    md = format_leaderboard_markdown(build_leaderboard([evil], source="x"))
    row = [ln for ln in md.splitlines() if ln.startswith("| 1 |")][0]
    assert "<img" not in md and "a\\|b" in row
    assert row.count(" | ") == md.splitlines()[0].count(" | ")  # the name did not add a column
