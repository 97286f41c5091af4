"""What each of the worker's defences costs per call, on the GPU (lab measurement, prints a table).

Host time to launch one small Triton kernel, and GPU time of one memory-bound
kernel, under the worker's layers added one by one: plain, through the
candidate's thread, with the launch counter, with the audit hooks, with the
kernel profiler running. Each figure is the median of 200 calls.

Usage on the device, from the repo root: ``python3 tools/device/overhead_probe.py``
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> int:
    import torch
    import triton
    import triton.language as tl

    from harness.execute.worker.rules import audit
    from harness.execute.worker import guards
    from harness.execute.shared.threads import CandidateThread
    from harness.execute.shared.profiling import KernelProfiler
    from harness.measure.timing import DeviceTimer

    @triton.jit
    def probe_copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)

    small = torch.randn(4096, device="cuda")
    big = torch.randn(64 << 20, device="cuda")
    outs = (torch.empty_like(small), torch.empty_like(big))

    def launch(x, y):
        probe_copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)

    launch(small, outs[0])
    launch(big, outs[1])
    torch.cuda.synchronize()
    timer = DeviceTimer("cuda", 256 << 20)
    timer.calibrate()
    thread = CandidateThread()
    rows = []

    def measure(label: str, via_thread: bool) -> None:
        host, gpu = [], []
        for _ in range(200):
            fn = (lambda: thread.run(launch, small, outs[0])) if via_thread else (lambda: launch(small, outs[0]))
            t0 = time.perf_counter()
            fn()
            host.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
        for _ in range(50):
            run = (lambda: thread.run(launch, big, outs[1])) if via_thread else (lambda: launch(big, outs[1]))
            gpu.append(timer.timed_call(run, 200.0).stream_ms)
        rows.append((label, statistics.median(host), statistics.median(gpu)))

    measure("plain, main thread", False)
    measure("candidate's thread", True)
    guards.install_triton_counter()
    measure("+ launch counter", True)
    with tempfile.TemporaryDirectory() as d:
        audit.install((d,))
        measure("+ audit hooks", True)
        t0 = time.perf_counter()
        prof = KernelProfiler("cuda", running=True)
        init_s = time.perf_counter() - t0
        measure("+ profiler running", True)
        t0 = time.perf_counter()
        kernels = prof.window()
        window_s = time.perf_counter() - t0
    print(f"{'layers':28s} {'host us/launch':>15s} {'GPU ms (256 MB copy)':>21s}")
    for label, h, g in rows:
        print(f"{label:28s} {h:15.1f} {g:21.4f}")
    print(f"profiler: {prof.status}; start {init_s:.2f} s; one window read {window_s * 1e3:.0f} ms for "
          f"{len(kernels)} kernels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
