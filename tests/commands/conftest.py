"""One ``kernelgate run`` on the CPU path shared by the CLI tests that only read what it produced.

Each of those tests used to start a run of its own (a checker, a worker pool, a worker per candidate: 6-8 s
each on the 2-core CI machine) for one candidate; one run of both candidates, with the options each test
needs, gives every one of them the same evidence.
"""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GELU = (ROOT / "submissions" / "triton-reference" / "gelu.py").read_text()
THREADS_PROBE = GELU.replace(
    "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n",
    "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        import os\n"
    "        raise RuntimeError(f'threads={torch.get_num_threads()} omp={os.environ.get(\"OMP_NUM_THREADS\")}')\n", 1)


@dataclass(frozen=True)
class CliRun:
    code: int
    """What ``main`` returned."""
    out: str
    err: str
    results: Path
    """The run's ``--out`` folder (given relative to ``cwd``)."""
    cwd: Path


@pytest.fixture(scope="session")
def default_cpu_run(tmp_path_factory) -> CliRun:
    """``kernelgate run sub --device cpu --seed 7 --out runs/rel`` with the defaults otherwise (no timing on the
    CPU path), from the folder holding ``sub``, so both paths are relative; ``sub`` holds the bundled Triton
    GELU (``gelu.py``) and a GELU whose forward raises with its worker's torch and OpenMP thread counts
    (``gelu__threads.py``). The calibration cache is a private folder."""
    from harness.cli import main

    base = tmp_path_factory.mktemp("default-cpu-run")
    sub = base / "sub"
    sub.mkdir()
    (sub / "gelu.py").write_text(GELU)
    (sub / "gelu__threads.py").write_text(THREADS_PROBE)
    assert THREADS_PROBE != GELU
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp, redirect_stdout(out), redirect_stderr(err):
        mp.setenv("KERNELGATE_CACHE", str(base / "kg-cache"))
        mp.chdir(base)
        code = main(["run", "sub", "--device", "cpu", "--no-progress", "--yes-execute", "--seed", "7",
                     "--out", "runs/rel"])
    return CliRun(code, out.getvalue(), err.getvalue(), base / "runs" / "rel", base)
