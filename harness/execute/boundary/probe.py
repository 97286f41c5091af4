"""What this machine lets a worker put between itself and everything else (``python -m harness.execute.boundary.probe``).

Crosses the boundary exactly as a worker does (:func:`harness.execute.boundary.enter.enter`, level
``available``), in a throwaway process started in an empty folder (its working directory, which the caller
makes and removes), and prints the resulting
:class:`~harness.execute.boundary.enter.Confinement` as one JSON line. The parent runs it once before a run
(:mod:`harness.execute.parent.isolation`) so a machine that cannot confine workers is known before any candidate.
With ``--cuda`` it also makes a CUDA context inside the boundary, as every GPU worker does.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    from harness.execute.boundary.enter import enter

    problem = os.path.join(os.getcwd(), "problem.py")
    with open(problem, "w") as f:
        f.write("")
    try:
        got = enter({"isolation": "available"}, [problem])
    except Exception as exc:  # noqa: BLE001 - reported, not raised: the parent decides what it means
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 1
    out = got.to_dict()
    if "--cuda" in sys.argv:  # a GPU run: the CUDA driver must work inside the boundary, as in every worker
        try:
            import torch

            torch.empty(1, device="cuda")
            torch.cuda.synchronize()
            out["cuda"] = "ok"
        except Exception as exc:  # noqa: BLE001
            out["cuda"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)
