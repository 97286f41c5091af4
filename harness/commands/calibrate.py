"""``kernelgate calibrate``: measure (or show cached) DRAM bandwidth and matmul peaks."""

from __future__ import annotations

import argparse

from harness.commands._common import table

EPILOG = """\
The ceilings are the roofs of U_roof = t_floor / t_kernel; they are measured, never copied from a
datasheet (the datasheet values are shown beside them). The cache is keyed by GPU UUID, driver and
torch/triton versions; 'kernelgate report' draws the roofs from it when the results come from this device.

examples:
  kernelgate calibrate
  kernelgate calibrate --force          # measure again, e.g. after a driver or clock change
  kernelgate calibrate --device cpu --quick
"""


def cmd_calibrate(args: argparse.Namespace) -> int:
    from harness import env as envmod
    from harness.measure.calibrate import load_or_measure

    device = args.device or envmod.default_device()
    snap = envmod.snapshot(device)
    data = load_or_measure(snap.to_dict(), force=args.force, quick=args.quick or device == "cpu")
    sheet = data.get("datasheet", {})
    rows = [["DRAM bandwidth", f"{data['dram_bytes_per_s'] / 1e12:.3f} TB/s",
             f"{sheet['dram_bytes_per_s'] / 1e12:.2f} TB/s" if "dram_bytes_per_s" in sheet else "-", data["method"]["dram"]]]
    for unit, v in data["peaks_flops_per_s"].items():
        rows.append([f"matmul {unit}", f"{v / 1e12:.1f} TFLOP/s", f"{sheet[unit] / 1e12:.0f} TFLOP/s" if unit in sheet else "-",
                     data["method"].get(unit, "")])
    print(f"device: {snap.device_name} ({device})")
    print(table(rows, ["ceiling", "measured", "datasheet", "method"]))
    print(f"\n{'cached' if data.get('cached') else 'measured now'}: {data['cache_path']}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="measure the device's roofline ceilings",
                       description="Measure DRAM bandwidth (large device copy, bytes read + written) and dense matmul "
                                   "throughput per unit and dtype (fp32 SIMT, TF32, fp16, bf16, fp8), each a median of "
                                   "repeated runs, and cache them per device. 'kernelgate run' calls this on first use.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=("cuda", "cpu"))
    p.add_argument("--force", action="store_true", help="measure again even if cached")
    p.add_argument("--quick", action="store_true", help="fewer repeats")
    p.set_defaults(func=cmd_calibrate)
