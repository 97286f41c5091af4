"""A machine that cannot confine workers is known before any candidate runs.

The run is started inside a seccomp filter that refuses new namespaces, as a container's default profile does
(Docker's refuses ``unshare`` and ``clone`` with namespace flags). ``--isolation strict`` (the default) stops
before any candidate, naming what is missing and the option that accepts less; ``--isolation available`` runs,
warns, and every record says what was missing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux namespaces and seccomp")

NO_NAMESPACES = textwrap.dedent("""
    import errno, os, sys
    import pyseccomp as sc
    f = sc.SyscallFilter(sc.ALLOW)
    f.add_rule(sc.ERRNO(errno.EPERM), "unshare")
    for bit in (0x10000000, 0x20000000, 0x00020000, 0x40000000):  # user, pid, mount, net
        f.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, bit, bit))
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    f.load()
    os.execv(sys.executable, [sys.executable, "-m", "harness", *sys.argv[1:]])
""")


def _run(tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    sub = tmp_path / "sub"
    sub.mkdir(exist_ok=True)
    (sub / "gelu.py").write_text((ROOT / "submissions" / "triton-reference" / "gelu.py").read_text())
    out = tmp_path / f"out{len(extra)}"
    proc = subprocess.run([sys.executable, "-c", NO_NAMESPACES, "run", str(sub), "--out", str(out), "--device",
                           "cpu", "--no-progress", "--yes-execute", *extra], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    results = out / "results.jsonl"
    records = [json.loads(x) for x in results.read_text().splitlines()] if results.exists() else []
    return proc, records


def test_strict_isolation_stops_before_any_candidate_where_namespaces_are_refused(tmp_path):
    proc, records = _run(tmp_path)
    assert proc.returncode != 0 and not records, (proc.returncode, records)
    err = proc.stderr
    assert "cannot confine candidate workers completely" in err, err[-2000:]
    assert "PID namespace" in err and "--isolation available" in err, err[-2000:]


def test_available_isolation_runs_with_what_there_is_and_says_what_was_missing(tmp_path):
    proc, records = _run(tmp_path, "--isolation", "available")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [r["status"] for r in records] == ["PASSED"], records
    sandbox = records[0]["env"]["sandbox"]
    assert "missing:" in sandbox and "PID namespace" in sandbox and "seccomp (" in sandbox, sandbox
    assert "less than the full boundary" in proc.stderr, proc.stderr[-2000:]
