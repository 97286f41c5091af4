"""Rebuild ``tools/kernelbench/corpus.json`` from git mirrors of the public repositories it lists.

Usage::

    python tools/kernelbench/build_corpus.py --mirror adityakotha03/tritonLLM=/path/to/tritonLLM.git \\
        --mirror nathanjpaek/kb-pilot=/path/to/kb-pilot.git [--out tools/kernelbench/corpus.json]

Each mirror is a git directory (bare or not) at the commit to record (its
``HEAD``). For every source the rules below say where its LLM-generated
KernelBench kernels are, which model wrote them and how to read the problem
from the path. A file enters the corpus only when it imports its DSL and
defines ``ModelNew``, and its problem resolves to a KernelBench id of the
checked-in map (``harness/problems/kernelbench_categories.json``): an id
spelled differently in the source (a dropped trailing ``_``) is resolved by
its level and number, and the entry keeps the source's path. Nothing of the
files' contents is stored, only where they are.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SIDECAR = ROOT / "harness" / "problems" / "kernelbench_categories.json"

#: Folder name -> (model, where the repository says so).
TRITONLLM_MODELS = {
    "qwen3_30b": ("Qwen/Qwen3-30B-A3B-Instruct-2507", "Qwen3_30B_Eval/main.py loads it"),
    "qwen3_4b_finetuned": ("Qwen/Qwen3-4B-Instruct-2507-finetuned", "Qwen3-4B-Instruct-2507/main.py: BASE_MODEL, "
                           "fine-tuned (folder name)"),
    "gpt-5": ("openai/gpt-5", "zero-shot (output/zeroshot/gpt-5)"),
    "gemini-2.5-pro": ("gemini-2.5-pro", "zero-shot (output/zeroshot/gemini-2.5-pro)"),
    "openai-gpt-5": ("openai/gpt-5-search", "best of a search over gpt-5 candidates (output/search)"),
}
SOURCES = {
    "adityakotha03/tritonLLM": {
        "dsl": "triton",
        "licence": "NOASSERTION",
        "licence_note": "no LICENSE file at this commit: all rights reserved by default; never redistribute, "
                        "fetch from the repository",
        "pattern": re.compile(r"^output/(?:zeroshot|search)/(?P<model>[^/]+)/(?:level(?P<level>\d)/)?(?P<id>[^/]+)\.py$"),
    },
    "nathanjpaek/kb-pilot": {
        "dsl": "tilelang",
        "licence": "MIT",
        "licence_note": "KernelBench/LICENSE in the repository (KernelBench's MIT licence, kept by this fork); no "
                        "licence file at the repository root",
        "pattern": re.compile(r"^KernelBench/src/prompts/correct_tilelang/level(?P<level>[123])/"
                              r"(?P=level)_(?P<number>\d+)(?:_(?P<k>\d+))?\.py$"),
    },
}


def git(mirror: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(mirror), *args], check=True, capture_output=True, text=True).stdout


def kernelbench_ids() -> dict[str, dict]:
    return json.loads(SIDECAR.read_text(encoding="utf-8"))["problems"]


def resolve(ids: dict[str, dict], name: str, level: int | None) -> tuple[str, int] | None:
    """(KernelBench id, level) for a name as a source spells it; None when it is not a level-1/2/3 problem."""
    if name in ids and (level is None or ids[name]["level"] == level):
        return name, ids[name]["level"]
    m = re.match(r"^(\d+)_", name)
    if not m or level is None:
        return None
    same = [pid for pid, v in ids.items() if v["level"] == level and pid.startswith(f"{m.group(1)}_")]
    return (same[0], level) if len(same) == 1 and same[0].rstrip("_").lower() == name.rstrip("_").lower() else None


def is_kernel(text: str, dsl: str) -> bool:
    return bool(re.search(rf"^\s*(import|from)\s+{dsl}\b", text, re.MULTILINE)) and "class ModelNew" in text


def entries_for(repo: str, mirror: Path, ids: dict[str, dict]) -> list[dict]:
    rule = SOURCES[repo]
    commit = git(mirror, "rev-parse", "HEAD").strip()
    out = []
    for path in git(mirror, "ls-tree", "-r", "--name-only", "HEAD").splitlines():
        m = rule["pattern"].match(path)
        if not m:
            continue
        text = git(mirror, "show", f"HEAD:{path}")  # as stored: fetch_corpus checks these bytes' sha256
        if not is_kernel(text, rule["dsl"]):
            continue
        groups = m.groupdict()
        level = int(groups["level"]) if groups.get("level") else None
        if repo == "nathanjpaek/kb-pilot":
            doc = re.search(r"Problem Name:\s*(\S+)", text)
            name = doc.group(1) if doc else ""
            model = re.search(r"Generated using (.*?) with (\S+)", text)
            model_name = model.group(2) if model else "unknown"
            model_note = f"{model.group(1)} (the file's docstring)" if model else "the file does not say"
            found = resolve(ids, name, level)
            if found and not found[0].startswith(f"{int(groups['number'])}_"):
                found = None
        else:
            model_name, model_note = TRITONLLM_MODELS.get(groups["model"], (groups["model"], "folder name"))
            found = resolve(ids, groups["id"], level)
        if found is None:
            continue
        pid, lvl = found
        out.append({"repository": repo, "path": path, "commit": commit, "level": lvl, "problem_id": pid,
                    "dsl": rule["dsl"], "model": model_name, "model_note": model_note, "licence": rule["licence"],
                    "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mirror", action="append", default=[], metavar="OWNER/NAME=GITDIR", required=True)
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("corpus.json"))
    args = ap.parse_args(argv)
    ids = kernelbench_ids()
    entries: list[dict] = []
    for item in args.mirror:
        repo, _, mirror = item.partition("=")
        if repo not in SOURCES:
            ap.error(f"--mirror {item}: no rules for {repo}; known: {sorted(SOURCES)}")
        entries += entries_for(repo, Path(mirror), ids)
    entries.sort(key=lambda e: (e["level"], int(e["problem_id"].split("_")[0]), e["repository"], e["path"]))
    covered = {lvl: sorted({int(e["problem_id"].split("_")[0]) for e in entries if e["level"] == lvl}) for lvl in (1, 2, 3)}
    data = {
        "about": "LLM-generated KernelBench kernels in public repositories (Triton and TileLang), by repository, "
                 "path and commit; nothing of their code is stored here. tools/kernelbench/fetch_corpus.py "
                 "materialises them under KernelGate names. Rebuilt by tools/kernelbench/build_corpus.py.",
        "kernelbench_ids": "harness/problems/kernelbench_categories.json",
        "coverage": {f"level{lvl}": {"problems": len(nums), "of": sum(1 for v in ids.values() if v["level"] == lvl)}
                     for lvl, nums in covered.items()},
        "counts": {f"{dsl}": sum(1 for e in entries if e["dsl"] == dsl) for dsl in ("triton", "tilelang")},
        "repositories": {repo: {"licence": SOURCES[repo]["licence"], "licence_note": SOURCES[repo]["licence_note"],
                                "commit": next((e["commit"] for e in entries if e["repository"] == repo), None)}
                         for repo in sorted({e["repository"] for e in entries})},
        "entries": entries,
    }
    head = json.dumps({k: v for k, v in data.items() if k != "entries"}, indent=1)[:-2]
    lines = ",\n  ".join(json.dumps(e, sort_keys=True) for e in entries)
    args.out.write_text(f'{head},\n "entries": [\n  {lines}\n ]\n}}\n', encoding="utf-8")
    print(f"wrote {len(entries)} entries to {args.out}: " + json.dumps(data["coverage"]) + " " + json.dumps(data["counts"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
