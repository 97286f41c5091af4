"""Run KernelBench's own evaluator (``kernelbench.eval.eval_kernel_against_ref``) on (problem, kernel) pairs.

The third opinion next to KernelGate and ``independent_check.py``: the
evaluator of a KernelBench checkout (``--kernelbench DIR``, the repository
root holding ``src/kernelbench``; checked against commit 423217d9, see
``tools/kernelbench/README.md``), called as its ``scripts/run_and_check.py``
calls it, one fresh process per pair, one JSON line per kernel::

    python tools/kernelbench/run_kernelbench_eval.py --kernelbench ~/KernelBench \\
        --problems ~/KernelBench/KernelBench/level1 --kernels corpus-subs/some-folder --out kb_eval.jsonl \\
        [--backend triton] [--precision fp32] [--timing-method cuda_event]

Needs a CUDA GPU (the evaluator asserts one). ``kernelbench/__init__.py``
imports its LLM-client helpers (``openai``, ``litellm``, ``python-dotenv``);
where those are not installed (an offline GPU machine) they are replaced by
empty stand-in modules in the evaluating process only, since evaluation never
calls them. KernelGate's code is not imported.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from independent_check import pair_files, run_all  # noqa: E402 - same folder (no harness import)

_STAND_INS = {"openai": ("OpenAI",), "litellm": ("completion",), "dotenv": ("load_dotenv",)}


def _stand_in_missing() -> list[str]:
    """Empty modules for the LLM-client imports kernelbench/__init__ makes, where they are not installed."""
    import importlib.util

    missing = []
    for name, attrs in _STAND_INS.items():
        if importlib.util.find_spec(name) is None:
            mod = types.ModuleType(name)
            for attr in attrs:
                setattr(mod, attr, lambda *a, **k: None)
            sys.modules[name] = mod
            missing.append(name)
    return missing


def _dsl_of(kernel: Path) -> str:
    """KernelBench's backend name for a kernel file, from its imports."""
    text = kernel.read_text(encoding="utf-8", errors="replace")
    return "tilelang" if "import tilelang" in text or "from tilelang" in text else "triton"


def _child(args: argparse.Namespace) -> int:
    stood_in = _stand_in_missing()
    sys.path.insert(0, str(Path(args.kernelbench) / "src"))
    import torch
    from kernelbench import eval as kb_eval

    problem, kernel = (Path(p) for p in args.one)
    rec: dict = {"stand_ins": stood_in}
    try:
        result = kb_eval.eval_kernel_against_ref(
            original_model_src=problem.read_text(), custom_model_src=kernel.read_text(),
            measure_performance=not args.no_timing, timing_method=args.timing_method,
            num_correct_trials=args.trials, num_perf_trials=args.perf_trials, verbose=False,
            device=torch.device("cuda:0"), backend=args.backend,
            precision=kb_eval.get_torch_dtype_from_string(args.precision))
        if result is None:
            rec.update(status="error", error="the evaluator returned None (a lock-file error during compilation; "
                                              "KernelBench says to retry)")
        else:
            rec.update(status="correct" if result.correctness else ("incorrect" if result.compiled else "error"),
                       compiled=result.compiled, correctness=result.correctness, runtime_us=result.runtime,
                       ref_runtime_us=result.ref_runtime,
                       metadata=json.loads(json.dumps(result.metadata, default=str)))
    except BaseException as exc:  # noqa: BLE001 - the evaluator's own failures become the record
        rec.update(status="error", error=f"{type(exc).__name__}: {exc}")
    sys.stdout.write("\nKB_EVAL_RESULT " + json.dumps(rec, default=str) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernelbench", required=True, type=Path, help="KernelBench repository root (holds src/kernelbench)")
    ap.add_argument("--problems", type=Path)
    ap.add_argument("--kernels", type=Path, action="append", default=[], help="repeatable")
    ap.add_argument("--jobs", type=int, default=1, help="pairs evaluated at once, each in its own process (default 1, "
                                                       "as KernelBench's own script on one GPU)")
    ap.add_argument("--pair", nargs=2, action="append", default=[], metavar=("PROBLEM", "KERNEL"))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--backend", default="triton", help="cuda, triton, tilelang, cute, ... (KernelBench's names); "
                                                        "auto: triton or tilelang by the kernel's imports")
    ap.add_argument("--precision", default="fp32", choices=("fp32", "fp16", "bf16", "auto"),
                    help="auto: fp16 for TileLang kernels (the evaluator allows it no other), else fp32")
    ap.add_argument("--timing-method", default="cuda_event", help="KernelBench's timing.get_timing_function names")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--perf-trials", type=int, default=100)
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--no-timing", action="store_true")
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if not (args.kernelbench / "src" / "kernelbench" / "eval.py").is_file():
        ap.error(f"--kernelbench {args.kernelbench}: no src/kernelbench/eval.py there (give the repository root)")
    if args.one:
        return _child(args)
    pairs = [(Path(p), Path(k)) for p, k in args.pair]
    for folder in args.kernels if args.problems else ():
        found, notes = pair_files(args.problems, folder)
        pairs += found
        for note in notes:
            print(f"run_kernelbench_eval: skipped {note}", file=sys.stderr)
    if not pairs:
        ap.error("nothing to evaluate: give --problems DIR --kernels DIR or --pair PROBLEM KERNEL")

    def one(problem: Path, kernel: Path) -> dict:
        backend = args.backend if args.backend != "auto" else _dsl_of(kernel)
        precision = args.precision if args.precision != "auto" else ("fp16" if backend == "tilelang" else "fp32")
        cmd = [sys.executable, str(Path(__file__).resolve()), "--one", str(problem), str(kernel),
               "--kernelbench", str(args.kernelbench), "--out", str(args.out), "--backend", backend,
               "--precision", precision, "--timing-method", args.timing_method, "--trials", str(args.trials),
               "--perf-trials", str(args.perf_trials)] + (["--no-timing"] if args.no_timing else [])
        t0 = time.monotonic()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=dict(os.environ),
                                  stdin=subprocess.DEVNULL)
            line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("KB_EVAL_RESULT ")), None)
            rec = json.loads(line[len("KB_EVAL_RESULT "):]) if line else {
                "status": "error", "error": f"exit code {proc.returncode}, no result", "stderr_tail": proc.stderr[-1500:]}
        except subprocess.TimeoutExpired:
            rec = {"status": "error", "error": f"timed out after {args.timeout:g} s"}
        rec.update(problem=str(problem), kernel=str(kernel), backend=backend, precision=precision,
                   seconds=round(time.monotonic() - t0, 3))
        return rec

    t0 = time.monotonic()
    with open(args.out, "a", encoding="utf-8") as sink:
        counts = run_all(pairs, one, args.jobs, sink)
    print(f"run_kernelbench_eval: {len(pairs)} pair(s) in {time.monotonic() - t0:.1f} s with {args.jobs} job(s): "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
