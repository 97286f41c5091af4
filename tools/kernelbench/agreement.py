"""Put KernelGate's verdict on each KernelBench kernel beside the independent checker's and KernelBench's own.

Reads KernelGate's ``results.jsonl`` files (one record per kernel and workload), the JSON lines of
``independent_check.py`` and of ``run_kernelbench_eval.py``, joins them by kernel file
(``<submission folder>/<file>``), and prints a Markdown report: the counts per status, the
evaluations per GPU-hour of each tool (from the records' own timestamps and seconds), and a table with
one row per kernel, disagreements first::

    python tools/kernelbench/agreement.py --kernelgate kg_triton.jsonl kg_tilelang.jsonl \\
        --independent independent.jsonl --kb-eval kb_eval.jsonl [--wall kernelgate=512 independent=240 kb_eval=300]

A kernel "agrees" when KernelGate's status and the other tool's say the same about correctness:
KernelGate PASSED against "correct", any INCORRECT_* and the candidate's own failures (COMPILE_ERROR,
RUNTIME_ERROR, CRASHED, TIMEOUT, INVALID_CANDIDATE) against "incorrect" or "error" (KernelBench's
evaluator calls a kernel that raises at run time "incorrect"). REWARD_HACK is "refused": a verdict
the other tools do not have (each such row needs its own explanation); HARNESS_ERROR and TOO_LARGE
are the harness's, never the kernel's, and are listed as such.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

CANDIDATE_FAULT = {"COMPILE_ERROR", "RUNTIME_ERROR", "CRASHED", "TIMEOUT", "INVALID_CANDIDATE"}


def _key(path: str) -> str:
    parts = Path(path).parts
    return "/".join(parts[-2:])


def load_jsonl(paths: list[Path]) -> list[dict]:
    rows = []
    for p in paths:
        if not p.is_file():
            print(f"agreement: {p}: no such file (left out)", file=sys.stderr)
            continue
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    print(f"agreement: {p}:{n}: not JSON (a line cut by a killed run?); left out", file=sys.stderr)
    return rows


def kg_class(status: str) -> str:
    if status == "REWARD_HACK":
        return "refused"
    if status == "PASSED":
        return "correct"
    if status.startswith("INCORRECT_"):
        return "incorrect"
    if status in CANDIDATE_FAULT:
        return "error"
    return "harness"


def agrees(kg: str | None, other: str | None) -> str:
    if kg is None or other is None:
        return ""
    k = kg_class(kg)
    if k in ("harness", "refused"):
        return k
    if k == "correct":
        return "yes" if other == "correct" else "no"
    return "yes" if other in ("incorrect", "error") else "no"


def per_hour(rows: list[dict]) -> tuple[float | None, float | None]:
    """(evaluations per hour from first to last record's timestamps, span in seconds) of KernelGate records."""
    stamps = sorted(datetime.fromisoformat(r["created_at"]) for r in rows if r.get("created_at"))
    if len(stamps) < 2:
        return None, None
    span = (stamps[-1] - stamps[0]).total_seconds()
    return (3600.0 * len(rows) / span if span > 0 else None), span


def render(kg_rows: list[dict], ind_rows: list[dict], kb_rows: list[dict], wall: dict[str, float]) -> str:
    kg = {}
    for r in kg_rows:
        kg.setdefault(_key(r["candidate"]), []).append(r)
    ind = {_key(r["kernel"]): r for r in ind_rows if r.get("kernel")}
    kb = {_key(r["kernel"]): r for r in kb_rows if r.get("kernel")}
    keys = sorted(set(kg) | set(ind) | set(kb))
    out = ["# KernelBench kernels: KernelGate beside the independent checker and KernelBench's evaluator", ""]
    status_counts = Counter(r["status"] for r in kg_rows)
    out.append(f"KernelGate: {len(kg_rows)} record(s) for {len(kg)} kernel file(s): "
               + ", ".join(f"{k} {v}" for k, v in status_counts.most_common()))
    out.append(f"Independent checker: {len(ind)} kernel(s): "
               + ", ".join(f"{k} {v}" for k, v in Counter(r['status'] for r in ind.values()).most_common()))
    out.append(f"KernelBench's evaluator: {len(kb)} kernel(s): "
               + ", ".join(f"{k} {v}" for k, v in Counter(r['status'] for r in kb.values()).most_common()))
    out.append("")
    rate, span = per_hour(kg_rows)
    lines = []
    if rate and "kernelgate" not in wall:  # a given wall is authoritative (records merged from two runs have no span)
        lines.append(f"| KernelGate | {len(kg_rows)} | {span:.0f} s first to last record | {rate:,.0f} |")
    for name, rows in (("independent", ind), ("kb_eval", kb)):
        if name in wall and rows:
            lines.append(f"| {name} | {len(rows)} | {wall[name]:.0f} s wall | {3600 * len(rows) / wall[name]:,.0f} |")
    if "kernelgate" in wall and kg_rows:
        lines.append(f"| KernelGate (wall) | {len(kg_rows)} | {wall['kernelgate']:.0f} s wall | "
                     f"{3600 * len(kg_rows) / wall['kernelgate']:,.0f} |")
    if lines:
        out += ["| tool | evaluations | time | per hour |", "| --- | --- | --- | --- |", *lines, ""]
    table = []
    agree = Counter()
    for key in keys:
        records = kg.get(key, [])
        kg_status = None
        if records:
            worst = sorted(records, key=lambda r: (r["status"] == "PASSED", r["status"]))[0]
            kg_status = worst["status"]
        i, b = ind.get(key), kb.get(key)
        a_i = agrees(kg_status, i and i["status"])
        a_b = agrees(kg_status, b and b["status"])
        agree[("independent", a_i)] += 1
        agree[("kb_eval", a_b)] += 1
        detail = ""
        if records:
            r = worst
            scr = r.get("screening") or {}
            if r["status"] == "PASSED":
                detail = f"{scr.get('verdict', '')} E_lib {scr.get('e_lib', float('nan')):.2f}" if scr else ""
            else:
                detail = ((r.get("error") or {}).get("message") or "")[:160].replace("|", "/").replace("\n", " ")
        i_detail = ""
        if i:
            i_detail = (f"max diff {i['max_abs_diff']:.2g}" if isinstance(i.get("max_abs_diff"), (int, float))
                        else (i.get("error") or "")[:80].replace("|", "/").replace("\n", " "))
        order = 0 if "no" in (a_i, a_b) else (1 if {"harness", "refused"} & {a_i, a_b} else 2)
        table.append((order, key, f"| {key} | {kg_status or '-'} | {detail} | {i['status'] if i else '-'} "
                                  f"({i.get('precision', '') if i else ''}) {i_detail} | {b['status'] if b else '-'} | "
                                  f"{a_i} | {a_b} |"))
    out.append("Agreement on correctness (KernelGate vs the independent checker / KernelBench's evaluator): "
               + "; ".join(f"{tool} {label or 'not compared'} {n}" for (tool, label), n in sorted(agree.items())))
    out += ["", "| kernel | KernelGate | detail | independent | KernelBench eval | agree (ind) | agree (KB) |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    out += [row for _, _, row in sorted(table)]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernelgate", type=Path, nargs="+", default=[], help="KernelGate results.jsonl file(s)")
    ap.add_argument("--independent", type=Path, nargs="*", default=[], help="independent_check.py output")
    ap.add_argument("--kb-eval", type=Path, nargs="*", default=[], help="run_kernelbench_eval.py output")
    ap.add_argument("--wall", nargs="*", default=[], metavar="TOOL=SECONDS",
                    help="wall seconds of each tool's run (kernelgate, independent, kb_eval)")
    ap.add_argument("--out", type=Path, help="write the Markdown here (default: stdout)")
    args = ap.parse_args(argv)
    wall = {}
    for item in args.wall:
        name, _, sec = item.partition("=")
        wall[name] = float(sec)
    text = render(load_jsonl(args.kernelgate), load_jsonl(args.independent), load_jsonl(args.kb_eval), wall)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
