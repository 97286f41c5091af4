"""Importing the report, prompt and export modules loads no heavy optional dependency."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

MODULES = ["harness.report.metrics", "harness.report.leaderboard", "harness.report.compare", "harness.report.html",
           "harness.report.plots", "harness.prompts.render", "harness.export.hf", "harness.commands.leaderboard",
           "harness.commands.compare", "harness.commands.report", "harness.commands.prompt", "harness.commands.export",
           "harness.commands.merge"]
HEAVY = ["torch", "numpy", "matplotlib", "datasets", "jinja2", "pyarrow"]


def test_imports_are_light():
    code = (f"import importlib, sys\nfor m in {MODULES!r}: importlib.import_module(m)\n"
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
