"""Make N distinct copies of submission folders: a stand-in for an LLM run with many candidates per problem.

Each copy ``OUT/<folder>-r<k>`` holds every candidate of ``<folder>`` with one
comment line appended (``# replica k``), so its content hash, job ids and cache
keys differ from the original's (nothing is skipped as already evaluated); the
manifest's generator becomes ``<generator>-r<k>``. Used by the throughput
benchmark to give two GPUs more work than the bundled suite's critical path.

Usage: python tools/replicate_suite.py --copies 2 --out /tmp/rep submissions/triton-reference ...
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path


def replicate(folders: list[Path], copies: int, out: Path) -> list[Path]:
    made = []
    for folder in folders:
        for k in range(1, copies + 1):
            dest = out / f"{folder.name}-r{k}"
            if dest.exists():
                shutil.rmtree(dest)
            dest.mkdir(parents=True)
            for src in sorted(folder.iterdir()):
                if src.suffix == ".py":
                    (dest / src.name).write_text(src.read_text(encoding="utf-8") + f"\n# replica {k}\n", encoding="utf-8")
                elif src.name == "manifest.json":
                    data = json.loads(src.read_text(encoding="utf-8"))
                    data["generator"] = f"{data.get('generator', folder.name)}-r{k}"
                    (dest / src.name).write_text(json.dumps(data), encoding="utf-8")
            made.append(dest)
    return made


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--copies", type=int, default=2)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    print(" ".join(str(p) for p in replicate(args.folders, args.copies, args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
