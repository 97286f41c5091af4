"""docs/h200-results.md is generated from the committed device run, never edited by hand."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_h200_results_doc_matches_the_committed_run():
    run = "leaderboards/h200-2026-11-30-s2"
    out = subprocess.run([sys.executable, "tools/h200_table.py", run], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    doc = (ROOT / "docs" / "h200-results.md").read_text()
    assert out.stdout.strip() == doc.strip(), (
        f"docs/h200-results.md is stale: python tools/h200_table.py {run} > docs/h200-results.md")
    assert "24/24 defect records passed every round" in doc and "The two checks flag 24/24" in doc
