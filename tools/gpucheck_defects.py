"""One-shot GPU check of the ``submissions/defects`` candidates against their problems' Models.

For every candidate file (or the ones named on the command line) this takes
the problem's first ``gpu`` workload, builds ``Model`` and ``ModelNew`` the way
the harness does (seeded ``Model``, state dict copied where names and shapes
match, both cast to the workload dtype and moved to CUDA), checks the
candidate's output against a float64 reference with the harness tolerance
(``atol * max(1, rms(ref)) * max(1, sqrt(L / 1024)) + rtol * |ref|``), and times
the candidate and the PyTorch ``Model`` with ``triton.testing.do_bench``
(median, L2 flushed between samples). Slow candidates get a small ``rep``
budget so the whole run stays within a few minutes.

Usage (on the GPU machine, from the repository root)::

    python tools/gpucheck_defects.py [submissions/defects/<file>.py ...]

TileLang candidates need ``tilelang`` importable (see ``../shared/device``).
Prints one line per candidate as it goes and a compact table at the end; with
``$OUT`` set, also writes ``$OUT/gpucheck_defects.json``.
"""

from __future__ import annotations

import copy
import glob
import importlib.util
import json
import math
import os
import sys
import time
import traceback

import torch
import triton.testing

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
TOL = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2}


def _load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _size_env(prob) -> dict:
    return {k: getattr(prob, k) for k in dir(prob) if k.isupper() and isinstance(getattr(prob, k), int)}


def check(path: str) -> dict:
    """Correctness and timing of one candidate on its problem's first gpu workload."""
    stem = os.path.basename(path)[:-3]
    pid = stem.split("__")[0]
    prob = _load(glob.glob(os.path.join(ROOT, "problems", "*", pid + ".py"))[0], "problem_" + pid)
    wl = next(w for w in prob.KERNELGATE["workloads"] if "gpu" in w.get("tags", ()))
    for key, val in wl["set"].items():
        setattr(prob, key, val)
    dtype = DTYPES[wl["dtype"]]
    row = {"file": stem, "workload": wl["name"], "ok": False, "max_excess": None,
           "t_torch_ms": None, "t_defect_ms": None, "slowdown": None, "error": None}
    cand = _load(path, "cand_" + stem)
    torch.manual_seed(0)
    ref_model = prob.Model(*prob.get_init_inputs())
    new_model = cand.ModelNew(*prob.get_init_inputs())
    own = new_model.state_dict()
    new_model.load_state_dict({k: v for k, v in ref_model.state_dict().items()
                               if k in own and own[k].shape == v.shape}, strict=False)
    torch.manual_seed(0)
    inputs_cpu = prob.get_inputs()
    ref64 = copy.deepcopy(ref_model).cuda().double()
    with torch.no_grad():
        ref = ref64(*[t.cuda().double() for t in inputs_cpu])
    del ref64
    ref_model = ref_model.to(dtype).cuda()
    new_model = new_model.to(dtype).cuda()
    xs = [t.to(dtype).cuda() for t in inputs_cpu]
    del inputs_cpu
    with torch.no_grad():
        out = new_model(*xs)
        torch.cuda.synchronize()
        red = eval(str(prob.KERNELGATE.get("reduction_length", "1")), {"min": min, "max": max}, _size_env(prob))
        tol = TOL[wl["dtype"]]
        rms = ref.pow(2).mean().sqrt().item()
        bound = tol * max(1.0, rms) * max(1.0, math.sqrt(red / 1024)) + tol * ref.abs()
        if out.dtype != dtype or out.shape != ref.shape:
            row["error"] = f"output {out.dtype} {tuple(out.shape)} vs expected {dtype} {tuple(ref.shape)}"
        else:
            excess = ((out.double() - ref).abs() / bound).max().item()
            row["max_excess"] = excess
            row["ok"] = bool(excess <= 1.0)
        del out, ref, bound
        torch.cuda.empty_cache()
        t_torch = triton.testing.do_bench(lambda: ref_model(*xs), warmup=10, rep=50, return_mode="median")
        first = time.perf_counter()
        new_model(*xs)
        torch.cuda.synchronize()
        once_ms = (time.perf_counter() - first) * 1e3
        rep = 20 if once_ms > 5 else 50
        t_new = triton.testing.do_bench(lambda: new_model(*xs), warmup=5, rep=rep, return_mode="median")
    row.update(t_torch_ms=t_torch, t_defect_ms=t_new, slowdown=t_new / t_torch)
    return row


def main(argv: list[str]) -> int:
    found = sorted(glob.glob(os.path.join(ROOT, "submissions", "defects", "*.py")))
    files = argv or sorted(found, key=lambda p: "__tl_" in p)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}", flush=True)
    rows = []
    for path in files:
        start = time.perf_counter()
        try:
            row = check(path)
        except Exception as exc:  # noqa: BLE001 - report and go on to the next candidate
            row = {"file": os.path.basename(path)[:-3], "workload": "-", "ok": False, "max_excess": None,
                   "t_torch_ms": None, "t_defect_ms": None, "slowdown": None,
                   "error": f"{type(exc).__name__}: {exc}"[:300]}
            traceback.print_exc()
        row["wall_s"] = time.perf_counter() - start
        rows.append(row)
        print(json.dumps(row), flush=True)
        torch.cuda.empty_cache()
    fmt = "{:<36} {:<26} {:<4} {:>7} {:>10} {:>11} {:>9}"
    print()
    print(fmt.format("file", "workload", "ok", "excess", "t_torch_ms", "t_defect_ms", "slowdown"))
    for r in rows:
        num = lambda v, f: "-" if v is None else format(v, f)  # noqa: E731
        print(fmt.format(r["file"], r["workload"][:26], "yes" if r["ok"] else "NO", num(r["max_excess"], ".3f"),
                         num(r["t_torch_ms"], ".3f"), num(r["t_defect_ms"], ".3f"), num(r["slowdown"], ".1f")))
        if r["error"]:
            print("    error:", r["error"])
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "gpucheck_defects.json"), "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
