"""Draw the held-out lint sample from local copies of its repositories, reproducibly (seeded).

Usage::

    python tools/lint_eval/draw.py --root /work/.mirror            # print the drawn entries as JSON
    python tools/lint_eval/draw.py --root ~/src --clone --check      # does the manifest match a fresh draw?

Each pool in ``manifest.json`` names a repository (pinned in ``sources``), a
regular expression for candidate paths (or JSON-lines files and their
records), a text every candidate must contain (a Triton or TileLang kernel),
a line limit, an optional grouping expression (at most one kernel per group,
so ten iterations of one generated kernel count once) and how many to draw;
``first_in_group`` takes each group's first file in path order (for the
generated kernels: the first attempt), ``exclude_taken_groups`` skips groups
an earlier pool of the same repository already drew from.
Candidates are listed at the pinned commit, sorted, and drawn with
``random.Random(f"{seed}:{pool}")``; entries alternate between split ``A``
(measured first) and ``B`` (held back) in draw order. The draw is blind to
the lint: it never runs it. Labels are written by hand afterwards.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import MANIFEST, CorpusError, clone, model_output_code, repo_dir  # noqa: E402


def _candidates(d: Path, commit: str, pool: dict) -> list[tuple[str, int | None, str]]:
    """``(path, record, group)`` of every candidate of a pool at ``commit``."""
    import subprocess

    names = subprocess.run(["git", "-C", str(d), "ls-tree", "-r", "--name-only", commit], capture_output=True,
                           text=True, check=True).stdout.splitlines()
    rx = re.compile(pool["paths"])
    grp = re.compile(pool["group"]) if pool.get("group") else None
    out = []
    for path in sorted(n for n in names if rx.search(n)):
        text = subprocess.run(["git", "-C", str(d), "show", f"{commit}:{path}"], capture_output=True, text=True,
                              check=True).stdout
        if pool.get("records"):
            rows = [json.loads(ln) for ln in text.splitlines() if ln.strip()]
            for i, row in enumerate(rows):
                code = model_output_code(row["predict"])
                if pool["contains"] in code and code.count("\n") <= pool["max_lines"]:
                    out.append((path, i, f"record{i}"))  # one per problem across the models' files
        elif pool["contains"] in text and text.count("\n") <= pool["max_lines"]:
            m = grp.search(path) if grp else None
            out.append((path, None, m.group(0) if m else path))
    return out


def draw(manifest: dict, root: Path, do_clone: bool) -> list[dict]:
    seed = manifest["draw"]["seed"]
    entries: list[dict] = []
    taken_groups: dict[str, set[str]] = {}  # repository -> groups drawn by earlier pools
    for name, pool in manifest["pools"].items():
        repo = pool["repo"]
        d = repo_dir(root, repo) or (clone(root, repo) if do_clone else None)
        if d is None:
            raise CorpusError(f"pool {name}: no local copy of {repo} under {root} (pass --clone, or clone it there)")
        cands = _candidates(d, manifest["sources"][repo]["commit"], pool)
        if pool.get("first_in_group"):  # the earliest file of each group (sorted path order), groups shuffled
            firsts: dict[str, tuple[str, int | None, str]] = {}
            for c in cands:
                firsts.setdefault(c[2], c)
            cands = list(firsts.values())
        rng = random.Random(f"{seed}:{name}")
        rng.shuffle(cands)
        seen: set[str] = set(taken_groups.get(repo, set())) if pool.get("exclude_taken_groups") else set()
        picked = []
        for path, record, group in cands:
            if group in seen:
                continue
            seen.add(group)
            picked.append((path, record))
            taken_groups.setdefault(repo, set()).add(group)
            if len(picked) == pool["n"]:
                break
        for i, (path, record) in enumerate(picked):
            entries.append({"id": f"{name}-{i + 1:02d}", "pool": name, "split": "AB"[i % 2], "repo": repo,
                            "path": path, "record": record})
        print(f"{name}: {len(cands)} candidates, drew {len(picked)}", file=sys.stderr)
    return entries


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, required=True, help="folder holding local git copies of the repositories")
    ap.add_argument("--manifest", type=Path, default=MANIFEST)
    ap.add_argument("--clone", action="store_true", help="git clone missing repositories into ROOT/owner/name")
    ap.add_argument("--check", action="store_true", help="exit 1 unless the manifest's kernels are this draw")
    args = ap.parse_args(argv)
    manifest = json.loads(args.manifest.read_text(encoding="utf-8"))
    entries = draw(manifest, args.root, args.clone)
    if args.check:
        key = ("id", "pool", "split", "repo", "path", "record")
        have = [{k: e.get(k) for k in key} for e in manifest.get("kernels", [])]
        if have != entries:
            print(f"{args.manifest}: kernels differ from a fresh draw", file=sys.stderr)
            return 1
        print(f"{args.manifest}: {len(entries)} kernels match the draw")
        return 0
    json.dump(entries, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
