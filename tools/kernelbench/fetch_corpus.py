"""Materialise the public LLM kernel corpus (``corpus.json``) as KernelGate submission folders.

Usage::

    python tools/kernelbench/fetch_corpus.py --mirror adityakotha03/tritonLLM=/work/.mirror/adityakotha03+tritonLLM/repo \\
        --mirror nathanjpaek/kb-pilot=/work/.mirror/nathanjpaek+kb-pilot/repo --out corpus-subs/ [--level 1] [--dsl triton]
        [--native-sample]    # one kernel per level-1 problem and per fifth level-2 problem (the device run's sample)
    python tools/kernelbench/fetch_corpus.py --from DIR --out corpus-subs/    # DIR/<owner>+<name>/<path>, or DIR/<path>

Sources are git directories (a ``fetch``-ed mirror or any clone holding the
recorded commit; read with ``git show COMMIT:PATH``) or plain folders of
files. Every file's bytes must have the sha256 recorded in the corpus; a
file that is missing or differs is reported and skipped, never written.

Output: one submission folder per (repository, model, DSL), named
``<repository>--<model>--<dsl>`` (slugged), holding

* ``<KernelBench id>.py`` per kernel (``<id>__2.py``, ... for further kernels of
  the same problem): the names KernelGate maps to problems exactly, so
  ``kernelgate run OUT/* --problems KernelBench/KernelBench`` needs no map;
* ``manifest.json`` (generator = the model, version = the commit, dsl);
* ``sources.json``: each file's repository, path, commit, licence and sha256.

Nothing fetched belongs in the KernelGate repository: ``corpus.json`` records
where the files are, and their licences (several have none) say why.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-").lower()


def read_from_git(gitdir: Path, commit: str, path: str) -> bytes | None:
    proc = subprocess.run(["git", "-C", str(gitdir), "show", f"{commit}:{path}"], capture_output=True)
    return proc.stdout if proc.returncode == 0 else None


def read_from_folder(root: Path, repository: str, path: str) -> bytes | None:
    for candidate in (root / repository.replace("/", "+") / path, root / repository.split("/")[1] / path, root / path):
        if candidate.is_file():
            return candidate.read_bytes()
    return None


def _number(problem_id: str) -> int:
    return int(problem_id.split("_", 1)[0])


def native_sample(entries: list[dict], level2_every: int = 5) -> list[dict]:
    """The integration sample: one kernel for each level-1 problem, and one for every ``level2_every``-th level-2
    problem (numbers 1, 1 + k, ...).

    Deterministic, and spread over DSLs and models: a level-1 problem whose number is a multiple of 4 takes a
    TileLang kernel where one exists (Triton otherwise), the others a Triton kernel where one exists; level 2
    alternates, starting with Triton. Among the kernels of the chosen DSL, the model is rotated by problem number,
    so no single model's style decides the sample.
    """
    by_problem: dict[tuple[int, str], list[dict]] = {}
    for e in entries:
        by_problem.setdefault((e["level"], e["problem_id"]), []).append(e)
    out = []
    for (level, pid), group in sorted(by_problem.items(), key=lambda kv: (kv[0][0], _number(kv[0][1]))):
        n = _number(pid)
        if level == 1:
            want = "tilelang" if n % 4 == 0 else "triton"
        elif level == 2 and (n - 1) % level2_every == 0:
            want = "triton" if ((n - 1) // level2_every) % 2 == 0 else "tilelang"
        else:
            continue
        pool = [e for e in group if e["dsl"] == want] or group
        models = sorted({e["model"] for e in pool})
        model = models[n % len(models)]
        out.append(sorted((e for e in pool if e["model"] == model), key=lambda e: e["path"])[0])
    return out


def select(entries: list[dict], args: argparse.Namespace) -> list[dict]:
    if getattr(args, "native_sample", False):
        entries = native_sample(entries)
    out = [e for e in entries if (args.level is None or e["level"] == args.level)
           and (args.dsl is None or e["dsl"] == args.dsl)
           and (not args.repository or e["repository"] in args.repository)]
    return out[: args.limit] if args.limit else out


def materialise(entries: list[dict], out: Path, read) -> tuple[int, list[str]]:
    """Write the selected entries under ``out``; (files written, problems found)."""
    problems: list[str] = []
    groups: dict[str, list[dict]] = {}
    for e in entries:
        groups.setdefault(f"{slug(e['repository'].split('/')[1])}--{slug(e['model'])}--{e['dsl']}", []).append(e)
    written = 0
    for name, group in sorted(groups.items()):
        folder = out / name
        sources: dict[str, dict] = {}
        taken: dict[str, int] = {}
        for e in group:
            data = read(e)
            if data is None:
                problems.append(f"{e['repository']}:{e['path']}@{e['commit'][:12]}: not found")
                continue
            digest = hashlib.sha256(data).hexdigest()
            if e.get("sha256") and digest != e["sha256"]:
                problems.append(f"{e['repository']}:{e['path']}: sha256 {digest[:12]} differs from the corpus's "
                                f"{e['sha256'][:12]}; not written")
                continue
            taken[e["problem_id"]] = taken.get(e["problem_id"], 0) + 1
            n = taken[e["problem_id"]]
            fname = f"{e['problem_id']}.py" if n == 1 else f"{e['problem_id']}__{n}.py"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / fname).write_bytes(data)
            sources[fname] = {k: e[k] for k in ("repository", "path", "commit", "level", "problem_id", "model",
                                                  "licence", "sha256") if k in e}
            written += 1
        if sources:
            first = group[0]
            manifest = {"generator": first["model"], "version": first["commit"][:12], "dsl": first["dsl"],
                        "notes": f"{first['repository']} at {first['commit']}; fetched by tools/kernelbench/"
                                 "fetch_corpus.py (sources.json names every file's origin)"}
            (folder / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
            (folder / "sources.json").write_text(json.dumps(sources, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return written, problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=HERE / "corpus.json")
    ap.add_argument("--mirror", action="append", default=[], metavar="OWNER/NAME=GITDIR")
    ap.add_argument("--from", dest="from_dir", type=Path, help="a folder of already downloaded files")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--level", type=int)
    ap.add_argument("--dsl", choices=("triton", "tilelang"))
    ap.add_argument("--repository", action="append", help="only this OWNER/NAME (repeatable)")
    ap.add_argument("--limit", type=int, help="at most this many files")
    ap.add_argument("--native-sample", action="store_true",
                    help="only the integration sample: one kernel per level-1 problem and per fifth level-2 problem "
                         "(see native_sample)")
    args = ap.parse_args(argv)
    if not args.mirror and not args.from_dir:
        ap.error("give --mirror OWNER/NAME=GITDIR (repeatable) or --from DIR")
    mirrors = {}
    for item in args.mirror:
        repo, _, gitdir = item.partition("=")
        if not gitdir:
            ap.error(f"--mirror {item!r}: expected OWNER/NAME=GITDIR")
        mirrors[repo] = Path(gitdir)
    entries = select(json.loads(args.corpus.read_text(encoding="utf-8"))["entries"], args)

    def read(e: dict) -> bytes | None:
        if e["repository"] in mirrors:
            return read_from_git(mirrors[e["repository"]], e["commit"], e["path"])
        return read_from_folder(args.from_dir, e["repository"], e["path"]) if args.from_dir else None

    written, problems = materialise(entries, args.out, read)
    for p in problems:
        print(f"fetch_corpus: {p}", file=sys.stderr)
    print(f"fetch_corpus: wrote {written} of {len(entries)} selected file(s) under {args.out}"
          + (f"; {len(problems)} not written (above)" if problems else ""))
    return 0 if written else 1


if __name__ == "__main__":
    raise SystemExit(main())
