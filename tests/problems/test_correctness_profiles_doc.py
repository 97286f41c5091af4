"""docs/correctness-profiles.md is generated: the committed file is what its documented command writes now.

The whole-level KernelBench sections need a KernelBench checkout (``--kernelbench``) and about 15 minutes; without
one the command writes everything before them, which is what is compared here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # probes every bundled and repository KernelBench problem on the CPU (about a minute)


def test_the_committed_table_is_its_command_s_output():
    doc = (ROOT / "docs" / "correctness-profiles.md").read_text()
    assert "python tools/correctness_profiles.py --kernelbench KERNELBENCH_CHECKOUT/KernelBench > " \
           "docs/correctness-profiles.md" in doc
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "correctness_profiles.py")], capture_output=True,
                         text=True, check=True, cwd=ROOT, timeout=900).stdout
    whole = doc.find("\n## KernelBench level 1, the whole level")
    assert out.split("\n## Not covered")[0] == doc[:whole if whole >= 0 else doc.find("\n## Not covered")], \
        "docs/correctness-profiles.md is stale: run python tools/correctness_profiles.py --kernelbench ... > " \
        "docs/correctness-profiles.md"
