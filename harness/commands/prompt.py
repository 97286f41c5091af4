"""``kernelgate prompt PROBLEM --dsl DSL``: render a generation prompt (optionally with feedback)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.commands._common import add_problem_args, load_registry_from_args

EPILOG = """\
The prompt carries the problem file, its workloads (shapes, dtypes, tolerances, FLOPs, bytes), the DSL's
conventions with a skeleton, and the rules the harness enforces. With --feedback it also shows the
previous attempt's code, status, verdict, E_lib/U_roof, errors and static diagnostics, for refine loops
(harness/prompts/feedback.py writes that section; the evaluation service returns the same text). The code
is the file given by --code, else --candidate when it is a path to the evaluated file, else the copy the
run kept in its results folder (RESULTS/sources/<sha256>.py), else the record's candidate path; it must
be the code that was evaluated (same sha256 as the record).

examples:
  kernelgate prompt layernorm --dsl triton
  kernelgate prompt softmax --dsl tilelang --out prompts/softmax.md
  kernelgate prompt layernorm --dsl triton --feedback runs/h200 --candidate layernorm.py --generator my-gen@3
  kernelgate prompt gelu --dsl triton --feedback runs/x --candidate gelu__v2 --code my_samples/gelu__v2.py
  kernelgate prompt --all --dsl triton --out prompts/triton
