"""The per-pair cost tables committed in evidence/ are tools/pair_costs.py's output on the committed records
(never typed by hand), and the tool refuses a folder without the accounting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EVIDENCE = ROOT / "evidence"
TABLES = [("h200-results/2026-12-03-8448562/pair_costs_suite.txt", "h200-results/2026-12-03-8448562/suite_results.jsonl.gz"),
          ("throughput/2026-12-03-9400ed1/pair_costs_seq.txt", "throughput/2026-12-03-9400ed1/bench_seq_results.jsonl.gz"),
          ("throughput/2026-12-03-6becf33/suite1/pair_costs_suite.txt",
           "throughput/2026-12-03-6becf33/suite1/suite_results.jsonl.gz")]


def _tool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "tools/pair_costs.py", *args], cwd=ROOT, capture_output=True, text=True)


@pytest.mark.parametrize(("table", "records"), TABLES)
def test_committed_tables_are_the_tools_output(table, records):
    out = _tool(str(EVIDENCE / records))
    assert out.returncode == 0, out.stderr
    assert out.stdout == (EVIDENCE / table).read_text(), f"regenerate: python tools/pair_costs.py {records} > {table}"


def test_a_run_without_the_accounting_is_refused(tmp_path):
    (tmp_path / "results.jsonl").write_text("")
    out = _tool(str(tmp_path))
    assert out.returncode == 1 and "no record with pair costs" in out.stdout
