"""docs/throughput.md's tables are the committed device runs, rendered, never typed by hand."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNS = "leaderboards/h200-2026-11-30-s3"


def test_throughput_tables_match_the_committed_runs():
    doc = (ROOT / "docs" / "throughput.md").read_text()
    start = f"<!-- generated: tools/throughput_table.py {RUNS} -->\n"
    block = doc[doc.index(start) + len(start):doc.index("\n<!-- end generated -->")]
    out = subprocess.run([sys.executable, "tools/throughput_table.py", RUNS], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.rstrip("\n")
    assert block == out, "regenerate: python tools/throughput_table.py " + RUNS
