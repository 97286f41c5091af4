"""Render the HTML report in headless Chromium: it must paint and its DOM must hold the tables.

Skipped when ``chromium`` is not on PATH. Chromium runs with networking and
background services off and a throw-away profile.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
from synth_results import CEILINGS, suite

from harness.report.html import write_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run"]


def _run(args: list[str], tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args],
                          capture_output=True, text=True, timeout=120)


def test_report_renders_in_chromium(tmp_path):
    html_path, _ = write_report(suite(), tmp_path / "rep", ceilings=CEILINGS)
    shot = tmp_path / "shot.png"
    proc = _run([f"--screenshot={shot}", "--window-size=1280,2000", html_path.resolve().as_uri()], tmp_path)
    assert shot.exists(), proc.stderr[-2000:]
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 20_000  # a blank page compresses to a few KB

    dom = _run(["--dump-dom", html_path.resolve().as_uri()], tmp_path).stdout
    assert 'id="leaderboard-table"' in dom and "gen-a@2" in dom
    assert dom.count("<tr>") > 20
