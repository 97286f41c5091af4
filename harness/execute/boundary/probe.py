"""What this machine lets a worker put between itself and everything else (``python -m harness.execute.boundary.probe``).

Crosses the boundary exactly as a worker does (:func:`harness.execute.boundary.enter.enter`, level
``available``), in a throwaway process started in an empty folder (its working directory, which the caller
makes and removes), and prints the resulting
:class:`~harness.execute.boundary.enter.Confinement` as one JSON line. The parent runs it once before a run
(:mod:`harness.execute.parent.isolation`) so a machine that cannot confine workers is known before any candidate.
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
    print(json.dumps(got.to_dict()), flush=True)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)
