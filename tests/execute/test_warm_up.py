"""A worker's warm-up (harness.execute.worker.warmup.warm_up) on the CPU path, in a fresh interpreter.

Every candidate gets a fresh worker, so each second of warm-up is paid once per candidate: on a 2-core CI
machine the aten recorder's first use cost 5 s, because torch's dispatch-mode base class wraps
``__torch_dispatch__`` in ``torch._disable_dynamo``, whose first call imports Dynamo, Inductor and sympy.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_cpu_warm_up_records_aten_ops_without_importing_dynamo():
    code = textwrap.dedent("""
        import sys, torch
        from harness.execute.worker import guards
        from harness.execute.worker import warmup
        warm = warmup.warm_up({"device": "cpu"})
        with torch.no_grad(), guards.AtenRecorder() as rec:
            torch.nn.functional.layer_norm(torch.ones(2, 4), (4,))
        print(sorted(warm["laps"]), "torch._dynamo" in sys.modules, ",".join(sorted(rec.ops)))
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    last = out.stdout.strip().splitlines()[-1]
    laps, dynamo, ops = last.rsplit(" ", 2)
    assert "recorder_s" in laps, last
    assert dynamo == "False", "the warm-up imported torch._dynamo (seconds per worker)"
    assert "native_layer_norm" in ops.split(","), last  # the recorder still sees the library's aten op
