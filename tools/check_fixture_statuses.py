"""Compare each adversarial fixture's recorded status with what it must get.

Every other fixture carries an 'expect: STATUS' in its docstring (an 'expect on a GPU: STATUS' there wins: these
results come from a GPU); the exploits
(tests/execute/fixtures/exploits) carry theirs in tests/execute/exploit_catalog.py: REWARD_HACK or an
INCORRECT_* status stops any of them, and an entry whose outcome is NO_GAIN may also pass (gaining nothing).
Each line names the mechanism that stopped the candidate (the record's evidence), or its E_lib.

An exploit whose catalog entry names only GPU-sized workloads (its trick fires there, e.g. a tolerance trick that
needs many columns) is judged on its records at those workloads; a record of it at another workload is shown as
``n/a`` and not judged, and an exploit never run at its workloads is BAD. ``--targets`` prints those exploits and
their workloads, one per line, for a second run (tools/device/trusted_run.sh, part ``fixtures``).

Usage: python tools/check_fixture_statuses.py RESULTS_DIR  |  python tools/check_fixture_statuses.py --targets
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

from harness.results.store import load_results

ROOT = Path(__file__).resolve().parents[1] / "tests" / "execute" / "fixtures"


CAUGHT = "REWARD_HACK|INCORRECT_NUMERICAL|INCORRECT_SHAPE|INCORRECT_DTYPE"


def _load_catalog():
    path = ROOT.parent / "exploit_catalog.py"
    spec = importlib.util.spec_from_file_location("exploit_catalog", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{path}: cannot be loaded")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["exploit_catalog"] = mod
    spec.loader.exec_module(mod)
    return mod


def _catalog() -> dict[str, str]:
    """exploits/<file> -> the statuses its catalog entry accepts."""
    mod = _load_catalog()
    return {f"exploits/{e.fixture}": CAUGHT + ("|PASSED" if e.expected == mod.NO_GAIN else "") for e in mod.EXPLOITS}


def targeted() -> dict[str, tuple[str, ...]]:
    """exploits/<file> -> its workloads, for the exploits whose trick fires only at GPU-sized workloads."""
    return {f"exploits/{e.fixture}": tuple(e.workloads) for e in _load_catalog().EXPLOITS
            if "smoke" not in e.workloads}


def _docstring(path: Path) -> str:
    """The module docstring (a fixture that does not parse, on purpose, has its first string read as text)."""
    text = path.read_text()
    try:
        return ast.get_docstring(ast.parse(text)) or ""
    except SyntaxError:
        m = re.match(r'\s*(?:"""|\'\'\')(.*?)(?:"""|\'\'\')', text, re.S)
        return m.group(1) if m else text.splitlines()[0]


def main(results_dir: str) -> int:
    expected = _catalog()
    for f in ROOT.glob("*/*.py"):
        doc = _docstring(f)
        m = re.search(r"expect on a GPU: ([A-Z_|]+)", doc) or re.search(r"expect: ([A-Z_|]+)", doc)
        if m:
            expected[f"{f.parent.name}/{f.name}"] = m.group(1)
    targets = targeted()
    bad = 0
    reached: set[str] = set()
    for r in sorted(load_results(results_dir), key=lambda r: (r.candidate, r.workload or "")):
        if r.candidate in targets and r.workload not in targets[r.candidate]:
            print(f"n/a {r.candidate:45s} {r.status.value:20s} {'-':20s} at {r.workload}: its trick targets "
                  f"{', '.join(targets[r.candidate])}")
            continue
        reached.add(r.candidate)
        want = expected.get(r.candidate, "?")
        ok = r.status.value in want.split("|")
        bad += not ok
        mech = (r.evidence or {}).get("mechanism") if isinstance(r.evidence, dict) else None
        extra = f"E_lib={r.screening.e_lib:.2f}" if r.screening else (r.error.message[:70] if r.error else "")
        shown = "caught" if want.startswith(CAUGHT) else want
        print(f"{'ok ' if ok else 'BAD'} {r.candidate:45s} {r.status.value:20s} {mech or '-':20s} expected "
              f"{shown:20s} {extra}")
    for name in sorted(set(targets) - reached):
        bad += 1
        print(f"BAD {name:45s} {'(no record)':20s} {'-':20s} never run at {', '.join(targets[name])}")
    print(f"{bad} fixture(s) with an unexpected status")
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--targets"]:
        for name, workloads in targeted().items():
            print(name, ",".join(workloads))
        sys.exit(0)
    if len(sys.argv) != 2:
        raise SystemExit(__doc__.strip().splitlines()[-1])
    sys.exit(main(sys.argv[1]))
