"""Independent correctness and speed check of KernelBench kernels, the way KernelBench's evaluator does it.

Standalone on purpose: it imports nothing from ``harness``, so it can confirm
(or contradict) KernelGate's verdicts with a second, simpler implementation
of KernelBench's own protocol (``kernelbench.eval.eval_kernel_against_ref``
at the KernelBench commit named in ``tools/kernelbench/README.md``):

* seed 42, then ``get_init_inputs()``; every tensor is cast to the precision
  and moved to the device (KernelBench casts every tensor, integer ones too);
* ``Model`` and ``ModelNew`` are each built under ``torch.no_grad()`` right after
  seeding with 42, so their parameters match when the layers match; neither
  is put in ``.eval()`` (KernelBench never does: BatchNorm uses batch
  statistics, Dropout is active);
* ``--trials`` (default 5) correctness trials, their seeds drawn from
  ``torch.manual_seed(42)``; per trial: seed, ``get_inputs()``, cast, the
  reference forward, then the kernel's; an output shape mismatch fails the
  kernel, otherwise ``torch.allclose(ref, out, atol, rtol)`` per output
  (default ``atol = rtol = 1e-2``, KernelBench v0/v0.1; its current code uses
  1e-4 for fp32 and 1e-2 for fp16/bf16: ``--tolerance precision``);
* on CUDA, both forwards are timed with ``triton.testing.do_bench`` (median ms)
  on the inputs of seed 42; on a CPU (``TRITON_INTERPRET=1``) timing is skipped
  and the record says so.

Each (problem, kernel) pair runs in a fresh ``python`` subprocess with a
timeout; the parent writes one JSON line per kernel::

    {"problem": ..., "kernel": ..., "status": "correct" | "incorrect" | "error", "error": null | "...",
     "max_abs_diff": 0.0012, "trials_passed": 5, "trials": 5, "ref_ms": 1.9, "kernel_ms": 0.8, "speedup": 2.4, ...}

Usage::

    python tools/kernelbench/independent_check.py --problems KernelBench/level1 --kernels my_run/ --out check.jsonl
    python tools/kernelbench/independent_check.py --pair level1/19_ReLU.py my_run/19_ReLU.py --out check.jsonl

Kernels are paired with problems by name: ``<problem id>.py``, ``<problem id>__<variant>.py`` (longest id
first), or KernelBench run files ``level_L_problem_N_sample_S_kernel.py`` against problems ``N_*``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import time
import traceback
from pathlib import Path

SEED = 42
KB_TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 1e-2}
_RUN_FILE = re.compile(r"^level_?(\d+)_problem_?(\d+)_(?:sample|solution)_?(\d+)(?:_kernel)?$")


# --------------------------------------------------------------------------- pairing (parent)

def _problem_files(problem_dir: Path) -> dict[str, tuple[Path, int | None]]:
    """``{id: (file, level)}`` for a level folder (``level1/``) or a folder of level folders (KernelBench/)."""
    def level_of(folder: Path) -> int | None:
        m = re.fullmatch(r"level[_-]?(\d+)", folder.name)
        return int(m.group(1)) if m else None

    out: dict[str, tuple[Path, int | None]] = {}
    for folder in [problem_dir] + sorted(d for d in problem_dir.iterdir() if d.is_dir() and level_of(d) is not None):
        for p in sorted(folder.glob("*.py")):
            if not p.name.startswith("_"):
                out.setdefault(p.stem, (p, level_of(folder)))
    return out


def pair_files(problem_dir: Path, kernel_dir: Path) -> tuple[list[tuple[Path, Path]], list[str]]:
    """(problem, kernel) pairs by file name, and a note for every kernel file that pairs with no problem.

    A kernel named ``<id>.py`` or ``<id>__<variant>.py`` pairs with problem ``<id>`` (longest id first); a
    KernelBench run file ``level_L_problem_N_sample_S_kernel.py`` with the problem numbered N of level L
    (of a ``levelL/`` folder; in a folder with another name, with the problem numbered N).
    """
    problems = _problem_files(problem_dir)
    by_level_number: dict[tuple[int | None, int], list[str]] = {}
    for pid, (_path, level) in problems.items():
        m = re.match(r"^(\d+)_", pid)
        if m:
            by_level_number.setdefault((level, int(m.group(1))), []).append(pid)
    ids = sorted(problems, key=len, reverse=True)
    pairs, unpaired = [], []
    for kernel in sorted(kernel_dir.glob("*.py")):
        stem = kernel.stem
        pid = next((p for p in ids if stem == p or stem.startswith(p + "__")), None)
        m = _RUN_FILE.match(stem)
        if pid is None and m:
            level, number = int(m.group(1)), int(m.group(2))
            # a folder not named levelL has problems of unknown level: those pair by number alone
            found = by_level_number.get((level, number), []) or by_level_number.get((None, number), [])
            if not found:
                unpaired.append(f"{kernel.name}: no level-{level} problem {number} under {problem_dir}")
                continue
            pid = found[0] if len(found) == 1 else None
        if pid is None:
            unpaired.append(f"{kernel.name}: no problem under {problem_dir} matches its name")
            continue
        pairs.append((problems[pid][0], kernel))
    return pairs, unpaired


# --------------------------------------------------------------------------- the check (child)

def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and triton's source lookup need the module registered
    spec.loader.exec_module(module)
    return module


def _seed(seed: int) -> None:
    import torch

    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed(seed)


def _outputs(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _finite(x: float | None):
    if x is None or math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def check_one(problem: Path, kernel: Path, *, device: str, precision: str, trials: int, atol: float, rtol: float,
              time_it: bool) -> dict:
    """KernelBench's protocol for one pair, in this process (the parent runs it in a fresh one)."""
    import torch

    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]
    rec: dict = {"status": "error", "error": None, "max_abs_diff": None, "trials_passed": 0, "trials": trials,
                 "ref_ms": None, "kernel_ms": None, "speedup": None, "timing": None}

    def cast(x):
        return x.to(dtype=dtype).to(device) if isinstance(x, torch.Tensor) else x

    try:
        ref_mod = _load(problem, "kb_reference")
        _seed(SEED)
        init = [cast(x) for x in ref_mod.get_init_inputs()]
        with torch.no_grad():
            _seed(SEED)
            ref = ref_mod.Model(*init)
    except Exception as exc:  # noqa: BLE001 - a broken problem file is reported, not raised
        rec["error"] = f"problem: {type(exc).__name__}: {exc}"
        return rec
    try:
        new_mod = _load(kernel, "kb_candidate")
        with torch.no_grad():
            _seed(SEED)
            new = new_mod.ModelNew(*init)
            ref = ref.to(device=device, dtype=dtype)
            new = new.to(device=device, dtype=dtype)
    except Exception as exc:  # noqa: BLE001
        rec["error"] = f"kernel does not load or build: {type(exc).__name__}: {exc}"
        rec["traceback_tail"] = traceback.format_exc()[-1500:]
        return rec

    torch.manual_seed(SEED)
    seeds = [int(torch.randint(0, 2**32 - 1, (1,)).item()) for _ in range(trials)]
    worst = 0.0
    with torch.no_grad():
        for trial_seed in seeds:
            _seed(trial_seed)
            inputs = [cast(x) for x in ref_mod.get_inputs()]
            try:
                expected = _outputs(ref(*inputs))
                got = _outputs(new(*inputs))
                if device.startswith("cuda"):
                    torch.cuda.synchronize()
            except Exception as exc:  # noqa: BLE001
                rec["error"] = f"forward raised {type(exc).__name__}: {exc}"
                rec["traceback_tail"] = traceback.format_exc()[-1500:]
                return rec
            if len(got) != len(expected) or any(
                    not isinstance(g, torch.Tensor) or g.shape != e.shape for g, e in zip(got, expected)):
                rec.update(status="incorrect", error=f"output shape mismatch: expected "
                           f"{[tuple(e.shape) for e in expected]}, got "
                           f"{[tuple(g.shape) if isinstance(g, torch.Tensor) else type(g).__name__ for g in got]}")
                return rec
            if any(g.dtype != e.dtype for g, e in zip(got, expected)):  # torch.allclose raises on this in KernelBench
                rec.update(status="incorrect", error=f"output dtype mismatch: expected {[e.dtype for e in expected]}, "
                           f"got {[g.dtype for g in got]}")
                return rec
            ok = True
            for e, g in zip(expected, got):
                diff = (e.float() - g.float()).abs().max().item() if e.numel() else 0.0
                worst = max(worst, diff) if math.isfinite(diff) else float("nan")
                ok = ok and bool(torch.allclose(e, g, atol=atol, rtol=rtol))
            rec["trials_passed"] += ok
    rec["max_abs_diff"] = _finite(worst)
    rec["status"] = "correct" if rec["trials_passed"] == trials else "incorrect"
    if rec["status"] != "correct":
        return rec
    if not (time_it and device.startswith("cuda")):
        rec["timing"] = "skipped: triton.testing.do_bench needs a CUDA device" if time_it else "skipped: --no-timing"
        return rec
    from triton.testing import do_bench

    _seed(SEED)
    inputs = [cast(x) for x in ref_mod.get_inputs()]
    with torch.no_grad():
        rec["ref_ms"] = float(do_bench(lambda: ref(*inputs), return_mode="median"))
        rec["kernel_ms"] = float(do_bench(lambda: new(*inputs), return_mode="median"))
    rec["speedup"] = rec["ref_ms"] / rec["kernel_ms"] if rec["kernel_ms"] else None
    rec["timing"] = "triton.testing.do_bench (median of its adaptive repetitions, ms)"
    return rec


