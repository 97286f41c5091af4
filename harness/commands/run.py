"""``kernelgate run SUBMISSION_DIR...``: evaluate every candidate in one or more folders."""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from collections import Counter
from pathlib import Path

from harness.commands._common import add_problem_args, default_out, did_you_mean, load_registry_from_args, table
from harness.execute.parent.options import DEFAULTS

EPILOG = """\
what happens to each candidate:
  1. parsed and scanned in this process (syntax, static anti-cheat, defect lint); never imported here
  2. run in a fresh sandboxed subprocess: import, build ModelNew with Model's weights, 5+ correctness
     rounds on fresh inputs (also scaled/shifted), checked against a float64 reference in a trusted process
  3. on a GPU (on the CPU path only with --timing, and never screened there): timed on fresh inputs,
     alternating with the library timed in the trusted process; a secret share of the timed calls is
     verified; the claimed times are checked against this process's own clock; screened by E_lib and U_roof
  4. one record per (candidate, workload) appended to OUT/results.jsonl

examples:
  kernelgate run submissions/* --out runs/h200 --leaderboard leaderboards/h200.json --report runs/h200/report --yes-execute
  kernelgate run submissions/triton-reference submissions/defects --out runs/h200 --yes-execute
  kernelgate run my_llm_samples/ --problems ~/KernelBench/level1 --set 19_ReLU:dim=4096 --yes-execute
  kernelgate run submissions/defects --out runs/h200 --resume --yes-execute
  kernelgate run my_llm_samples/ --out runs/cluster --executor ray --ray-address auto --yes-execute   # after 'ray start'
"""


def _fmt(x: float | None, spec: str = ".3g") -> str:
    return "-" if x is None else format(x, spec)


def _verdict(r) -> str:
    if r.screening is not None:
        return r.screening.verdict.value
    if r.status.value == "PASSED" and r.env.device_kind == "cpu":
        return "cpu path (no verdict)"
    return "-"


def summary_table(results) -> str:
    """One row per record; failures' reasons follow the table, whole (first line), numbered.

    Times are shown wherever a record has them: a GPU record's medians, and on the CPU path (``--timing``) the
    host-clock medians marked ``host`` (explained under the table; never a verdict). Candidates' names and error
    texts are untrusted: :func:`harness.report.escape.terminal` writes their control characters out visibly.
    """
    from harness.report import metrics as M
    from harness.report.escape import terminal

    rows, reasons = [], []
    host = False
    for r in sorted(results, key=lambda r: (r.generator, r.problem_id, r.candidate, r.workload)):
        s = r.screening
        note = ""
        if r.error is not None:
            first = r.error.message.strip().splitlines()[0] if r.error.message.strip() else r.error.type
            reasons.append(f"  [{len(reasons) + 1}] {terminal(r.candidate)} {terminal(r.workload)}: {terminal(first)}")
            note = f"[{len(reasons)}]"
        mark = ""
        if M.host_times_ms(r) is not None:
            tk, tl = M.host_times_ms(r)  # type: ignore[misc]
            host, mark = True, " host"
        else:
            tk = r.timing.median_ms if r.timing else None
            tl = r.library_timing.median_ms if r.library_timing else None
        rows.append([
            r.candidate, r.workload, r.status.value,
            _fmt(tl, ".4g") + (mark if tl is not None else ""), _fmt(tk, ".4g") + (mark if tk is not None else ""),
            _fmt(s.e_lib if s else None), _fmt(s.u_roof if s else None), _fmt(s.u_roof_library if s else None),
            _verdict(r), note,
        ])
    out = table(rows, ["candidate", "workload", "status", "t_lib ms", "t_kernel ms", "E_lib", "U_roof", "U_roof lib",
                       "verdict", "why"])
    if host:
        out += f"\n\nhost: {M.HOST_CLOCK_NOTE}"
    if reasons:
        out += "\n\nwhy:\n" + "\n".join(reasons)
    return out


