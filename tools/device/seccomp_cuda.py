"""Which of the worker's seccomp rules the CUDA driver trips over, if any (needs a GPU).

Each check runs in a fresh process that installs part of the filter (:func:`harness.execute.boundary.seccomp.install`
with one rule group, or the whole filter) and then makes a CUDA context and runs a kernel, as a worker does. When
the ``refused`` group fails, its calls are halved until one call is left. Prints one line per check.

Usage: python tools/device/seccomp_cuda.py
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHILD = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
from harness.execute.boundary import seccomp
groups, names = json.loads(sys.argv[2]), json.loads(sys.argv[3])
if names is not None:
    seccomp.REFUSED = tuple(names)
seccomp.install(groups=None if groups is None else tuple(groups))
import torch
x = torch.ones(1 << 20, device="cuda")
torch.cuda.synchronize()
print("ok", float((x * 2).sum()))
'''


def attempt(groups: list[str] | None, names: list[str] | None = None) -> str:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), json.dumps(groups), json.dumps(names)],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode == 0 and proc.stdout.startswith("ok"):
        return "ok"
    return "FAILS: " + (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1][:200]


def main() -> int:
    from harness.execute.boundary import seccomp

    print("no filter:", attempt([]))
    print("whole filter:", attempt(None))
    groups = sorted({g for g, *_ in seccomp.rules(seccomp.binding())})
    for group in groups:
        got = attempt([group])
        print(f"only {group}:", got)
        if group == "refused" and got != "ok":
            names = list(seccomp.REFUSED)
            while len(names) > 1:
                half = names[: len(names) // 2]
                names = half if attempt([group], half) != "ok" else names[len(names) // 2:]
            print("  the refused call CUDA needs:", names, attempt([group], names))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
