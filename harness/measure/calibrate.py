"""Measure the device's ceilings: DRAM bandwidth and dense matmul throughput per unit/dtype.

Run in its own process (``python -m harness.measure.calibrate``) because it
initialises CUDA; the runner reads the JSON it writes. Ceilings are cached per
device identity (GPU UUID + driver + torch/triton versions, or the CPU model)
under ``~/.cache/kernelgate/ceilings/`` and reused; ``kernelgate calibrate
--force`` re-measures.

Why measured and not datasheet: the roofline gate asks "how close to what this
machine can actually do", and datasheet peaks overstate it (an H200's bf16
datasheet says ~990 TFLOP/s dense; cuBLAS reaches ~650-800 on random data).
The datasheet value is recorded beside each measurement for reference.

Methods (median of ``repeats`` timed runs after warm-up)::

    bandwidth      = 2 * nbytes / t(dst.copy_(src))            # bytes read + written (the copy mix)
    dram_mix       read-only   nbytes / t(src.sum())
                   2 R : 1 W   3 * nbytes / t(add(a, b, out=c))
                   copy        as bandwidth
                   write-only  nbytes / t(dst.zero_())
    peak[u]        = 2 * n^3 / t(a @ b)  for u in fp32 SIMT, TF32, fp16, bf16, fp8
    peak[fp32_3xtf32] = 2 * n^3 / t(three TF32 products)       # fp32 accuracy on tensor cores

Why the mixes: a kernel that mostly reads (a reduction, SwiGLU's two inputs
and one output) streams faster than a copy; with the copy as its ceiling its
utilization would exceed 1. Why 3xTF32: fp32 GEMM without TF32 can still use
tensor cores at fp32 accuracy by splitting each operand in two TF32 parts;
production Triton GEMMs do, and beat fp32 SIMT.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import time
from pathlib import Path

from harness.jsonio import dumps, loads, write_json

# Datasheet leads (dense, no sparsity) for reference only; keyed by a name fragment.
DATASHEET = {
    "H200": {"dram_bytes_per_s": 4.8e12, "fp32_simt": 67e12, "tf32": 495e12, "fp16": 990e12, "bf16": 990e12, "fp8": 1979e12},
    "H100": {"dram_bytes_per_s": 3.35e12, "fp32_simt": 67e12, "tf32": 495e12, "fp16": 990e12, "bf16": 990e12, "fp8": 1979e12},
    "A100": {"dram_bytes_per_s": 2.0e12, "fp32_simt": 19.5e12, "tf32": 156e12, "fp16": 312e12, "bf16": 312e12},
}
UNITS = ("fp32_simt", "tf32", "fp16", "bf16", "fp8", "fp32_3xtf32")
METHOD_VERSION = 2
"""2: read/write mixes and 3xTF32; a cached calibration of an older method is measured again."""


def cache_dir() -> Path:
    return Path(os.environ.get("KERNELGATE_CACHE", Path.home() / ".cache" / "kernelgate")) / "ceilings"


def device_key(env: dict) -> str:
    ident = "|".join(str(env.get(k)) for k in ("device_kind", "device_name", "device_uuid", "driver", "torch", "triton"))
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


def _median_time_s(fn, sync, repeats: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    sync()
    samples = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def _copy_time_s(torch, device: str, nbytes: int, sync, repeats: int) -> float:
    """Median time of one device-to-device copy of ``nbytes`` (the buffers are freed on return)."""
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).uniform_()
    dst = torch.empty_like(src)
    return _median_time_s(lambda: dst.copy_(src), sync, repeats)


def _mixes(torch, device: str, nbytes: int, sync, repeats: int, copy_bw: float) -> list[dict]:
    """Bandwidth per read fraction: read-only, 2 reads : 1 write, copy, write-only."""
    n = nbytes // 4
    out = [{"read_fraction": 0.5, "bytes_per_s": copy_bw}]
    a = torch.empty(n, dtype=torch.float32, device=device).uniform_()
    out.append({"read_fraction": 1.0, "bytes_per_s": nbytes / _median_time_s(lambda: a.sum(), sync, repeats)})
    out.append({"read_fraction": 0.0, "bytes_per_s": nbytes / _median_time_s(lambda: a.zero_(), sync, repeats)})
    b = torch.empty_like(a).uniform_()
    c = torch.empty_like(a)
    out.append({"read_fraction": 2 / 3,
                "bytes_per_s": 3 * nbytes / _median_time_s(lambda: torch.add(a, b, out=c), sync, repeats)})
    return sorted(out, key=lambda m: m["read_fraction"])


def measure(device: str, quick: bool = False) -> dict:
    """Measure the ceilings on ``device`` (``cuda`` or ``cpu``) in this process."""
    import torch

    cuda = device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    repeats = 5 if quick else 15
    out: dict = {"device": device, "repeats": repeats, "peaks_flops_per_s": {}, "method": {}}

    nbytes = (2 << 30) if cuda else (256 << 20)
    out["dram_bytes_per_s"] = 2 * nbytes / _copy_time_s(torch, device, nbytes, sync, repeats)
    out["method"]["dram"] = f"copy of {nbytes >> 20} MiB, bytes read + written, median of {repeats}"
    out["dram_mix"] = _mixes(torch, device, nbytes, sync, repeats, out["dram_bytes_per_s"])
    out["method"]["dram_mix"] = (f"{nbytes >> 20} MiB operands: sum (read only), add (2 read : 1 write), copy, "
                                 f"zero_ (write only); median of {repeats}")
    out["method_version"] = METHOD_VERSION

    n = 8192 if cuda else 1024
    plan = {"fp32_simt": (torch.float32, False), "tf32": (torch.float32, True), "fp16": (torch.float16, None),
            "bf16": (torch.bfloat16, None)}
    if not cuda:
        plan = {"fp32_simt": plan["fp32_simt"], "bf16": plan["bf16"]}
    for unit, (dtype, tf32) in plan.items():
        nn = n if (cuda or dtype == torch.float32) else n // 2
        a = torch.randn(nn, nn, device=device).to(dtype)
        b = torch.randn(nn, nn, device=device).to(dtype)
        if cuda:
            torch.backends.cuda.matmul.allow_tf32 = bool(tf32)
        try:
            t = _median_time_s(lambda: torch.mm(a, b), sync, repeats)
            out["peaks_flops_per_s"][unit] = 2 * nn**3 / t
            out["method"][unit] = f"torch.mm {nn}^3 random {str(dtype).split('.')[-1]}, median of {repeats}"
        except RuntimeError as exc:
            out["method"][unit] = f"unavailable: {exc}"
        del a, b
    if cuda and out["peaks_flops_per_s"].get("tf32"):
        a = torch.randn(n, n, device=device)
        b = torch.randn(n, n, device=device)
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            t = _median_time_s(lambda: (torch.mm(a, b), torch.mm(a, b), torch.mm(a, b)), sync, repeats)
            out["peaks_flops_per_s"]["fp32_3xtf32"] = 2 * n**3 / t
            out["method"]["fp32_3xtf32"] = f"three TF32 torch.mm {n}^3 (3xTF32 fp32 emulation), median of {repeats}"
        except RuntimeError as exc:
            out["method"]["fp32_3xtf32"] = f"unavailable: {exc}"
        del a, b
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False
        if hasattr(torch, "_scaled_mm") and torch.cuda.get_device_capability() >= (8, 9):
            try:
                a = torch.randn(n, n, device=device).to(torch.float8_e4m3fn)
                b = torch.randn(n, n, device=device).to(torch.float8_e4m3fn).t()
                one = torch.tensor(1.0, device=device)
                t = _median_time_s(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
                                   sync, repeats)
                out["peaks_flops_per_s"]["fp8"] = 2 * n**3 / t
                out["method"]["fp8"] = f"torch._scaled_mm {n}^3 e4m3 -> bf16, median of {repeats}"
            except (RuntimeError, TypeError) as exc:
                out["method"]["fp8"] = f"unavailable: {exc}"
        out["l2_bytes"] = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0))
    return out


def datasheet_for(name: str) -> dict:
    for key, vals in DATASHEET.items():
        if key in name:
            return vals
    return {}


def load_or_measure(env: dict, *, force: bool = False, quick: bool = False) -> dict:
    """Cached ceilings for this device, measuring in a subprocess if needed."""
    import subprocess

    path = cache_dir() / f"{device_key(env)}.json"
    if path.exists() and not force:
        data = loads(path.read_bytes())
        if data.get("method_version", 1) >= METHOD_VERSION:
            data["cached"] = True
            data["cache_path"] = str(path)
            return data
    cmd = [sys.executable, "-m", "harness.measure.calibrate", "--device", env["device_kind"], "--write", str(path)]
    if quick:
        cmd.append("--quick")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])
                               + os.pathsep + os.environ.get("PYTHONPATH", "")})
    if proc.returncode != 0:
        raise RuntimeError(f"calibration failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    data = loads(path.read_bytes())
    data["cached"] = False
    data["cache_path"] = str(path)
    return data


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.measure.calibrate")
    ap.add_argument("--device", choices=("cuda", "cpu"), required=True)
    ap.add_argument("--write", required=True)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    from harness.env import snapshot

    env = snapshot(args.device).to_dict()
    data = measure(args.device, quick=args.quick)
    data["env"] = env
    data["datasheet"] = datasheet_for(env["device_name"])
    data["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    write_json(args.write, data)
    print(dumps({"dram_bytes_per_s": data["dram_bytes_per_s"], **data["peaks_flops_per_s"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