def _check_selection(args: argparse.Namespace, reg) -> None:
    """Refuse --only / --workloads / --tags names that select nothing, with a did-you-mean (a typo must not
    run zero candidates and exit 0)."""
    from harness.pipeline import unloaded_problem

    for name in args.only or ():
        if name not in reg:
            broken = unloaded_problem(reg, name)
            if broken is not None:
                raise SystemExit(f"kernelgate: error: --only {name}: {broken}")
            raise SystemExit("kernelgate: error: --only: " + did_you_mean("problem", name, [p.id for p in reg],
                                                                          listing="kernelgate problems list"))
    problems = [reg.get(n) for n in args.only] if args.only else list(reg)
    what = f"the problem(s) {', '.join(args.only)}" if args.only else "any loaded problem"
    if args.workloads:
        known = {w.name for p in problems for w in p.workloads}
        for name in args.workloads.split(","):
            if name not in known:
                raise SystemExit("kernelgate: error: --workloads: " + did_you_mean(f"workload of {what}", name, known))
    if args.tags and not args.workloads:
        known = {t for p in problems for w in p.workloads for t in w.tags}
        for name in args.tags.split(","):
            if name not in known:
                raise SystemExit("kernelgate: error: --tags: " + did_you_mean(f"tag of {what}", name, known))


def _parse_shard(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise SystemExit(f"kernelgate: error: --shard {text!r}: expected K/N, e.g. --shard 2/4") from None
    if not 1 <= k <= n:
        raise SystemExit(f"kernelgate: error: --shard {text!r}: K must be between 1 and N")
    return k, n


def _private_workloads(path: str | None, reg) -> dict:
    if not path:
        return {}
    from harness.problems.secret import load_private_workloads

    try:
        return load_private_workloads(path, reg)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"kernelgate: error: --private-workloads {path}: {exc}")


