"""Load a client's problem file in a subprocess, so the service's own process never executes it.

``python -m harness.serve.problem_probe PATH`` loads the problem with
:func:`harness.problems.loader.load_problem` and prints one JSON line:
``{"ok": true, "problem": Problem.to_dict(), "source_sha256": ...}`` or
``{"ok": false, "error": "<the loader's message>"}``. :func:`probe` runs it
with a scrubbed environment (no GPU visible) and a timeout and rebuilds the
:class:`~harness.problems.loader.Problem` from the line.

Why a subprocess: a problem file is a Python module (its ``Model``,
``get_inputs``), and the service must not run client-supplied code in its
own process. The engine then treats the problem like a ``--problems`` file:
the worker and the trusted checker load it (see docs/service.md on why
``--allow-problem-source`` is off by default).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]

PROBE_TIMEOUT_S = 120.0
"""Seconds a problem file may take to load (derived FLOPs run the model on meta tensors)."""


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    from harness.problems.loader import ProblemError, load_problem

    try:
        prob = load_problem(Path(args[0]))
    except ProblemError as exc:
        print(json.dumps({"ok": False, "error": str(exc)}))
        return 0
    print(json.dumps({"ok": True, "problem": prob.to_dict(), "source_sha256": prob.source_sha256}))
    return 0


def probe_env(scratch: Path) -> dict[str, str]:
    """The probe's whole environment: the harness on the path, no GPU, nothing else of the service's."""
    path = str(PROJECT_ROOT)
    extra = os.environ.get("KERNELGATE_EXTRA_PYTHONPATH") or os.environ.get("PYTHONPATH")
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(scratch), "TMPDIR": str(scratch / "tmp"),
            "PYTHONPATH": path + (os.pathsep + extra if extra else ""), "PYTHONDONTWRITEBYTECODE": "1",
            "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1", "LANG": "C.UTF-8"}


def probe(path: Path, scratch: Path, timeout_s: float = PROBE_TIMEOUT_S):
    """The Problem of ``path``, loaded in a subprocess; ValueError with the loader's message if it is not one."""
    from harness.problems.loader import Problem, Workload

    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "tmp").mkdir(exist_ok=True)
    try:
        proc = subprocess.run([sys.executable, "-m", "harness.serve.problem_probe", str(path)], capture_output=True,
                              text=True, timeout=timeout_s, cwd=scratch, env=probe_env(scratch),
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ValueError(f"loading the problem file took more than {timeout_s:.0f} s") from None
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise ValueError(f"loading the problem file failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    out = json.loads(lines[-1])
    if not out["ok"]:
        raise ValueError(out["error"].replace(str(path), path.name))
    d = out["problem"]
    workloads = tuple(Workload(name=w["name"], params=w["params"], dtype=w["dtype"], tags=tuple(w["tags"]), atol=w["atol"],
                               rtol=w["rtol"], allow_tf32=w["allow_tf32"], flops=w["flops"], min_bytes=w["min_bytes"],
                               reduction_length=w["reduction_length"]) for w in d["workloads"])
    return Problem(id=d["id"], category=d["category"], path=Path(d["path"]), source_sha256=out["source_sha256"],
                   library_op=d["library_op"], library_aten=tuple(d["library_aten"]), input_transform=d["input_transform"],
                   in_place=d["in_place"], derived=d["derived"], workloads=workloads, description=d["description"])


if __name__ == "__main__":
    sys.exit(main())