def _child(args: argparse.Namespace) -> int:
    problem, kernel = Path(args.one[0]), Path(args.one[1])
    try:
        rec = check_one(problem, kernel, device=args.device, precision=args.precision, trials=args.trials,
                        atol=args.atol, rtol=args.rtol, time_it=not args.no_timing)
    except BaseException as exc:  # noqa: BLE001 - whatever happens becomes the record
        rec = {"status": "error", "error": f"{type(exc).__name__}: {exc}", "traceback_tail": traceback.format_exc()[-1500:]}
    sys.stdout.write("\nKB_CHECK_RESULT " + json.dumps(rec, allow_nan=False, default=str) + "\n")
    sys.stdout.flush()
    return 0


# --------------------------------------------------------------------------- the parent

def _versions() -> dict:
    out = {"python": sys.version.split()[0]}
    for mod in ("torch", "triton"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - reported as absent
            out[mod] = None
    return out


def _tolerance(tolerance: str, precision: str) -> float:
    return KB_TOLERANCE[precision] if tolerance == "precision" else float(tolerance)


def kernel_precision(kernel: Path, precision: str) -> str:
    """``precision``, or for ``auto`` fp16 for a TileLang kernel (KernelBench's evaluator runs TileLang in fp16/bf16
    only) and fp32 for the rest."""
    if precision != "auto":
        return precision
    text = kernel.read_text(encoding="utf-8", errors="replace")
    return "fp16" if "import tilelang" in text or "from tilelang" in text else "fp32"


def run_pair(problem: Path, kernel: Path, args: argparse.Namespace) -> dict:
    """One fresh subprocess for one pair; its record (crashes and timeouts become status 'error')."""
    precision = kernel_precision(kernel, args.precision)
    atol = args.atol if args.atol is not None else _tolerance(args.tolerance, precision)
    rtol = args.rtol if args.rtol is not None else atol
    cmd = [sys.executable, str(Path(__file__).resolve()), "--one", str(problem), str(kernel), "--device", args.device,
           "--precision", precision, "--trials", str(args.trials), "--atol", repr(atol),
           "--rtol", repr(rtol)] + (["--no-timing"] if args.no_timing else [])
    env = dict(os.environ)
    if args.device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        rec = {"status": "error", "error": f"timed out after {args.timeout:g} s"}
    else:
        line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("KB_CHECK_RESULT ")), None)
        if line is None:
            rec = {"status": "error", "error": f"the check process exited with code {proc.returncode} and no result",
                   "stderr_tail": proc.stderr[-1500:]}
        else:
            rec = json.loads(line[len("KB_CHECK_RESULT "):])
    rec.update(problem=str(problem), kernel=str(kernel), device=args.device, precision=precision,
               atol=atol, rtol=rtol, seconds=round(time.monotonic() - t0, 3))
    return rec


