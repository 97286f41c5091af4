"""One-shot GPU check of submissions/tilelang-reference on the device machine.

For every problem and every "gpu" workload: correctness of ModelNew against a
float64 reference (the KernelGate tolerance rule, several input transforms),
then median times of Model and ModelNew with triton.testing.do_bench, printed
as one compact table at the end (and written to $OUT/gpucheck.txt).

Phases (each in its own process, so a CUDA fault costs only the problem that
caused it):
  1. --compile: run every forward once on meta tensors with TileLang's compile
     replaced by a recorder, then nvcc-compile all recorded kernels in parallel
     threads; this fills TileLang's disk cache for the timed runs.
  2. --run IDS: check and time the listed problems, one JSON line per workload.

Usage on the device (from the repository root, TileLang bundle on PYTHONPATH):
  python3 tools/gpucheck_tilelang-reference.py
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import glob
import importlib.util
import json
import math
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUB = ROOT / "submissions" / "tilelang-reference"
OUT = Path(os.environ.get("OUT", "/tmp/gpucheck_out"))
RESULTS = OUT / "gpucheck.jsonl"
TRANSFORMS = ((1.0, 0.0), (4.0, 0.0), (0.5, 1.5), (2.0, -1.0))
TOL = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2}
ELEM = {"float32": 4, "float16": 2, "bfloat16": 2}
DEADLINE_S = float(os.environ.get("GPUCHECK_DEADLINE_S", "270"))


def problem_path(pid: str) -> Path:
    return Path(glob.glob(str(ROOT / "problems" / "*" / f"{pid}.py"))[0])


def load(path: Path, name: str, consts: dict | None = None):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for k, v in (consts or {}).items():
        setattr(mod, k, v)
    return mod


def gpu_workloads(pid: str) -> list[dict]:
    meta = load(problem_path(pid), f"p_{pid}").KERNELGATE
    return [w for w in meta["workloads"] if "gpu" in w["tags"]]


def all_ids() -> list[str]:
    return sorted(Path(p).stem for p in glob.glob(str(SUB / "*.py")))


# ----------------------------------------------------------------------------- phase 1
def compile_all() -> None:
    import torch
    import tilelang  # noqa: F401
    tjit = sys.modules["tilelang.jit"]
    real_compile = tjit.compile
    recorded = []
    torch_dt = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}

    class Stub:
        def __init__(self, func, out_idx):
            params = list(func.params)
            idx = out_idx if isinstance(out_idx, list) else ([] if out_idx is None else [out_idx])
            self.out = [i % len(params) for i in idx]
            self.bufs = [func.buffer_map[p] for p in params]

        def __call__(self, *args):
            outs = [torch.empty([int(s) for s in b.shape], dtype=torch_dt[str(b.dtype)], device="meta")
                    for i, b in enumerate(self.bufs) if i in self.out]
            return outs[0] if len(outs) == 1 else outs

    def recorder(func=None, **kw):
        recorded.append((func, kw))
        return Stub(func, kw.get("out_idx"))

    tjit.compile = recorder
    for pid in all_ids():
        for w in gpu_workloads(pid):
            try:
                mod = load(problem_path(pid), f"p_{pid}_c", w["set"])
                cand = load(SUB / f"{pid}.py", f"c_{pid}_{w['name']}")
                dt = torch_dt[w["dtype"]]
                model = cand.ModelNew(*mod.get_init_inputs()).to(dt)
                with torch.device("meta"):
                    metas = mod.get_inputs()
                with torch.no_grad():
                    model.to("meta")(*[m.to(dt) for m in metas])
            except Exception as exc:  # noqa: BLE001
                print(f"RECORD_FAIL {pid} {w['name']}: {type(exc).__name__}: {exc}", flush=True)
    tjit.compile = real_compile
    print(f"recorded {len(recorded)} kernels", flush=True)
    t0 = time.time()

    def build(item):
        func, kw = item
        try:
            real_compile(func, **kw)
            return None
        except Exception as exc:  # noqa: BLE001
            return f"{type(exc).__name__}: {str(exc)[-600:]}"

    with cf.ThreadPoolExecutor(max(1, min(len(recorded), os.cpu_count() or 8))) as ex:
        errs = [e for e in ex.map(build, recorded) if e]
    for e in errs:
        print("COMPILE_FAIL", e, flush=True)
    print(f"compiled {len(recorded) - len(errs)}/{len(recorded)} kernels in {time.time() - t0:.1f}s", flush=True)


# ----------------------------------------------------------------------------- phase 2
def check_one(pid: str, w: dict, t_start: float) -> dict:
    import torch
    import triton.testing

    rec = {"pid": pid, "workload": w["name"], "dtype": w["dtype"]}
    path = problem_path(pid)
    mod = load(path, f"p_{pid}_r", w["set"])
    meta = mod.KERNELGATE
    dt = getattr(torch, w["dtype"])
    consts = {k: v for k, v in vars(mod).items() if k.isupper() and isinstance(v, (int, float))}
    consts["ELEM"] = ELEM[w["dtype"]]
    red = meta.get("reduction_length")
    red_len = eval(red, {"__builtins__": {}, "min": min, "max": max}, consts) if red else 1
    nbytes = eval(meta["bytes"], {"__builtins__": {}, "min": min, "max": max}, consts)
    flops = eval(meta["flops"], {"__builtins__": {}, "min": min, "max": max}, consts)
    tol = TOL[w["dtype"]]
    growth = max(1.0, math.sqrt(red_len / 1024))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    torch.manual_seed(0)
    with torch.device("cuda"):
        ref = mod.Model(*mod.get_init_inputs())
    ref = ref.to(device="cuda", dtype=dt).eval()
    cand = load(SUB / f"{pid}.py", f"c_{pid}_r_{w['name']}")
    with torch.device("cuda"):
        new = cand.ModelNew(*mod.get_init_inputs())
    new = new.to(device="cuda", dtype=dt).eval()
    sd = ref.state_dict()
    with torch.no_grad():
        for k, t in new.state_dict().items():
            if k in sd and sd[k].shape == t.shape:
                t.copy_(sd[k].to(t.dtype))
    ref64 = load(path, f"p_{pid}_r64", w["set"]).Model(*mod.get_init_inputs())
    ref64.load_state_dict({k: v.double() for k, v in ref.state_dict().items()})
    ref64 = ref64.to(device="cuda", dtype=torch.float64).eval()

    worst, max_err, ok, detail = 0.0, 0.0, True, ""
    inputs = None
    for r, (scale, shift) in enumerate(TRANSFORMS):
        torch.manual_seed(1000 + r)
        with torch.device("cuda"):
            raw = mod.get_inputs()
        inputs = [(x * scale + shift).to(dt).contiguous() if x.is_floating_point() else x for x in raw]
        del raw
        with torch.no_grad():
            out = new(*inputs)
            torch.cuda.synchronize()
            lib = ref(*inputs)
            exp = ref64(*[x.double() if x.is_floating_point() else x for x in inputs])
        if type(out) is not torch.Tensor or out.shape != exp.shape or out.dtype != dt:
            shape, dtype = getattr(out, "shape", None), getattr(out, "dtype", None)
            ok, detail = False, f"bad output {type(out).__name__} {shape} {dtype}"
            break
        finite = torch.isfinite(exp)
        sc = max(1.0, float(exp[finite].pow(2).mean().sqrt()))
        allowed = tol * sc * growth + tol * exp.abs()
        lib_ex = float(((lib.double() - exp).abs() / allowed)[finite].max())
        if lib_ex > 1.0:
            allowed = allowed * 1.5 * lib_ex
        err = (out.double() - exp).abs()
        if bool((~torch.isfinite(out.double()) & finite).any()):
            ok, detail = False, f"round {r}: NaN/Inf in output"
            break
        ex = float((err / allowed)[finite].max())
        max_err = max(max_err, float(err[finite].max()))
        worst = max(worst, ex)
        if ex > 1.0:
            idx = int((err / allowed).flatten().argmax())
            ok = False
            detail = (f"round {r} (x*{scale}+{shift}): {int((err / allowed > 1).sum())} bad, worst idx {idx} "
                      f"got {float(out.flatten()[idx]):.5g} want {float(exp.flatten()[idx]):.5g}")
            break
        del out, lib, exp, err, allowed
    rec.update(ok=ok, excess=worst, max_err=max_err, detail=detail)
    del ref64
    torch.cuda.empty_cache()

    if ok and time.time() - t_start < DEADLINE_S:
        with torch.no_grad():
            t_ref = triton.testing.do_bench(lambda: ref(*inputs), warmup=25, rep=100, return_mode="median")
            t_new = triton.testing.do_bench(lambda: new(*inputs), warmup=25, rep=100, return_mode="median")
        rec.update(t_torch=t_ref, t_tl=t_new, speedup=t_ref / t_new, gbps=nbytes / t_new / 1e6,
                   tflops=flops / t_new / 1e9)
    return rec


def run(ids: list[str], t_start: float) -> None:
    import torch

    OUT.mkdir(parents=True, exist_ok=True)
    for pid in ids:
        for w in gpu_workloads(pid):
            try:
                rec = check_one(pid, w, t_start)
            except Exception as exc:  # noqa: BLE001
                msg = f"{type(exc).__name__}: {exc}"
                rec = {"pid": pid, "workload": w["name"], "dtype": w["dtype"], "ok": False,
                       "detail": msg[:800], "trace": traceback.format_exc()[-2000:]}
                cuda_fault = "CUDA" in msg or "cuda" in type(exc).__name__.lower() or "illegal" in msg
                with open(RESULTS, "a") as f:
                    f.write(json.dumps(rec) + "\n")
                print(json.dumps(rec), flush=True)
                if cuda_fault:
                    sys.exit(3)
                continue
            with open(RESULTS, "a") as f:
                f.write(json.dumps(rec) + "\n")
            print(json.dumps({k: v for k, v in rec.items() if k != "trace"}), flush=True)
            torch.cuda.empty_cache()


def table() -> str:
    rows = [json.loads(line) for line in open(RESULTS)] if RESULTS.exists() else []
    head = (f"{'problem':20s} {'workload':27s} {'ok':4s} {'excess':>7s} {'max_err':>9s} {'t_torch':>8s} "
            f"{'t_tl':>8s} {'speedup':>7s} {'GB/s':>7s} {'TFLOP/s':>7s}")
    lines = [head]
    for r in rows:
        def f(k, fmt):
            return format(r[k], fmt) if k in r else "-"
        ok = "yes" if r.get("ok") else "NO"
        lines.append(f"{r['pid']:20s} {r['workload']:27s} {ok:4s} {f('excess', '7.3f'):>7s} "
                     f"{f('max_err', '9.3g'):>9s} {f('t_torch', '8.4f'):>8s} {f('t_tl', '8.4f'):>8s} "
                     f"{f('speedup', '7.2f'):>7s} {f('gbps', '7.0f'):>7s} {f('tflops', '7.1f'):>7s}")
    for r in rows:
        if not r.get("ok"):
            lines.append(f"FAIL {r['pid']} {r['workload']}: {r.get('detail', '')[:400]}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--run", nargs="*")
    ap.add_argument("--t0", type=float, default=None)
    args = ap.parse_args()
    if args.compile:
        compile_all()
        return
    if args.run is not None:
        run(args.run, args.t0 or time.time())
        return
    t0 = time.time()
    OUT.mkdir(parents=True, exist_ok=True)
    if RESULTS.exists():
        RESULTS.unlink()
    subprocess.run([sys.executable, __file__, "--compile"], check=False)
    print(f"compile phase done at {time.time() - t0:.0f}s", flush=True)
    todo = all_ids()
    while todo:
        subprocess.run([sys.executable, __file__, "--run", *todo, "--t0", str(t0)], check=False)
        done = {json.loads(line)["pid"] for line in open(RESULTS)} if RESULTS.exists() else set()
        remaining = [p for p in todo if p not in done]
        if remaining == todo:
            remaining = todo[1:]
        todo = remaining
    text = table()
    (OUT / "gpucheck.txt").write_text(text + "\n")
    print(f"total {time.time() - t0:.0f}s")
    print(text)


if __name__ == "__main__":
    main()
