"""tools/side_stream_rules.py replays the side-stream rules on records' gap statistics."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import side_stream_rules as tool  # noqa: E402


def _rec(name: str, median_ms: float, gaps_us: dict | None, device_wide: bool) -> dict:
    ph = {f"tail_gap_{k}_s": v / 1e6 for k, v in (gaps_us or {}).items()}
    warn = ["work finished 50 us after the timed stream's end event (side stream?): both sides timed device-wide"]
    return {"candidate": f"t/{name}.py", "workload": "w", "timing": {"median_ms": median_ms}, "phase_s": ph,
            "warnings": warn if device_wide else []}


LOAD = _rec("load", 0.16, {"kernel": 60, "library": 10, "kernel_p10": 12, "library_p10": 10, "pair_extra": 48,
                          "kernel_net": 3, "library_net": 2, "kernel_idle": 57, "library_idle": 8}, True)
SIDE = _rec("side", 0.50, {"kernel": 310, "library": 10, "kernel_p10": 300, "library_p10": 9, "pair_extra": 299},
            True)
QUIET = _rec("quiet", 0.13, {"kernel": 11, "library": 10, "kernel_p10": 9, "library_p10": 9, "pair_extra": 1}, False)
OLD = _rec("old", 0.13, None, False)


def test_a_disturbance_moves_the_median_not_the_floor():
    j = tool.judge(LOAD)
    assert j["device_wide"] and abs(j["limit_ms"] - 0.020) < 1e-12  # 10% of 0.157 ms stream time is under 20 us
    assert j["fires"] == {"host": True, "floor": False, "pair": True, "net": False}
    assert abs(j["limit_ms"] - 0.020) < 1e-12 and j["idle_s"] == (57e-6, 8e-6) and j["side_us"] is None
    assert tool.judge({**LOAD, "kernels": {"side_us": 0.0}})["side_us"] == 0.0


def test_a_side_stream_fires_every_rule():
    assert tool.judge(SIDE)["fires"] == {"host": True, "floor": True, "pair": True}
    assert not any(tool.judge(QUIET)["fires"].values())
    assert tool.judge(OLD) is None


def test_the_tool_reads_a_results_file(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (LOAD, SIDE, QUIET, OLD)))
    out = subprocess.run([sys.executable, "tools/side_stream_rules.py", str(path)], cwd=ROOT, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    assert "3 timed record(s) with gap statistics (1 without); fires: net 0, host 2, floor 1, pair 2" in out.stdout
    assert "host round trip to the idle GPU, median over 1 records: candidate 57.0 us, library 8.0 us" in out.stdout
    assert "t/load.py w" in out.stdout and "t/quiet.py" not in out.stdout
