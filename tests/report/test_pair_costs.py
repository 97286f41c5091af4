"""The per-pair cost tables committed with session 7's H200 runs are tools/pair_costs.py's output on the committed
records (never typed by hand), and the tool refuses a folder without the accounting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "leaderboards" / "h200-2026-12-02-s7"
TABLES = [("run1-trace-independent/pair_costs.txt", "run1-trace-independent/trace_seq_results.jsonl"),
          ("run3-suite/pair_costs_seq.txt", "run3-suite/bench_seq_results.jsonl"),
          ("run3-suite/pair_costs_suite.txt", "run3-suite/suite_results.jsonl")]


def _tool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "tools/pair_costs.py", *args], cwd=ROOT, capture_output=True, text=True)


@pytest.mark.parametrize(("table", "records"), TABLES)
def test_committed_tables_are_the_tools_output(table, records):
    out = _tool(str(RUNS / records))
    assert out.returncode == 0, out.stderr
    assert out.stdout == (RUNS / table).read_text(), f"regenerate: python tools/pair_costs.py {records} > {table}"


def test_the_readme_medians_come_from_the_tables():
    """The session README's pair table quotes the median rows of runs 1 and 3 (ms per pair)."""
    readme = (RUNS / "README.md").read_text()
    for table, quoted in (("run1-trace-independent/pair_costs.txt", ("4.03", "3.31", "0.87", "3.69", "3.21", "1.73")),
                          ("run3-suite/pair_costs_seq.txt", ("3.98", "3.57", "0.84", "3.95", "3.67", "2.75"))):
        median = (RUNS / table).read_text().splitlines()[-1].split()[1:]
        vals = [float(v) for v in median]
        for q in quoted:
            assert any(abs(v - float(q)) < 0.006 for v in vals), (table, q, median)
            assert f"| {q}" in readme or f"{q} |" in readme, q


def test_a_run_without_the_accounting_is_refused(tmp_path):
    (tmp_path / "results.jsonl").write_text("")
    out = _tool(str(tmp_path))
    assert out.returncode == 1 and "no record with pair costs" in out.stdout
