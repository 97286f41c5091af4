"""docs/throughput.md's tables are the committed device runs, rendered, never typed by hand."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_throughput_tables_match_the_committed_runs():
    doc = (ROOT / "docs" / "throughput.md").read_text()
    marker = "<!-- generated: python tools/throughput_table.py "
    start = doc.index(marker)
    line_end = doc.index(" -->\n", start)
    folders = doc[start + len(marker):line_end].split()
    assert folders and all((ROOT / f).is_dir() for f in folders), folders
    block = doc[line_end + len(" -->\n"):doc.index("\n<!-- end generated -->")]
    out = subprocess.run([sys.executable, "tools/throughput_table.py", *folders], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.rstrip("\n")
    assert block == out, "regenerate: python tools/throughput_table.py " + " ".join(folders)