def run_all(pairs: list[tuple[Path, Path]], one, jobs: int, sink) -> dict[str, int]:
    """``one(problem, kernel)`` for every pair, ``jobs`` at a time (each a subprocess of its own), writing each
    record to ``sink`` as it finishes; the count of records per status."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    counts: dict[str, int] = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(one, problem, kernel) for problem, kernel in pairs]
        for fut in as_completed(futures):
            rec = fut.result()
            counts[rec["status"]] = counts.get(rec["status"], 0) + 1
            sink.write(json.dumps(rec, sort_keys=True, default=str) + "\n")
            sink.flush()
    return counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Check KernelBench kernels the way KernelBench does, independently of "
                                             "KernelGate (fresh process per kernel, torch.allclose, do_bench).")
    ap.add_argument("--problems", type=Path, help="folder of KernelBench problem files (e.g. KernelBench/level1)")
    ap.add_argument("--kernels", type=Path, action="append", default=[],
                    help="folder of kernel files to pair with them by name (repeatable)")
    ap.add_argument("--pair", nargs=2, action="append", metavar=("PROBLEM", "KERNEL"), default=[],
                    help="one problem file and one kernel file (repeatable)")
    ap.add_argument("--jobs", type=int, default=1, help="kernels checked at once, each in its own process "
                                                       "(default 1; on one GPU they share its memory)")
    ap.add_argument("--out", type=Path, help="JSON lines file to append to (default: stdout)")
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available); cpu runs Triton "
                                                   "under TRITON_INTERPRET=1 and skips timing")
    ap.add_argument("--precision", choices=sorted(KB_TOLERANCE) + ["auto"], default="fp32",
                    help="the dtype every input is cast to; auto: fp16 for TileLang kernels, fp32 for the rest")
    ap.add_argument("--tolerance", default="1e-2", help="atol = rtol; a number (default 1e-2, KernelBench v0.1) "
                                                        "or 'precision' (KernelBench's current table: fp32 1e-4, "
                                                        "fp16/bf16 1e-2)")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per kernel")
    ap.add_argument("--no-timing", action="store_true")
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--atol", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--rtol", type=float, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.device is None:
        try:
            import torch

            args.device = "cuda" if torch.cuda.is_available() else "cpu"
        except ImportError:
            ap.error("torch is not installed")
    if args.one:
        if args.atol is None:
            args.atol = args.rtol = _tolerance(args.tolerance, args.precision)
        return _child(args)

    pairs = [(Path(p), Path(k)) for p, k in args.pair]
    notes: list[str] = []
    if args.problems or args.kernels:
        if not (args.problems and args.kernels):
            ap.error("--problems and --kernels go together")
        for folder in args.kernels:
            found, skipped = pair_files(args.problems, folder)
            pairs += found
            notes += skipped
    if not pairs:
        ap.error("nothing to check: give --problems DIR --kernels DIR or --pair PROBLEM KERNEL"
                 + (f" ({len(notes)} kernel file(s) unpaired: {notes[0]})" if notes else ""))
    for note in notes:
        print(f"independent_check: skipped {note}", file=sys.stderr)
    versions = _versions()
    sink = open(args.out, "a", encoding="utf-8") if args.out else sys.stdout  # noqa: SIM115 - closed below
    try:
        counts = run_all(pairs, lambda p, k: {**run_pair(p, k, args), **versions}, args.jobs, sink)
    finally:
        if sink is not sys.stdout:
            sink.close()
    print(f"independent_check: {len(pairs)} kernel(s): " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
