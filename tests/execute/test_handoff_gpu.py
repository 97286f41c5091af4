"""CUDA IPC hand-off between two processes (needs a GPU; skipped elsewhere).

Also runnable without pytest on the device machine:
``python tests/execute/test_handoff_gpu.py`` prints one line per check.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
try:
    import pytest

    pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
except ImportError:  # run as a script on a machine without pytest
    sys.path.insert(0, str(ROOT))

EXPORTER = """
import json, sys, torch
from harness.execute.wire.handoff import OutputReader
torch.manual_seed(0)
outs = [torch.randn(1000, 333, device="cuda", dtype=torch.bfloat16), torch.arange(7, device="cuda")[2:],
        torch.empty(0, device="cuda"), torch.randn(64, 64, device="cuda").t()]
descs, keep = OutputReader(torch).export(outs)
print(json.dumps({"descs": descs, "sums": [float(o.double().sum()) for o in outs]}), flush=True)
sys.stdin.readline()  # keep the memory alive until the importer is done
"""


def _roundtrip() -> tuple[list, list, dict]:
    from harness.execute.wire.handoff import import_outputs

    proc = subprocess.Popen([sys.executable, "-c", EXPORTER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, text=True)
    try:
        msg = json.loads(proc.stdout.readline())
        outs = import_outputs(msg["descs"])
        return outs, msg["sums"], msg["descs"]
    finally:
        proc.stdin.write("\n")
        proc.stdin.close()
        proc.wait(timeout=60)


def test_outputs_arrive_intact_in_another_process():
    outs, sums, _ = _roundtrip()
    assert [tuple(o.shape) for o in outs] == [(1000, 333), (5,), (0,), (64, 64)]
    assert outs[0].dtype == torch.bfloat16 and outs[1].dtype == torch.int64
    assert [float(o.double().sum()) for o in outs] == pytest.approx(sums)


def test_strided_outputs_keep_their_values():
    """A transposed and an offset view are exported with their strides, not made contiguous in the worker."""
    outs, _, descs = _roundtrip()
    assert descs[3]["stride"] == [1, 64] and descs[1]["offset"] % 8 == 0
    torch.manual_seed(0)
    want = [torch.randn(1000, 333, device="cuda", dtype=torch.bfloat16), torch.arange(7, device="cuda")[2:],
            torch.empty(0, device="cuda"), torch.randn(64, 64, device="cuda").t()]
    assert all(torch.equal(a, b) for a, b in zip(outs, want))


def test_a_file_hand_off_copies_device_memory_by_address(tmp_path):
    """The fallback when IPC is refused: bytes copied with the driver (cuMemcpyDtoH), strides kept, digest checked."""
    from harness.execute.wire.handoff import OutputReader, read_raw

    base = torch.randn(300, 200, device="cuda")
    outs = [base.t(), base[5:, 7:], torch.randn(11, device="cuda").half()]
    path = tmp_path / "out.raw"
    back = read_raw(str(path), OutputReader(torch).write(outs, path))
    assert all(torch.equal(a.cpu(), b) for a, b in zip(outs, back))


def test_a_range_past_the_allocation_is_refused():
    from harness.execute.wire.handoff import HandoffError, import_outputs

    _, _, descs = _roundtrip()
    # the exporter is gone: its handle no longer opens, and a forged range never reads
    bad = dict(descs[0], offset=1 << 40)
    with pytest.raises(HandoffError):
        import_outputs([bad])


if __name__ == "__main__":
    outs, sums, descs = _roundtrip()
    got = [float(o.double().sum()) for o in outs]
    ok = all(abs(a - b) <= 1e-6 * max(1.0, abs(b)) for a, b in zip(got, sums))
    print("ipc round trip:", "ok" if ok else f"MISMATCH {got} vs {sums}", [tuple(o.shape) for o in outs])
    sys.exit(0 if ok else 1)
