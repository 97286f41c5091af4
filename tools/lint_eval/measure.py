"""Measure the lint's per-rule precision and recall on the hand-labelled held-out corpus.

Usage::

    python tools/lint_eval/measure.py --root /work/.mirror                 # split A, Markdown table
    python tools/lint_eval/measure.py --root ~/src --clone --split all --by-pool --details

Each kernel of ``manifest.json`` is read from a local copy of its repository
at the pinned commit (see :mod:`corpus`), linted with
:func:`harness.diagnose.lint.lint_source` exactly as ``kernelgate lint`` would
(the DSL detected from the file), and compared with its hand labels: a
kernel is *flagged* for a rule when the lint reports that rule at least once
(any severity; the ``defect only`` columns count only ``defect``
findings), and *labelled* when the manifest lists the rule. Per rule:
TP / FP / FN, precision = TP / flagged, recall = TP / labelled ("-" when the
denominator is 0). Nothing is cached and nothing is written.

Split ``A`` is the part measured first; ``B`` is held back so that a rule
changed after seeing ``A`` can be re-measured on kernels it was not changed
for (docs/lint.md records which splits each number comes from).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the harness package, installed or not

from corpus import MANIFEST, RULE_IDS, Corpus, CorpusError, Kernel, clone, load_manifest, read_kernel, repo_dir  # noqa: E402


def _lint(text: str, k: Kernel) -> tuple[set[str], set[str], list[str]]:
    """``(rules flagged at any severity, rules flagged as defect, one line per finding)``."""
    from harness.diagnose.lint import lint_source

    findings = lint_source(text, filename=f"{k.id}:{k.path}")
    lines = [f"{f.line}: [{f.rule}/{f.severity}] {f.message}" for f in findings if f.rule in RULE_IDS]
    return ({f.rule for f in findings}, {f.rule for f in findings if f.severity == "defect"}, lines)


def _ratio(num: int, den: int) -> str:
    return "-" if den == 0 else f"{num / den:.2f}"


def evaluate(corpus: Corpus, root: Path, splits: set[str], pools: set[str] | None) -> list[dict]:
    """One row per kernel: labels, flags, findings (or the error that stopped the lint)."""
    rows = []
    for k in corpus.kernels:
        if k.split not in splits or (pools and k.pool not in pools):
            continue
        text = read_kernel(root, corpus, k)
        try:
            flagged, defect, lines = _lint(text, k)
            error = None
        except Exception as exc:  # a crash is a result too: report it, do not stop
            flagged, defect, lines, error = set(), set(), [], f"{type(exc).__name__}: {exc}"
        rows.append({"kernel": k, "labels": set(k.labels), "flagged": flagged, "defect": defect,
                     "findings": lines, "error": error})
    return rows


def table(rows: list[dict]) -> str:
    """The Markdown table of per-rule counts, precision and recall."""
    out = [
        "| rule | labelled | flagged | TP | FP | FN | precision | recall | defect-only P | defect-only R |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    tot = defaultdict(int)
    for rule in RULE_IDS:
        lab = sum(rule in r["labels"] for r in rows)
        fl = sum(rule in r["flagged"] for r in rows)
        tp = sum(rule in r["labels"] and rule in r["flagged"] for r in rows)
        dfl = sum(rule in r["defect"] for r in rows)
        dtp = sum(rule in r["labels"] and rule in r["defect"] for r in rows)
        for key, v in (("lab", lab), ("fl", fl), ("tp", tp), ("dfl", dfl), ("dtp", dtp)):
            tot[key] += v
        out.append(f"| {rule} | {lab} | {fl} | {tp} | {fl - tp} | {lab - tp} | {_ratio(tp, fl)} | {_ratio(tp, lab)} "
                   f"| {_ratio(dtp, dfl)} | {_ratio(dtp, lab)} |")
    out.append(f"| **all rules** | {tot['lab']} | {tot['fl']} | {tot['tp']} | {tot['fl'] - tot['tp']} | "
               f"{tot['lab'] - tot['tp']} | {_ratio(tot['tp'], tot['fl'])} | {_ratio(tot['tp'], tot['lab'])} "
               f"| {_ratio(tot['dtp'], tot['dfl'])} | {_ratio(tot['dtp'], tot['lab'])} |")
    return "\n".join(out)


def by_pool(rows: list[dict]) -> str:
    """Per pool: kernels, labelled defects, TP, FP, FN over all rules."""
    out = ["| pool | kernels | labelled | flagged | TP | FP | FN |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        groups[r["kernel"].pool].append(r)
    for pool, rs in groups.items():
        lab = sum(len(r["labels"] & set(RULE_IDS)) for r in rs)
        fl = sum(len(r["flagged"] & set(RULE_IDS)) for r in rs)
        tp = sum(len(r["labels"] & r["flagged"]) for r in rs)
        out.append(f"| {pool} | {len(rs)} | {lab} | {fl} | {tp} | {fl - tp} | {lab - tp} |")
    return "\n".join(out)


def details(rows: list[dict]) -> str:
    """Every disagreement (FP, FN) and every crash, with the kernel's labels and the lint's findings."""
    out = []
    for r in rows:
        k = r["kernel"]
        fp = sorted((r["flagged"] & set(RULE_IDS)) - r["labels"])
        fn = sorted(r["labels"] - r["flagged"])
        if not (fp or fn or r["error"]):
            continue
        out.append(f"{k.id} ({k.repo}:{k.path}{'' if k.record is None else f' record {k.record}'})")
        if r["error"]:
            out.append(f"  LINT ERROR {r['error']}")
        for rule in fp:
            out.append(f"  FP {rule}")
        for rule in fn:
            out.append(f"  FN {rule}: {k.labels[rule]}")
        out += [f"    {line}" for line in r["findings"]]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, required=True, help="folder holding local git copies of the repositories")
    ap.add_argument("--manifest", type=Path, default=MANIFEST)
    ap.add_argument("--split", choices=("A", "B", "all"), default="A")
    ap.add_argument("--pool", action="append", help="only these pools (repeatable)")
    ap.add_argument("--clone", action="store_true", help="git clone missing repositories into ROOT/owner/name")
    ap.add_argument("--by-pool", action="store_true", help="also print the per-pool totals")
    ap.add_argument("--details", action="store_true", help="also list every false positive, false negative, crash")
    args = ap.parse_args(argv)
    corpus = load_manifest(args.manifest)
    if args.clone:
        for repo in sorted({k.repo for k in corpus.kernels}):
            if repo_dir(args.root, repo) is None:
                clone(args.root, repo)
    splits = {"A", "B"} if args.split == "all" else {args.split}
    try:
        rows = evaluate(corpus, args.root, splits, set(args.pool) if args.pool else None)
    except CorpusError as exc:
        print(f"measure: {exc}", file=sys.stderr)
        return 2
    errors = sum(r["error"] is not None for r in rows)
    print(f"split {args.split}: {len(rows)} kernels, {sum(bool(r['labels']) for r in rows)} with a labelled defect, "
          f"{errors} lint crash(es)\n")
    print(table(rows))
    if args.by_pool:
        print()
        print(by_pool(rows))
    if args.details:
        print()
        print(details(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
