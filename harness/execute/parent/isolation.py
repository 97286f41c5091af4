"""Whether this machine can confine workers as a run requires, decided before the run starts.

:func:`require` runs the boundary probe (:mod:`harness.execute.boundary.probe`) once per process and level and
compares what it got with the run's ``isolation`` option: ``strict`` needs every part of the boundary, and a run
that cannot have it stops before any candidate with :class:`IsolationUnavailable`, naming what is missing and
the option that accepts less (``--isolation available``); ``available`` and ``off`` take what there is (every
record says what was in force, in ``env.sandbox``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading

from harness.execute.boundary.enter import Confinement

_CACHE: dict[str, Confinement] = {}
_LOCK = threading.Lock()
PROBE_TIMEOUT_S = 60.0


class IsolationUnavailable(RuntimeError):
    """The run asked for a confinement this machine cannot give."""


def probe(device: str = "cpu") -> Confinement:
    """What a worker gets on this machine (run once per process and device kind; the probe takes ~0.1 s, a few
    seconds more on a GPU, where it also makes a CUDA context inside the boundary)."""
    key = "cuda" if device.startswith("cuda") else "cpu"
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]
    from harness.execute.parent.children import worker_pythonpath

    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": worker_pythonpath(), "LANG": "C.UTF-8",
           "PYTHONDONTWRITEBYTECODE": "1"}
    for passthrough in ("LD_LIBRARY_PATH", "TMPDIR", "CUDA_VISIBLE_DEVICES", "CUDA_HOME"):
        if passthrough in os.environ:
            env[passthrough] = os.environ[passthrough]
    folder = tempfile.mkdtemp(prefix="kg-probe-")
    try:
        argv = [sys.executable, "-m", "harness.execute.boundary.probe"] + (["--cuda"] if key == "cuda" else [])
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, env=env, cwd=folder)
        line = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
        data = json.loads(line) if line else {"error": proc.stderr.strip()[-400:] or f"exit {proc.returncode}"}
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        data = {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if "error" in data:
        got = Confinement((), False, "", False, "none: probe failed", (f"probe: {data['error']}",), "available")
    else:
        got = Confinement.from_dict(data)
        if data.get("cuda", "ok") != "ok":
            got = dataclasses.replace(got, missing=got.missing + (f"CUDA inside the boundary: {data['cuda']}",))
    with _LOCK:
        _CACHE[key] = got
    return got


def require(level: str, device: str = "cpu") -> Confinement:
    """The confinement workers will get at ``level`` on ``device``; raises :class:`IsolationUnavailable` when
    ``level`` is ``strict`` and any part is missing (on a GPU: CUDA not working inside the boundary included)."""
    if level == "off":
        return Confinement((), False, "", False, "none: isolation off", (), "off")
    got = probe(device)
    if level == "strict" and got.missing:
        raise IsolationUnavailable(
            "this machine cannot confine candidate workers completely: " + "; ".join(got.missing)[:800]
            + ". Candidates would run with less than the documented boundary (docs/security.md). Fix the machine "
            "(user namespaces enabled, libseccomp2 and the pyseccomp package installed, Landlock in the kernel), "
            "or pass --isolation available to run with what it allows (recorded in every record's env.sandbox).")
    return got


def forget() -> None:
    """Drop the cached probe (tests; a machine whose settings changed)."""
    with _LOCK:
        _CACHE.clear()
