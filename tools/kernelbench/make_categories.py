"""Regenerate ``harness/problems/kernelbench_categories.json`` from a KernelBench checkout.

Usage::

    python tools/kernelbench/make_categories.py KERNELBENCH_DIR [--commit SHA] [--check]

``KERNELBENCH_DIR`` is the folder holding ``level1/ level2/ level3/`` (in the
ScalingIntelligence/KernelBench repository: ``KernelBench/``). Each file's
category is what :func:`harness.problems.categories.classify_ops` says from its
forward on meta tensors (dominant FLOPs first: a fused level-2 op is its conv or
GEMM), then :data:`HAND_LABELS` wins where a label was set by hand. A file whose
forward could not run keeps its previous label (or the hand label). ``--check``
only prints where the ops classifier and the current map disagree.

The map was reviewed by hand entry by entry; :data:`HAND_LABELS` lists the
entries whose label is not what the ops say, with the reason.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

#: Labels set by hand where the forward cannot be judged here (an import this machine lacks).
HAND_LABELS: dict[str, tuple[str, str]] = {
    "48_Mamba2ReturnY": ("gemm", "einsum/bmm chunked scan: bmm FLOPs dominate (checked with einops installed)"),
    "49_Mamba2ReturnFinalState": ("gemm", "as 48_Mamba2ReturnY"),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernelbench_dir", type=Path)
    ap.add_argument("--commit", default="", help="the KernelBench commit the folder is from (recorded in the map)")
    ap.add_argument("--check", action="store_true", help="print disagreements only, write nothing")
    args = ap.parse_args(argv)
    os.environ.setdefault("KERNELGATE_DERIVE_BUDGET_S", "0")

    from harness.problems import categories
    from harness.problems.costcache import cost_key, lookup
    from harness.problems.loader import load_problem

    current = categories.kernelbench_map()
    out: dict[str, dict] = {}
    disagree = []
    for level in (1, 2, 3):
        folder = args.kernelbench_dir / f"level{level}"
        for path in sorted(folder.glob("*.py"), key=lambda p: int(p.stem.split("_")[0])):
            pid = path.stem
            label, source = None, "ops"
            try:
                prob = load_problem(path)
                w = prob.workloads[0]
                cost = lookup(cost_key(prob.source_sha256, w.overrides, w.dtype), budget_s=None)
                label = categories.classify_ops(cost) if cost is not None else None
            except Exception as exc:  # noqa: BLE001 - reported, the previous label is kept
                print(f"{pid}: not judged ({type(exc).__name__}: {str(exc)[:120]})", file=sys.stderr)
            if pid in HAND_LABELS:
                label, source = HAND_LABELS[pid][0], "hand"
            if label is None:
                label, source = current.get(pid, {}).get("category"), "previous"
            if label is None:
                print(f"{pid}: no label", file=sys.stderr)
                continue
            prev = current.get(pid, {}).get("category")
            if prev and prev != label:
                disagree.append(f"{pid}: map {prev}, {source} {label}")
            out[pid] = {"level": level, "category": label}
    for line in disagree:
        print(line)
    if args.check:
        return 1 if disagree else 0
    data = {
        "about": "Category and level of every KernelBench level-1/2/3 problem, keyed by KernelBench id (exact "
                 "spelling). Written by tools/kernelbench/make_categories.py (dominant op by FLOPs from a forward "
                 "on meta tensors, reviewed by hand); edit by hand only with a reason in HAND_LABELS there.",
        "source": {"repository": "ScalingIntelligence/KernelBench", "commit": args.commit},
        "hand_labels": {k: v[1] for k, v in HAND_LABELS.items()},
        "problems": out,
    }
    categories.SIDECAR.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    print(f"wrote {len(out)} entries to {categories.SIDECAR}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