"""


def _matches(candidate: str, name: str) -> bool:
    """Whether ``--candidate NAME`` names the record's ``candidate`` (``folder/file.py``): the same path, its file
    name or stem, or a path (absolute or relative, from any working directory) that ends with it."""
    p = Path(candidate)
    if name in (candidate, p.name, p.stem):
        return True
    given = Path(name)
    if len(given.parts) < 2 and not given.is_absolute():
        return False
    parts = Path(str(given.resolve()) if given.exists() else name).parts
    return len(parts) >= len(p.parts) and tuple(parts[-len(p.parts):]) == p.parts


def select_feedback(results, problem_id: str, candidate: str | None, generator: str | None):
    """The latest records (one per workload) of one candidate for one problem; exits with a message otherwise."""
    from harness.report.compare import resolve_generator
    from harness.report.metrics import latest_records, record_label

    records, _ = latest_records(results)
    recs = [r for r in records if r.problem_id == problem_id]
    if generator:
        try:
            gen, ver = resolve_generator(recs or records, generator)
        except ValueError as exc:
            raise SystemExit(f"kernelgate: error: --generator: {exc}")
        recs = [r for r in recs if (r.generator, r.generator_version) == (gen, ver)]
    if candidate:
        recs = [r for r in recs if _matches(r.candidate, candidate)]
    owners = sorted({f"{record_label(r)}:{r.candidate}" for r in recs})
    if not owners:
        raise SystemExit(f"kernelgate: error: no result record for problem '{problem_id}'"
                         + (f" and candidate '{candidate}'" if candidate else "")
                         + (f" of generator '{generator}'" if generator else "") + " in --feedback")
    if len(owners) > 1:
        raise SystemExit(f"kernelgate: error: --feedback has several candidates for '{problem_id}': {', '.join(owners)}; "
                         "choose one with --candidate NAME and/or --generator GEN@VERSION")
    by_workload = {}
    for r in sorted(recs, key=lambda r: r.created_at):
        by_workload[r.workload] = r
    return [by_workload[w] for w in sorted(by_workload)]


def previous_source(records, code: str | None, candidate: str | None, results: list[str] | None = None) -> str | None:
    """The evaluated code of ``records`` (one candidate's), checked against their ``candidate_sha256``.

    ``code`` (``--code``) must exist and match (the file itself or, for an
    LLM's Markdown reply, the code taken out of its fence: what the run
    executed, and what is shown), else the command exits with a message.
    Otherwise, in order: ``candidate`` as a path (absolute, or relative to the
    working directory); the copy the run kept in its results folder
    (``sources/<sha256>.py`` beside each ``results`` file: found from any
    working directory); the record's own candidate path relative to the
    working directory. None (with a note on stderr) when none is the evaluated file.
    """
    import hashlib

    from harness.candidates.fences import extract_source
    from harness.pipeline import kept_source_path

    want = records[0].candidate_sha256
    if code:
        tries = [Path(code)]
    else:
        kept = [kept_source_path(Path(r), want) for r in results or ()]
        tries = [Path(p) for p in (candidate,) if p] + kept + [Path(records[0].candidate)]
    for path in tries:
        if not path.is_file():
            continue
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() == want:
            return data.decode("utf-8", errors="replace")
        # an LLM's Markdown reply: the record hashes the code taken out of its fence, as the run executed it
        code_in_reply = extract_source(data.decode("utf-8", errors="replace"))
        if code_in_reply.error is None and hashlib.sha256(code_in_reply.source.encode("utf-8")).hexdigest() == want:
            return code_in_reply.source
        if code:
            raise SystemExit(f"kernelgate: error: --code {path}: its sha256 differs from the record's candidate_sha256 "
                             f"({want[:12]}...): the file changed after it was evaluated; pass the evaluated version")
    if code:
        raise SystemExit(f"kernelgate: error: --code {code}: no such file")
    print(f"note: the previous code is not in the prompt: pass --code FILE (the evaluated {records[0].candidate}, "
          f"sha256 {want[:12]}...)", file=sys.stderr)
    return None


def cmd_prompt(args: argparse.Namespace) -> int:
    from harness.jsonio import atomic_write_text
    from harness.prompts.render import render_all, render_prompt

    if bool(args.problem) == bool(args.all):
        raise SystemExit("kernelgate: error: give one PROBLEM or --all")
    reg = load_registry_from_args(args, quiet=True)
    if args.all:
        if not args.out:
            raise SystemExit("kernelgate: error: --all needs --out DIR (one file per problem)")
        if args.feedback:
            raise SystemExit("kernelgate: error: --feedback applies to one PROBLEM, not --all")
        paths = render_all(reg, args.dsl, args.out)
        print(f"{len(paths)} prompt(s) written to {args.out}")
        return 0
    try:
        problem = reg.get(args.problem)
    except KeyError as exc:
        raise SystemExit(f"kernelgate: error: {exc}")
    feedback = source = None
    if args.feedback:
        from harness.commands.leaderboard import load_results_or_exit

        feedback = select_feedback(load_results_or_exit(args.feedback), problem.id, args.candidate, args.generator)
        source = previous_source(feedback, args.code, args.candidate, args.feedback)
    elif args.candidate or args.generator or args.code:
        raise SystemExit("kernelgate: error: --candidate/--generator/--code describe the previous attempt: "
                         "add --feedback RESULTS")
    text = render_prompt(problem, args.dsl, feedback=feedback, feedback_source=source)
    if args.out:
        atomic_write_text(args.out, text)
        print(f"prompt written to {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prompt", help="render a generation prompt for a problem",
                       description="Render the prompt a kernel generator gets for one problem (or all of them): "
                                   "problem source, workloads, DSL conventions, enforced rules, optional feedback.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("problem", nargs="?", metavar="PROBLEM", help="problem id, e.g. layernorm")
    p.add_argument("--all", action="store_true", help="one prompt per problem, written to --out DIR as <id>.<dsl>.md")
    p.add_argument("--dsl", required=True, choices=("triton", "tilelang"), help="the DSL the kernel is written in")
    p.add_argument("--out", metavar="PATH", help="output file (one PROBLEM) or folder (--all); default: print")
    p.add_argument("--feedback", action="append", metavar="RESULTS",
                   help="results folder or file holding the previous attempt (repeatable)")
    p.add_argument("--candidate", metavar="NAME", help="the previous attempt's candidate file: its path (absolute or "
                   "relative, from any folder), its folder/file.py as recorded, its file name or its stem")
    p.add_argument("--generator", metavar="GEN[@VERSION]", help="the previous attempt's generator, when names repeat")
    p.add_argument("--code", metavar="FILE", help="the previous attempt's code, shown in the feedback (must be the "
                   "evaluated file: its sha256 is checked against the record); default: --candidate or the record's "
                   "candidate path, when it is that file")
    add_problem_args(p)
    p.set_defaults(func=cmd_prompt)
