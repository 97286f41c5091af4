"""The worker's audit hooks and identity checks, each in a fresh interpreter with its exploit."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, candidate: str) -> str:
    """Install the hooks for a scratch folder, import ``candidate`` from there, print the log."""
    cand = tmp_path / "cand.py"
    cand.write_text(textwrap.dedent(candidate))
    driver = textwrap.dedent(f"""
        import importlib.util, sys
        from harness.execute import audit, tamper
        import torch
        check = tamper.TamperCheck(); check.snapshot()
        log = audit.install(({str(tmp_path)!r},))
        spec = importlib.util.spec_from_file_location("cand", {str(cand)!r})
        m = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(m)
            print("RESULT", getattr(m, "RESULT", None))
        except Exception as exc:
            print("RAISED", type(exc).__name__)
        print("LOG", list(log.take()))
        print("PATCHED", check.changed())
    """)
    proc = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_frame_walking_gc_and_ctypes_are_refused_from_candidate_code(tmp_path):
    out = _run(tmp_path, """
        import sys
        hits = []
        for attempt in (lambda: sys._getframe(1), lambda: __import__("gc").get_objects(),
                        lambda: __import__("inspect").currentframe(),
                        lambda: __import__("ctypes").string_at(id(1), 8), lambda: sys._current_frames()):
            try:
                attempt()
                hits.append("allowed")
            except RuntimeError:
                hits.append("refused")
        RESULT = hits
    """)
    assert "RESULT ['refused', 'refused', 'refused', 'refused', 'refused']" in out, out
    assert "sys._getframe" in out and "gc.get_objects" in out and "ctypes.string_at" in out


def test_library_code_may_still_do_what_candidates_may_not(tmp_path):
    """namedtuple, dataclasses and warnings look at frames internally: honest candidates use them."""
    out = _run(tmp_path, """
        import collections, dataclasses, warnings
        P = collections.namedtuple("P", "a b")
        @dataclasses.dataclass
        class D:
            x: int = 1
        warnings.warn("fine")
        RESULT = (P(1, 2).a, D().x)
    """)
    assert "RESULT (1, 2)" in out or "RESULT (1, 1)" in out, out
    assert "LOG []" in out, out


def test_replaced_torch_functions_are_noticed(tmp_path):
    """Exploit: slow the library (or fake a timer) by rebinding torch functions; not auditable, so compared."""
    out = _run(tmp_path, """
        import torch, torch.nn.functional as F
        F.layer_norm = lambda *a, **k: None
        torch.cuda.synchronize = lambda *a: None
        RESULT = "patched"
    """)
    assert "patched torch.nn.functional.layer_norm" in out and "patched torch.cuda.synchronize" in out, out


def test_exec_of_built_code_is_refused(tmp_path):
    out = _run(tmp_path, """
        try:
            exec(compile("x = 1", "/usr/lib/python3/dist-packages/fake.py", "exec"))
            RESULT = "ran"
        except RuntimeError:
            RESULT = "refused"
    """)
    assert "RESULT refused" in out and "compile" in out, out
