"""Each honest library wrapper's output against a float64 reference, outside KernelGate, beside its record.

For every record in RESULTS (a ``kernelgate run`` of tests/execute/fixtures/honest_gpu), the wrapper and the
problem's ``Model`` (in the workload's dtype) are run in this plain process at the record's workload on two seeds,
and both are compared with the ``Model`` in float64: ``lib_err`` and ``torch_err`` are the largest absolute error
over the largest absolute reference value. A wrapper whose ``lib_err`` is within 8x PyTorch's own (or under 1e-5)
is correct here, so any record of it other than PASSED is the harness's doing. Needs a CUDA GPU.

Usage: python tools/device/honest_libraries.py FIXTURES_DIR RESULTS_DIR [--json OUT.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check(fixture: Path, problem_file: Path, workload: dict, device: str = "cuda") -> dict:
    """lib_err and torch_err of one wrapper at one workload (two seeds, the worse of each)."""
    import torch

    from harness.execute.shared.inputs import copy_matching_state, make_inputs, make_reference_model

    prob = _load(problem_file, f"p_{fixture.stem}")
    for key, value in workload["set"].items():
        setattr(prob, key, value)
    cand = _load(fixture, f"c_{fixture.stem}")
    dtype = workload.get("dtype", "float32")
    torch.backends.cuda.matmul.allow_tf32 = bool(workload.get("allow_tf32", False))
    torch.backends.cudnn.allow_tf32 = bool(workload.get("allow_tf32", False))
    ref = make_reference_model(prob, dtype, device, 0)
    ref64 = make_reference_model(prob, "float64", device, 0)
    copy_matching_state(ref, ref64)
    with torch.device(device):
        new = cand.ModelNew(*prob.get_init_inputs())
    new = new.to(device=device, dtype=getattr(torch, dtype)).eval()
    copy_matching_state(ref, new)
    lib_err = torch_err = 0.0
    with torch.no_grad():
        for seed in (11, 12):
            inputs = make_inputs(prob, dtype, device, seed, 0, "none")
            want = ref64(*[x.double() if x.is_floating_point() else x for x in inputs])
            scale = max(want.abs().max().item(), 1e-30)
            got = new(*inputs)
            if got.shape != want.shape:
                return {"error": f"shape {tuple(got.shape)}, want {tuple(want.shape)}"}
            lib_err = max(lib_err, (got.double() - want).abs().max().item() / scale)
            torch_err = max(torch_err, (ref(*inputs).double() - want).abs().max().item() / scale)
            del got, want, inputs
    if device == "cuda":
        torch.cuda.empty_cache()
    return {"lib_err": lib_err, "torch_err": torch_err, "agrees": lib_err <= max(8 * torch_err, 1e-5)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="example: python tools/device/honest_libraries.py "
                                        "tests/execute/fixtures/honest_gpu out/honest")
    ap.add_argument("fixtures", type=Path)
    ap.add_argument("results", type=Path)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from harness.results.store import load_results

    problems = {p.stem: p for p in (ROOT / "problems").glob("*/*.py")}
    rows, bad = [], 0
    for r in sorted(load_results(args.results), key=lambda r: (r.candidate, r.workload or "")):
        fixture = args.fixtures / r.candidate.split("/")[-1]
        pid = fixture.name.split("__")[0]
        prob = _load(problems[pid], f"meta_{pid}")
        wl = next((w for w in prob.KERNELGATE["workloads"] if w["name"] == r.workload), None)
        try:
            got = check(fixture, problems[pid], wl) if wl else {"error": f"workload {r.workload} not in problem"}
        except Exception as exc:  # noqa: BLE001 - a wrapper that fails outside the harness is reported, not raised
            got = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        status = r.status.value
        false_alarm = got.get("agrees") and status != "PASSED"
        bad += bool(false_alarm) or status in ("REWARD_HACK", "HARNESS_ERROR")
        verdict = r.screening.verdict.value if r.screening and r.screening.verdict else "-"
        e_lib = f"{r.screening.e_lib:.2f}" if r.screening else "-"
        msg = (r.error.message[:90] if r.error else "") if status != "PASSED" else ""
        rows.append({"candidate": fixture.name, "workload": r.workload, "status": status, "verdict": verdict,
                     "e_lib": e_lib, **got, "message": msg})
        le = f"{got['lib_err']:.2e}" if "lib_err" in got else "-"
        te = f"{got['torch_err']:.2e}" if "torch_err" in got else "-"
        print(f"{'BAD' if false_alarm else 'ok '} {fixture.name:44s} {r.workload[:26]:26s} {status:18s} {verdict:20s} "
              f"E_lib={e_lib:6s} lib_err={le} torch_err={te} {got.get('error', '')}{msg}")
    print(f"{len(rows)} records, {bad} accused or failed by the harness while correct outside it")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
