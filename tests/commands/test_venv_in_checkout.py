"""The quick start with the virtual environment inside the checkout (the most common layout).

A copy of the checkout's code is made in a temporary folder and this test's own virtual environment is hard-linked
into it as ``.venv`` (no copy of its bytes; skipped where that is impossible: not in a venv, or another
filesystem). Then ``kernelgate run`` runs there, from that environment, on three bundled Triton kernels.

The workers' sandbox grants the interpreter's own folders wherever they are (harness/execute/boundary/landlock.py),
so the kernels are PASSED; before it did, every candidate failed on a permission denial on the venv's files and the
records blamed the candidates (RUNTIME_ERROR, COMPILE_ERROR). A run that fails on the environment anyway stops
early and says so (tests/score/test_environment.py).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def _clone_with_venv_inside(base: Path) -> Path:
    if sys.prefix == sys.base_prefix:
        pytest.skip("the tests do not run in a virtual environment: nothing to place inside the checkout")
    clone = base / "checkout"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in ("harness", "problems", "submissions"):
        shutil.copytree(ROOT / part, clone / part, ignore=ignore)
    try:
        subprocess.run(["cp", "-al", sys.prefix, str(clone / ".venv")], check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as exc:
        if "cross-device" in exc.stderr or str(errno.EXDEV) in exc.stderr or "Invalid cross-device" in exc.stderr:
            pytest.skip(f"cannot hard-link {sys.prefix} into {clone}: {exc.stderr.strip()}")
        raise
    return clone


def test_a_venv_inside_the_checkout_never_fails_the_candidates(tmp_path):
    clone = _clone_with_venv_inside(tmp_path)
    python = clone / ".venv" / "bin" / "python"
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(clone), "KERNELGATE_CACHE": str(tmp_path / "cache")}
    run = subprocess.run([str(python), "-m", "harness", "run", "submissions/triton-reference", "--only", "gelu",
                          "--only", "silu", "--only", "add_relu", "--device", "cpu", "--no-progress", "--yes-execute",
                          "--out", str(out)], cwd=clone, env=env, capture_output=True, text=True, timeout=900)
    records = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert records, run.stderr[-3000:]
    for r in records:
        err = r.get("error") or {}
        if r["status"] in ("RUNTIME_ERROR", "COMPILE_ERROR", "CRASHED", "INVALID_CANDIDATE"):
            assert "Permission denied" not in f"{err.get('message')}{err.get('traceback_tail')}", r
    assert run.returncode == 0, run.stderr[-3000:]
    assert [r["status"] for r in records] == ["PASSED"] * 3, records  # the workers read the venv, nothing else
