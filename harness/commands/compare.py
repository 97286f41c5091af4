"""``kernelgate compare A B [--results PATH...]``: paired comparison of two generators (default ``runs/latest``)."""

from __future__ import annotations

import argparse
import sys

from harness.commands._common import add_results_arg, load_results_or_exit

EPILOG = """\
A is the baseline, B the challenger; a ratio t_B/t_A below 1 means B is faster. Each problem uses each
side's best candidate (the output names it, and how many it was chosen from); workloads are paired by
name. Within one run (same run_id) raw kernel times are compared; across runs each time is divided by
its own session's library time. Each 95% CI holds the sample noise within a run (bootstrap of the raw
timing samples) and the noise between runs: the spread of repeated runs when a side holds several runs
of the same candidate, else the measured noise floor of the workload's class (harness/report/
noise_floor.json: device model, same machine or not, autotuned or not). A workload counts as
improved/regressed only when the ratio is beyond --min-effect and its CI excludes 1; identical code is
never faster or slower. Records from the CPU path are compared on status only (change "cpu_path"). An
unknown A or B is an error with a "did you mean" and the generators the results hold. Without
--results it reads runs/latest; --results-b reads B from other results (the same generator in two runs).

examples:
  kernelgate compare my-gen@1 my-gen@2                     # runs/latest
  kernelgate compare my-gen@1 my-gen@2 --results runs/h200
  kernelgate compare triton-reference my-gen --results runs/a runs/b --json runs/cmp.json
  kernelgate compare my-gen my-gen --results runs/monday --results-b runs/tuesday   # A/A: noise, not change
"""


def cmd_compare(args: argparse.Namespace) -> int:
    from harness.jsonio import write_json
    from harness.report.compare import compare_generators, format_comparison

    from harness.report.escape import terminal

    results = load_results_or_exit(args.results)
    results_b = load_results_or_exit(args.results_b) if args.results_b else None
    try:
        d = compare_generators(results, args.a, args.b, results_b=results_b, n_boot=args.n_boot, seed=args.seed,
                               min_effect=args.min_effect)
    except ValueError as exc:
        raise SystemExit(f"kernelgate: error: {exc}")
    print(format_comparison(d))
    for w in d["warnings"]:
        print(terminal(f"warning: {w}"), file=sys.stderr)
    if args.json:
        write_json(args.json, d)
        print(f"comparison written to {args.json}", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="compare two generators on what both attempted",
                       description="Paired per-(problem, workload) comparison of generator B against A: status, "
                                   "E_lib, U_roof and S changes, the geomean kernel-time ratio with a bootstrap 95% "
                                   "CI, and the problems that improved or regressed beyond noise.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a", metavar="A", help="baseline: generator@version, or a generator name with one version")
    p.add_argument("b", metavar="B", help="challenger: generator@version, or a generator name with one version")
    add_results_arg(p)
    p.add_argument("--results-b", nargs="+", default=None, metavar="PATH",
                   help="read B from these results folders or files instead of --results (then A and B may name the "
                        "same generator@version: the same code in two runs)")
    p.add_argument("--n-boot", type=int, default=2000, help="bootstrap replicates (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0; results are deterministic)")
    p.add_argument("--min-effect", type=float, default=0.02,
                   help="smallest relative change that counts as improved/regressed (default 0.02 = 2%%)")
    p.add_argument("--json", metavar="FILE.json", help="also write the comparison as JSON")
    p.set_defaults(func=cmd_compare)
