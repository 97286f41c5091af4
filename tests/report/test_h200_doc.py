"""docs/h200-results.md is generated from the committed H200 suite records, never edited by hand."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN = "evidence/h200-results/2026-12-03-8448562"


def test_h200_results_doc_matches_the_committed_run():
    out = subprocess.run([sys.executable, "tools/h200_table.py", RUN], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    doc = (ROOT / "docs" / "h200-results.md").read_text()
    assert out.stdout.strip() == doc.strip(), (
        f"docs/h200-results.md is stale: python tools/h200_table.py {RUN} > docs/h200-results.md")
    assert "24/24 defect records passed every round" in doc and "The two checks flag 24/24" in doc


def test_the_doc_is_rendered_from_the_newest_h200_results():
    newest = sorted(p for p in (ROOT / "evidence" / "h200-results").iterdir() if p.is_dir())[-1]
    assert newest.relative_to(ROOT).as_posix() == RUN
