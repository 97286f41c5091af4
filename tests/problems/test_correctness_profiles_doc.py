"""docs/correctness-profiles.md is generated: the committed file is what its documented command writes now."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # probes every bundled and repository KernelBench problem on the CPU (about a minute)


def test_the_committed_table_is_its_command_s_output():
    doc = (ROOT / "docs" / "correctness-profiles.md").read_text()
    assert "python tools/correctness_profiles.py > docs/correctness-profiles.md" in doc
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "correctness_profiles.py")], capture_output=True,
                         text=True, check=True, cwd=ROOT, timeout=900).stdout
    assert out == doc, "docs/correctness-profiles.md is stale: run python tools/correctness_profiles.py > " \
                       "docs/correctness-profiles.md"
