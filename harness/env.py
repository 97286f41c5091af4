"""What machine this is and what can run here, without initialising CUDA.

The runner must never create a CUDA context (a crashed candidate could leave a
context in a bad state, and a forked child would inherit it), so GPU facts
come from ``nvidia-smi`` and package versions from package metadata.
"""

from __future__ import annotations

import importlib.metadata
import platform
import shutil
import subprocess
import sys

from harness.version import __version__
from harness.records import EnvSnapshot


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _torch_version() -> str:
    v = _version("torch")
    if v:
        return v
    import torch  # the GPU image may install torch without dist metadata

    return torch.__version__


def query_gpus() -> list[dict]:
    """One dict per visible NVIDIA GPU (name, uuid, driver, clocks), [] without one."""
    if not shutil.which("nvidia-smi"):
        return []
    fields = "index,name,uuid,driver_version,clocks.sm,clocks.mem,memory.total"
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    gpus = []
    for line in out.stdout.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 7:
            continue
        def _int(x: str) -> int | None:
            return int(x) if x.isdigit() else None
        gpus.append({"index": int(parts[0]), "name": parts[1], "uuid": parts[2], "driver": parts[3],
                     "sm_clock_mhz": _int(parts[4]), "mem_clock_mhz": _int(parts[5]), "memory_mib": _int(parts[6])})
    return gpus


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def default_device() -> str:
    return "cuda" if query_gpus() else "cpu"


def snapshot(device: str, gpu: int = 0, sandbox: str = "rlimits") -> EnvSnapshot:
    if device == "cuda":
        gpus = query_gpus()
        g = next((x for x in gpus if x["index"] == gpu), gpus[0] if gpus else {})
        return EnvSnapshot(
            device_kind="cuda", device_name=g.get("name", "unknown GPU"), device_uuid=g.get("uuid"),
            driver=g.get("driver"), python=platform.python_version(), torch=_torch_version(), triton=_version("triton"),
            tilelang=_version("tilelang"), harness=__version__, sandbox=sandbox, sm_clock_mhz=g.get("sm_clock_mhz"),
            mem_clock_mhz=g.get("mem_clock_mhz"),
        )
    return EnvSnapshot(
        device_kind="cpu", device_name=cpu_name(), device_uuid=None, driver=None, python=platform.python_version(),
        torch=_torch_version(), triton=_version("triton"), tilelang=_version("tilelang"), harness=__version__,
        sandbox=sandbox,
    )


def capabilities(device: str) -> dict[str, str]:
    """Which execution path each DSL takes on this machine (shown by 'kernelgate env')."""
    tl = _version("tilelang")
    tr = _version("triton")
    if device == "cuda":
        return {
            "torch": "executed on the GPU",
            "triton": "compiled and executed on the GPU" if tr else "not installed",
            "tilelang": "compiled and executed on the GPU" if tl else "not installed",
        }
    return {
        "torch": "executed on the CPU",
        "triton": "executed by the Triton interpreter (TRITON_INTERPRET=1); timings are CPU measurements" if tr else "not installed",
        "tilelang": "lowered to CUDA source for sm_90a (compile check only, not executed)" if tl else "not installed",
    }


def python_info() -> str:
    return f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})"
