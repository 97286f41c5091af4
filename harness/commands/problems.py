"""``kernelgate problems list|show ID``: browse the problem suite."""

from __future__ import annotations

import argparse

from harness.commands._common import add_problem_args, did_you_mean, load_registry_from_args, table

EPILOG = """\
examples:
  kernelgate problems list
  kernelgate problems list --category normalization --category reduction
  kernelgate problems show layernorm
  kernelgate problems show layernorm --source
  kernelgate problems list --problems ~/KernelBench/level1 --set N=256   # plain KernelBench files: FLOPs/bytes derived
"""

LIST_EPILOG = """\
One line per (problem, workload): dtype, tags ('smoke' runs on the CPU path, 'gpu' on a GPU), analytic
FLOPs and minimum DRAM bytes, and whether they are declared in KERNELGATE or derived from the model.
An unknown --category is an error with a "did you mean".

examples:
  kernelgate problems list
  kernelgate problems list --category gemm
  kernelgate problems list --problems ~/KernelBench/level1 --set batch_size=16
"""

SHOW_EPILOG = """\
examples:
  kernelgate problems show softmax
  kernelgate problems show gemm_square --source
  kernelgate problems show 1_Square_matrix_multiplication_ --problems ~/KernelBench/level1
"""


def _human(n: float, unit: str) -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= scale:
            return f"{n / scale:.3g} {prefix}{unit}"
    return f"{n:.3g} {unit}"


def cmd_list(args: argparse.Namespace) -> int:
    reg = load_registry_from_args(args)
    cats = sorted({p.category for p in reg})
    for c in args.categories or ():
        if c not in cats:
            raise SystemExit(f"kernelgate: error: {did_you_mean('category', c, cats)}")
    rows = []
    for p in reg:
        if args.categories and p.category not in args.categories:
            continue
        for w in p.workloads:
            rows.append([p.id, p.category, w.name, w.dtype, ",".join(w.tags), _human(w.flops, "FLOP"), _human(w.min_bytes, "B"),
                         "derived" if p.derived else "declared"])
    print(table(rows, ["problem", "category", "workload", "dtype", "tags", "flops", "min bytes", "cost"]))
    print(f"\n{len(reg)} problems in {len(cats)} categories ({', '.join(cats)})"
          + (f"; shown: {', '.join(args.categories)}" if args.categories else "")
          + (f"; {len(reg.errors)} file(s) failed to load (see warnings)" if reg.errors else ""))
    return 0 if not reg.errors else 1


def cmd_show(args: argparse.Namespace) -> int:
    reg = load_registry_from_args(args, quiet=True)
    try:
        p = reg.get(args.id)
    except KeyError as exc:
        if args.id in {q.category for q in reg}:
            raise SystemExit(f"kernelgate: error: '{args.id}' is a category, not a problem: "
                             f"kernelgate problems list --category {args.id}") from None
        raise SystemExit(f"kernelgate: error: {exc}") from None
    print(f"{p.id}  ({p.category})  {p.description}")
    print(f"file:        {p.path}")
    print(f"version:     {p.version}")
    print(f"library op:  {p.library_op}   (forbidden in candidates: {', '.join(p.library_aten) or 'none'})")
    print(f"cost:        {'derived from the model on meta tensors' if p.derived else 'declared in KERNELGATE'}")
    rows = [[w.name, w.dtype, ",".join(w.tags), " ".join(f"{k}={v}" for k, v in w.params.items()), _human(w.flops, "FLOP"),
             _human(w.min_bytes, "B"), f"{w.flops / w.min_bytes:.3g}", f"{w.atol:g}/{w.rtol:g}", "yes" if w.allow_tf32 else "no"]
            for w in p.workloads]
    print()
    print(table(rows, ["workload", "dtype", "tags", "sizes", "flops", "min bytes", "FLOP/B", "atol/rtol", "tf32"]))
    if args.source:
        print("\n" + p.path.read_text())
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("problems", help="list or inspect problems", description="Browse the problem suite: "
                       "operators, workloads (shapes, dtypes), analytic FLOPs and minimum DRAM bytes.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    psub = p.add_subparsers(dest="problems_cmd", metavar="ACTION", required=True)
    pl = psub.add_parser("list", help="one line per (problem, workload)",
                         description="List every problem and workload with FLOPs and minimum bytes.",
                         epilog=LIST_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    pl.add_argument("--category", action="append", dest="categories", metavar="CATEGORY",
                    help="only this category, e.g. normalization (repeatable)")
    add_problem_args(pl)
    pl.set_defaults(func=cmd_list)
    ps = psub.add_parser("show", help="details of one problem", description="Show one problem's metadata and workloads.",
                         epilog=SHOW_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    ps.add_argument("id", help="problem id, e.g. layernorm")
    ps.add_argument("--source", action="store_true", help="also print the problem file")
    add_problem_args(ps)
    ps.set_defaults(func=cmd_show)
