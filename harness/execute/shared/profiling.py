"""Which GPU kernels ran inside a forward: the profiler window and its attribution to calls.

Used by the worker (a claim: the worker is the candidate's process) and by the
checker (trusted: which kernels the library op is made of). Both time a call
the same way (:meth:`harness.measure.timing.DeviceTimer.timed_call`)::

    harness stream:  [inputs][poison][flush] MARK [forward ...] MARK   [inputs][poison][flush] MARK [...] MARK
                                             ^ hold (GPU sleep)    ^ end marker (a 1-cycle sleep)

so on the stream that carries the markers, the kernels between a hold marker
and the next end marker are the forward's, and those outside are the
harness's own; every kernel on another stream is the forward's too (the
harness uses one stream). :func:`attribute` does that split from the raw
kernel list; the profiler itself (Kineto on CUPTI) is wrapped by
:class:`KernelProfiler`, which degrades to "unavailable" with a reason when
it cannot run (no GPU, no CUPTI), never to an error.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from typing import Any, Iterable

MARKER = "spin_kernel"
"""Substring of the name of the GPU sleep kernel (``torch.cuda._sleep``) used as the hold and end markers."""


@dataclass(frozen=True, slots=True)
class Kernel:
    name: str
    stream: int
    start_ns: int
    dur_ns: int
    copy: bool = False
    """A memcpy or memset (counted only as work on another stream: :attr:`Attribution.side_us`)."""


@dataclass(frozen=True, slots=True)
class Attribution:
    """Per kernel name: (GPU microseconds inside forwards, count inside, microseconds outside); markers seen."""

    rows: dict[str, tuple[float, int, float]]
    markers: int
    side_us: float = 0.0
    """GPU microseconds of kernels and copies on streams other than the markers': the only work that can go on
    after the timed stream's end event (:func:`harness.measure.timing.choose_windows`)."""


def attribute(kernels: Iterable[Kernel], marker: str = MARKER) -> Attribution:
    """Split a window's kernels into the forwards' and the harness's (see the module docstring)."""
    ks = sorted(kernels, key=lambda k: (k.start_ns, k.stream))
    marks = [k for k in ks if marker in k.name]
    main = max({k.stream for k in marks}, key=lambda s: sum(1 for k in marks if k.stream == s)) if marks else None
    rows: dict[str, list] = {}
    inside = False
    side_us = 0.0
    for k in ks:
        if k.stream != main:
            side_us += k.dur_ns / 1e3
        if k.copy:
            continue
        if marker in k.name and k.stream == main:
            inside = not inside
            continue
        cell = rows.setdefault(k.name, [0.0, 0, 0.0])
        if k.stream != main or inside:
            cell[0] += k.dur_ns / 1e3
            cell[1] += 1
        else:
            cell[2] += k.dur_ns / 1e3
    return Attribution({n: (round(a, 3), c, round(o, 3)) for n, (a, c, o) in rows.items()}, len(marks),
                       round(side_us, 3))


class KernelProfiler:
    """Kineto with CUDA activity only (``torch.autograd.profiler.profile``).

    Not ``torch.profiler.profile``: its start asks ``hasattr(torch, "_inductor")``,
    which imports Inductor, Dynamo and sympy (4.4-6.0 s of every worker's
    warm-up on an H200 host); the autograd profiler under it starts the same Kineto
    session without that.

    ``running=True`` (the worker): profiling is on from construction, and
    :meth:`window` returns the kernels since the last window and starts the
    next, so every call the candidate makes is profiled alike. ``running=False``
    (the checker): :meth:`begin` / :meth:`end` bracket what is profiled.
    """

    def __init__(self, device: str, running: bool = True):
        self.status = "cpu" if not device.startswith("cuda") else "unavailable: not started"
        self._prof: Any = None
        if device.startswith("cuda"):
            try:
                self.begin()
                self.end()  # CUPTI's first start costs a while: pay it now, before any candidate
                self.status = "cupti"
                if running:
                    self.begin()
            except Exception as exc:  # noqa: BLE001 - no CUPTI, a locked-down profiler: say why, carry on
                self.status = f"unavailable: {type(exc).__name__}: {str(exc)[:160]}"
                self._prof = None

    @property
    def available(self) -> bool:
        return self.status == "cupti"

    def begin(self) -> None:
        from torch.autograd.profiler import profile

        self._prof = profile(use_cpu=False, use_device="cuda", use_kineto=True)
        self._prof.__enter__()

    def end(self) -> list[Kernel]:
        """Stop profiling and return the kernels seen ([] when not running)."""
        if self._prof is None:
            return []
        prof, self._prof = self._prof, None
        prof.__exit__(None, None, None)
        return _kernels(prof)

    def window(self) -> list[Kernel]:
        """The kernels since the last window; profiling goes on. [] when unavailable."""
        if self._prof is None:
            return []
        kernels = self.end()
        self.begin()
        return kernels

    def stop(self) -> None:
        if self._prof is not None:
            try:
                self._prof.__exit__(None, None, None)
            except Exception:  # noqa: BLE001
                pass
            self._prof = None


def _kernels(prof: Any) -> list[Kernel]:
    """The GPU kernels of a stopped profiler session (its Kineto events; else its chrome trace)."""
    out: list[Kernel] = []
    try:
        events = prof.kineto_results.events()
        for e in events:
            if "cuda" not in str(e.device_type()).lower():
                continue
            name = e.name()
            copy = name.startswith(("Memcpy", "Memset"))
            if name.startswith("cuda") and "kernel" not in name.lower():
                continue
            out.append(Kernel(name, int(e.device_resource_id()), int(e.start_ns()), int(e.duration_ns()),
                              copy and "kernel" not in name.lower()))
        if out:
            return out
    except Exception:  # noqa: BLE001 - the Kineto event API differs between torch versions: use the trace
        pass
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            trace = json.load(f)
    finally:
        os.unlink(path)
    for ev in trace.get("traceEvents", []):
        if ev.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and ev.get("ph") == "X":
            out.append(Kernel(str(ev.get("name", "")), int(ev.get("args", {}).get("stream", ev.get("tid", 0)) or 0),
                              int(float(ev.get("ts", 0)) * 1e3), int(float(ev.get("dur", 0)) * 1e3),
                              ev.get("cat") != "kernel"))
    return out
