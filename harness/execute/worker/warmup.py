"""What a worker does, once confined, before it knows its candidate: the warm-up.

A pre-started worker (:mod:`harness.execute.parent.pool`) does all of it before any
candidate exists; a worker spawned for one candidate does it after reading
the spec. Either way it happens before candidate code is imported, and before
anything that starts threads (the sandbox applies to the threads that exist).
"""

from __future__ import annotations

import os
import time

from harness.execute.wire import protocol as P


def warm_up(settings: dict, gate_fds: tuple[int, int] | None = None) -> dict:
    """What every candidate needs and no candidate decides: torch, the launch counter, the CUDA context, the
    kernel profiler, every harness module the loop uses; ``laps``: seconds per step (sent on the warm line).

    ``gate_fds`` (input, output; a pre-started worker whose settings ask for ``gpu_gate``): before the CUDA
    context is made, write :data:`harness.execute.wire.protocol.GPU_WANT_LINE` and wait for the pool's go."""
    laps: dict[str, float] = {}
    marks = [time.perf_counter()]

    def lap(name: str) -> None:
        marks.append(time.perf_counter())
        laps[name] = round(marks[-1] - marks[-2], 3)
    import torch

    torch.set_num_threads(max(1, int(settings.get("cpu_threads", 1))))
    from harness.execute.shared import inputs, threads  # noqa: F401
    from harness.execute.shared.profiling import KernelProfiler
    from harness.execute.worker import guards, outputs  # noqa: F401
    from harness.execute.worker.rules import audit, tamper, trusted_thread  # noqa: F401
    from harness.measure import timing  # noqa: F401
    from harness.problems import loader  # noqa: F401

    lap("import_s")
    guards.install_triton_counter()
    device = str(settings.get("device", "cpu"))
    if not device.startswith("cuda"):  # only the CPU path records aten ops (5.9 s of an H200 warm-up, unused there)
        with torch.no_grad(), guards.AtenRecorder():  # the first dispatch-mode use builds ~1.5 s of Python machinery
            torch.ones(2) + 1
        lap("recorder_s")
    if device.startswith("cuda"):
        try:  # Triton's driver helpers are a C module compiled into this worker's fresh cache: build it now
            from triton.runtime import driver
            driver.active.utils  # noqa: B018 - the attribute access is the work
        except Exception:  # noqa: BLE001 - no Triton, or a broken one: the candidate's import will say so
            pass
        lap("triton_driver_s")
    if gate_fds is not None:  # the GPU part of the warm-up waits for the pool's go (never during a timing)
        os.write(gate_fds[1], P.GPU_WANT_LINE)
        if os.read(gate_fds[0], 1) != P.GPU_GO:
            raise SystemExit(3)  # the pool closed: no candidate will come
        lap("gpu_wait_s")
    if device.startswith("cuda"):
        torch.cuda.set_device(0)  # CUDA_VISIBLE_DEVICES pins the worker to its GPU
        torch.empty(1, device="cuda")  # create the context now (an allocation, no kernel), not on the candidate's clock
        lap("cuda_s")
        if settings.get("tilelang"):  # importing TileLang costs seconds (a fresh worker's: never pre-started)
            guards.install_tilelang_hooks(execute=True)
    profiler = KernelProfiler(device)
    lap("profiler_s")
    return {"profiler": profiler, "laps": laps}