def cmd_run(args: argparse.Namespace) -> int:
    from harness import env as envmod
    from harness.execute.parent.options import RunOptions
    from harness.measure.timing import TimingConfig
    from harness.pipeline import EvalRequest, run_evaluation
    from harness.score.gates import Thresholds

    shard = _parse_shard(args.shard)
    if args.ray_address and args.executor != "ray":
        raise SystemExit("kernelgate: error: --ray-address needs --executor ray")
    if args.executor == "ray":
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            raise SystemExit("kernelgate: error: --executor ray needs the 'ray' package: pip install 'kernelgate[ray]'")
    device = args.device or envmod.default_device()
    if not 0 < args.gpu_memory_fraction <= 1:
        raise SystemExit(f"kernelgate: error: --gpu-memory-fraction must be in (0, 1], got {args.gpu_memory_fraction}")
    if args.max_file_mib < 1:
        raise SystemExit("kernelgate: error: --max-file-mib must be at least 1 (compiled kernels and hand-off files "
                         "are written by the worker)")
    if args.context_starts < 0:
        raise SystemExit(f"kernelgate: error: --context-starts must be 0 (no limit) or more, got {args.context_starts}")
    if args.check_slots < 1:
        raise SystemExit(f"kernelgate: error: --check-slots must be at least 1, got {args.check_slots}")
    if not args.yes_execute:
        raise SystemExit("kernelgate: error: running candidates executes their code (sandboxed, see "
                         "docs/security.md); pass --yes-execute to confirm")
    if args.spawn == "fork" and args.executor == "local":
        from harness.execute.parent import forks as forkserver

        forkserver.start_early(device)  # its imports overlap the problems' loading and the calibration's
    reg = load_registry_from_args(args)
    _check_selection(args, reg)
    from harness.serve.presets import time_kernels as timing_rule

    time_kernels = timing_rule(device, args.timing)
    gpus = tuple(int(g) for g in args.gpus.split(",")) if args.gpus else (0,)
    opts = RunOptions(
        device=device, gpus=gpus, rounds=max(args.rounds, 5),
        base_seed=args.seed if args.seed is not None else secrets.randbelow(1 << 48),
        compile_timeout_s=args.compile_timeout, round_timeout_s=args.round_timeout, timing_timeout_s=args.timing_timeout,
        timing=TimingConfig.for_device(device, quick=args.quick), time_kernels=time_kernels,
        jobs=args.jobs or min(8, os.cpu_count() or 1),
        keep_scratch=args.keep_scratch, scratch_root=Path(args.scratch) if args.scratch else None,
        precompile=not args.no_precompile, sandbox=not args.no_sandbox, isolation=args.isolation,
        check_slots=args.check_slots,
        gpu_memory_fraction=args.gpu_memory_fraction, prestart=not args.no_prestart, handoff=args.handoff,
        spawn=args.spawn, context_starts=args.context_starts,
        mode=args.mode, baseline=args.baseline, max_file_bytes=args.max_file_mib << 20,
        heldout_shapes=max(0, args.heldout_shapes), heldout_gate=args.heldout_gate,
    )
    snap = envmod.snapshot(device, gpus[0])
    ceilings = None
    if not time_kernels and device == "cpu" and args.timing is None:
        print("CPU path: correctness only, no timing (a host-clock time of the Triton interpreter is no verdict; "
              "--timing times it anyway, to exercise the timing protocol)", file=sys.stderr)
    if time_kernels:
        from harness.measure.calibrate import load_or_measure

        print(f"ceilings: loading (or measuring) the calibration for {snap.device_name} ...", file=sys.stderr)
        ceilings = load_or_measure(snap.to_dict(), quick=device == "cpu")
    tags = tuple(args.tags.split(",")) if args.tags else (("gpu",) if device == "cuda" else ("smoke",))
    names = tuple(args.workloads.split(",")) if args.workloads else ()
    req = EvalRequest(
        submissions=[Path(s) for s in args.submissions], registry=reg, out_dir=Path(args.out), options=opts, env=snap,
        workload_tags=() if names else tags, workload_names=names, only_problems=tuple(args.only or ()),
        kernelbench_map=args.kernelbench_map, resume=args.resume, rerun=args.rerun, ceilings=ceilings,
        thresholds=Thresholds(args.tau_lib, args.tau_roof_memory, args.tau_roof_compute), progress=not args.no_progress,
        shard=shard, executor=args.executor, ray_address=args.ray_address, secret_count=max(0, args.secret_workloads),
        recursive=args.recursive, extra_workloads=_private_workloads(args.private_workloads, reg),
    )
    try:
        outcome = run_evaluation(req)
    except (ValueError, FileNotFoundError, ConnectionError, RuntimeError) as exc:
        raise SystemExit(f"kernelgate: error: {exc}")
    results = outcome.results
    print()
    print(summary_table(results))
    counts = Counter(r.status.value for r in results)
    print(f"\n{len(results)} record(s) -> {Path(args.out) / 'results.jsonl'}   "
          + "  ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    print(f"base seed {opts.base_seed} ({'given' if args.seed is not None else 'fresh and secret during the run'}; "
          f"--seed {opts.base_seed} replays these inputs)")
    if outcome.skipped:
        print(f"{len(outcome.skipped)} candidate(s) already recorded, skipped (--rerun to evaluate again)")
    if opts.spawn == "fork":
        from harness.execute.parent import forks as forkserver

        if forkserver.fallbacks():
            print(f"warning: {forkserver.fallbacks()} worker(s) started with exec: the fork server could not fork "
                  f"them ({forkserver.last_problem()})", file=sys.stderr)
    if ceilings:
        print(f"ceilings ({'cached' if ceilings.get('cached') else 'measured now'}): "
              f"DRAM {ceilings['dram_bytes_per_s'] / 1e12:.3g} TB/s; "
              + ", ".join(f"{k} {v / 1e12:.3g} TFLOP/s" for k, v in ceilings["peaks_flops_per_s"].items()))
    if args.leaderboard or args.report:
        _derived_outputs(args, ceilings)
    return 0


def _derived_outputs(args: argparse.Namespace, ceilings: dict | None) -> None:
    """Regenerate the leaderboard / report from the whole results file (this run and earlier ones)."""
    from harness.results.store import load_results

    everything = load_results(Path(args.out))
    if args.leaderboard:
        from harness.report.escape import terminal
        from harness.report.leaderboard import build_leaderboard, format_leaderboard, write_leaderboard

        lb = build_leaderboard(everything, source=str(Path(args.out) / "results.jsonl"))
        write_leaderboard(Path(args.leaderboard), lb)
        print()
        print(terminal(format_leaderboard(lb)))
        print(f"leaderboard written to {args.leaderboard}")
    if args.report:
        from harness.report.html import write_report

        html, md = write_report(everything, Path(args.report), ceilings=ceilings, source=str(args.out))
        print(f"report written: {html}\n                {md}")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="evaluate submission folders", description=__doc__.splitlines()[0].split(": ", 1)[1],
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("submissions", nargs="+", metavar="SUBMISSION_DIR", help="folder(s) of candidate .py files")
    p.add_argument("--out", default=str(default_out()), help="results folder (results.jsonl is appended; default: runs/latest)")
    p.add_argument("--leaderboard", metavar="FILE.json", help="afterwards, regenerate this leaderboard JSON from OUT/results.jsonl")
    p.add_argument("--report", metavar="DIR", help="afterwards, write the HTML + Markdown report of OUT/results.jsonl here")
    add_problem_args(p)
    p.add_argument("--device", choices=("cuda", "cpu"), help="default: the GPU if present, else the CPU path")
    p.add_argument("--gpus", help="comma-separated GPU indices to use, e.g. 0,1 (default 0)")
    p.add_argument("--jobs", type=int, default=1, help="candidates in flight at once (imports and compiles overlap; "
                   "up to --check-slots of them check correctness on a GPU together, and each GPU times one at a time, "
                   "alone). Default 1; ignored with --executor ray")
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="local (default): run candidates on this machine. ray: one Ray task per candidate with one GPU "
                   "each (one CPU on the CPU path), in a fresh Ray worker process, on every node of a Ray cluster; "
                   "Ray assigns the GPUs (--gpus then only picks this machine's GPU for the environment snapshot) and "
                   "--jobs is ignored; results are still written here only. Needs 'pip install kernelgate[ray]' and KernelGate installed on every node (see README "
                   "'Many machines (Ray)')")
    p.add_argument("--ray-address", metavar="ADDR",
                   help="with --executor ray: the cluster to use, passed to ray.init. 'auto': the cluster this "
                   "machine joined with 'ray start' (error if none); HOST:6379 or ray://HOST:10001: that cluster. "
                   "Default: $RAY_ADDRESS, else a cluster started on this machine, else a private local one")
    p.add_argument("--tags", help="workload tags to run (default: gpu on a GPU, smoke on the CPU)")
    p.add_argument("--workloads", help="comma-separated workload names (overrides --tags)")
    p.add_argument("--only", action="append", metavar="PROBLEM", help="evaluate only candidates for this problem (repeatable)")
    p.add_argument("--kernelbench-map", metavar="FILE.json",
                   help="map candidate files to problem ids: {\"my_try.py\": \"19_ReLU\", \"1/19\": \"19_ReLU\"} (file "
                        "names, stems or LEVEL/NUMBER); KernelBench run files (level_L_problem_N_sample_S_kernel.py) "
                        "are mapped by level and number without one")
    p.add_argument("--recursive", action="store_true", help="also take candidate files in subfolders of a "
                   "submission folder (otherwise a folder with subfolders of .py files is refused, naming them)")
    p.add_argument("--secret-workloads", type=int, default=0, metavar="N",
                   help="also evaluate N secret workloads per problem, drawn from the problem's declared ranges "
                        "with the run's secret seed (records say secret=true)")
    p.add_argument("--private-workloads", metavar="FILE.json",
                   help="also evaluate the workloads of this private file {problem_id: [{name, set, dtype, tags}]} "
                        "(kept outside the problems; recorded as secret)")
    p.add_argument("--rounds", type=int, default=DEFAULTS.rounds,
                   help=f"correctness rounds per workload (minimum {DEFAULTS.rounds}; at least one per fair value "
                        "profile)")
    p.add_argument("--heldout-shapes", type=int, default=DEFAULTS.heldout_shapes, metavar="N",
                   help=f"held-out shapes per workload, derived from the problem's size constants and drawn with the "
                        f"run's secret seed (default {DEFAULTS.heldout_shapes}; 0: none); reported as "
                        "the record's 'heldout' and the leaderboard's 'generalizes' (docs/correctness.md)")
    p.add_argument("--heldout-gate", action="store_true", default=DEFAULTS.heldout_gate,
                   help="a workload that fails at a held-out shape fails (default: reported beside its verdict, "
                        "which KernelBench's one-shape semantics keeps)")
    p.add_argument("--mode", choices=("train", "eval"), default=None,
                   help="the mode Model and ModelNew run in; default: each problem's own (plain KernelBench files: "
                        "train, as KernelBench's evaluator; annotated problems: eval). Recorded in every result")
    p.add_argument("--baseline", choices=("eager", "compile"), default=DEFAULTS.baseline,
                   help="the library baseline timed in the trusted checker: eager (the problem's Model, default) "
                        "or compile (torch.compile of it; compiles once per workload, in the timing phase)")
    p.add_argument("--seed", type=int, help="base seed for inputs and weights (default: a fresh secret one per run, "
                   "recorded in each result's base_seed; pass it back to replay a run exactly)")
    p.add_argument("--resume", action="store_true", help="skip (candidate, workload) jobs already in OUT/results.jsonl")
    p.add_argument("--rerun", action="store_true", help="evaluate again even if recorded")
    p.add_argument("--shard", metavar="K/N", help="evaluate only the K-th of N stable shares of the candidates "
                   "(split a run over launchers; combine with 'kernelgate merge')")
    p.add_argument("--timing", dest="timing", action="store_true", default=None,
                   help="time kernels against the library (default on a GPU; on the CPU path only with this flag: "
                        "its host-clock times of the Triton interpreter are recorded but never get a verdict)")
    p.add_argument("--no-timing", dest="timing", action="store_false", help="correctness only (the CPU path's default)")
    p.add_argument("--quick", action="store_true", help="fewer timing samples (GPU)")
    p.add_argument("--compile-timeout", type=float, default=DEFAULTS.compile_timeout_s,
                   help=f"seconds for import + build + first launch (default {DEFAULTS.compile_timeout_s:g})")
    p.add_argument("--round-timeout", type=float, default=DEFAULTS.round_timeout_s,
                   help=f"seconds per call (default {DEFAULTS.round_timeout_s:g})")
    p.add_argument("--timing-timeout", type=float, default=DEFAULTS.timing_timeout_s,
                   help=f"seconds per batch of timed calls (default {DEFAULTS.timing_timeout_s:g})")
    p.add_argument("--max-file-mib", type=int, default=DEFAULTS.max_file_bytes >> 20, metavar="MIB",
                   help="largest file a candidate's worker may write, in MiB (its RLIMIT_FSIZE; a bigger write fails "
                        f"with 'File too large'; default {DEFAULTS.max_file_bytes >> 20})")
    from harness.score.gates import Thresholds

    th = Thresholds()
    p.add_argument("--tau-lib", type=float, default=th.tau_lib, help=f"E_lib gate (default {th.tau_lib:g})")
    p.add_argument("--tau-roof-memory", type=float, default=th.tau_roof_memory,
                   help=f"U_roof gate for memory-bound workloads (default {th.tau_roof_memory:g})")
    p.add_argument("--tau-roof-compute", type=float, default=th.tau_roof_compute,
                   help=f"U_roof gate for compute-bound workloads (default {th.tau_roof_compute:g})")
    p.add_argument("--scratch", metavar="DIR", help="where candidates' scratch folders go (default OUT/.scratch); "
                   "a tmpfs such as /dev/shm/kg speeds up GPU-sized output hand-off")
    p.add_argument("--no-precompile", action="store_true", help="GPU: skip the dry forward that compiles each kernel "
                   "before the candidate asks for the GPU (compiles then happen in its correctness phase)")
    from harness.execute.parent.options import POOL_MAX

    p.add_argument("--no-prestart", action="store_true", help="start each candidate's worker only when the candidate's "
                   f"turn comes (default: keep two pre-started per job on each device, at most {POOL_MAX} and never "
                   "more than candidates are left; each is still used for one candidate only)")
    p.add_argument("--spawn", choices=("fork", "exec"), default=DEFAULTS.spawn,
                   help="how workers start: 'fork' (default) from a fork server that imported torch and Triton once "
                        "(each worker still applies its own limits, sandbox and audit hooks before its candidate); "
                        "'exec' starts a fresh interpreter for each")
    p.add_argument("--context-starts", type=int, default=DEFAULTS.context_starts, metavar="N",
                   help="GPU: pre-started workers that may make their CUDA context at once (default 0: no limit); "
                        "each keeps the device's timing phases waiting while it does")
    p.add_argument("--gpu-memory-fraction", type=float, default=DEFAULTS.gpu_memory_fraction, metavar="F",
                   help=f"GPU: share of the device memory one candidate's allocator may hold (default "
                        f"{DEFAULTS.gpu_memory_fraction:g}; 1 = no cap)")
    p.add_argument("--handoff", choices=("ipc", "file"), default="ipc",
                   help="GPU: how each round's outputs reach the trusted checker: 'ipc' (default) maps the worker's "
                        "device memory into the checker (CUDA IPC, no host copies); 'file' saves them to the scratch "
                        "folder (the CPU path always does)")
    p.add_argument("--check-slots", type=int, default=DEFAULTS.check_slots, metavar="N",
                   help=f"GPU: candidates whose correctness rounds may share one GPU at once (default "
                        f"{DEFAULTS.check_slots}); timing always has the GPU to itself. 1 = one candidate on the GPU "
                        "at a time")
    p.add_argument("--isolation", choices=("strict", "available", "off"), default=DEFAULTS.isolation,
                   help="the workers' OS boundary (docs/security.md): 'strict' (default) refuses to start on a "
                        "machine that cannot give all of it; 'available' runs with what the machine allows; 'off' "
                        "applies resource limits only (debugging). What was in force is in every record's "
                        "env.sandbox")
    p.add_argument("--no-sandbox", action="store_true", help="same as --isolation off")
    p.add_argument("--keep-scratch", action="store_true", help="keep each candidate's scratch folder (debugging)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--yes-execute", "--allow-untrusted", dest="yes_execute", action="store_true",
                   help="required: acknowledge that candidate code will be executed (sandboxed, see docs/security.md)")
    p.set_defaults(func=cmd_run)
