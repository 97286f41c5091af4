"""HTML and Markdown report files, with and without matplotlib."""

from __future__ import annotations

import sys

import pytest
from synth_results import CEILINGS, LN1, record, suite

from harness.report.html import write_report


def _block_matplotlib(monkeypatch):
    for name in list(sys.modules):
        if name == "matplotlib" or name.startswith("matplotlib."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now raises ImportError


def test_report_with_charts(tmp_path):
    pytest.importorskip("matplotlib")
    html_path, md_path = write_report(suite(), tmp_path / "rep", ceilings=CEILINGS, title="Synthetic")
    html = html_path.read_text()
    md = md_path.read_text()
    assert html.count("data:image/png;base64,") == 2
    assert 'id="leaderboard-table"' in html and 'id="entries-table"' in html
    assert "<title>Synthetic</title>" in html and "gen-a@2" in html
    assert "<link" not in html and "<script" not in html  # self-contained, nothing fetched
    assert "| 1 | gen-a@2 |" in md and "![roofline](roofline.png)" in md
    for name in ("roofline.png", "fast_p.png"):
        data = (tmp_path / "rep" / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 5000


def test_report_without_matplotlib(tmp_path, monkeypatch):
    _block_matplotlib(monkeypatch)
    html_path, md_path = write_report(suite(), tmp_path, ceilings=CEILINGS)
    html = html_path.read_text()
    assert "data:image/png" not in html
    assert "matplotlib is not installed" in html and "matplotlib is not installed" in md_path.read_text()
    assert 'id="leaderboard-table"' in html
    assert not (tmp_path / "roofline.png").exists()


def test_stale_charts_are_removed(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    write_report(suite(), tmp_path)
    assert (tmp_path / "roofline.png").exists()
    _block_matplotlib(monkeypatch)
    write_report(suite(), tmp_path)
    assert not (tmp_path / "roofline.png").exists()


def test_untrusted_text_is_escaped(tmp_path):
    evil = record("<script>alert(1)</script>", "1", "layernorm", LN1, candidate="<img src=x onerror=alert(1)>.py",
                  status="RUNTIME_ERROR")
    html_path, md_path = write_report([evil], tmp_path)
    html = html_path.read_text()
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/" in html
    assert "<img src=x" not in html


def test_untimed_results_render(tmp_path):
    recs = [record("cpu", "1", "layernorm", LN1), record("cpu", "1", "layernorm", LN1, candidate="b.py",
                                                         status="COMPILE_ERROR")]
    html_path, md_path = write_report(recs, tmp_path)
    html = html_path.read_text()
    assert "ok (untimed)" in html and "not timed" in html
    assert "no timed record to plot" in html or "matplotlib is not installed" in html
