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
        from harness.execute.worker.rules import audit
        from harness.execute.worker.rules import tamper
        import torch, triton.runtime.jit, triton.runtime.autotuner  # loaded before the snapshot, as in the worker
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
    # the driver runs from a file of its own, outside the candidate's folder, as the worker's loop does (code
    # from "-c" has a made-up file name: with nothing but the standard library under it, it is the candidate's)
    script = tmp_path.parent / f"{tmp_path.name}_driver.py"
    script.write_text(driver)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
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


def test_replaced_claim_machinery_is_noticed_and_torch_functions_are_not(tmp_path):
    """Exploit: forge the kernel attribution by rebinding what the profiler and the launch counter rest on (not
    auditable, so compared). Replacing a torch function changes only the candidate's own model, whose outputs are
    checked outside the worker; PyTorch's Dynamo itself wraps ``torch.manual_seed`` when it is imported, so
    watching torch's namespace accused every honest candidate that imports it."""
    out = _run(tmp_path, """
        import torch, torch.nn.functional as F
        import triton.runtime.jit as J
        from torch.autograd.profiler_util import FunctionEvent
        F.layer_norm = lambda *a, **k: None
        torch.manual_seed = lambda s, _f=torch.manual_seed: _f(s)
        J.JITFunction.run = lambda self, *a, **k: None
        FunctionEvent.__init__ = lambda self, *a, **k: None
        RESULT = "patched"
    """)
    assert "patched triton.runtime.jit.JITFunction.run" in out, out
    assert "patched torch.autograd.profiler_util.FunctionEvent.__init__" in out, out
    assert "layer_norm" not in out and "manual_seed" not in out, out


def test_exec_of_built_code_is_refused(tmp_path):
    out = _run(tmp_path, """
        try:
            exec(compile("x = 1", "/usr/lib/python3/dist-packages/fake.py", "exec"))
            RESULT = "ran"
        except RuntimeError:
            RESULT = "refused"
    """)
    assert "RESULT refused" in out and "compile" in out, out


def test_a_swapped_worker_component_is_noticed():
    """Exploit: candidate code that reaches the worker through gc (past the audit hooks) replaces its guards with a
    copy whose recorder sees nothing; the worker's own components are compared like modules' entries."""
    from types import SimpleNamespace

    from harness.execute.worker import main as worker_mod
    from harness.execute.worker.rules.tamper import TamperCheck

    w = SimpleNamespace(**{n: object() for n in worker_mod.COMPONENTS}, calls_in_window=0)
    check = TamperCheck()
    check.watch("worker", w, worker_mod.COMPONENTS)
    w.calls_in_window = 5  # state the loop updates is not watched
    assert check.changed() == []
    w.guards = SimpleNamespace()
    assert check.changed() == ["patched worker.guards"]


def test_the_worker_watches_every_component_it_sets_up():
    """Every attribute the worker's __init__ binds is either watched or named as state the loop updates."""
    import ast
    import inspect

    from harness.execute.worker import main as worker_mod

    tree = ast.parse(inspect.getsource(worker_mod.Worker.__init__).lstrip())
    bound = {t.attr for node in ast.walk(tree) if isinstance(node, ast.Assign) for target in node.targets
             for t in (target.elts if isinstance(target, ast.Tuple) else [target])
             if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}
    state = {"kept", "prepared", "calls_in_window", "children_seen"}
    assert bound - state <= set(worker_mod.COMPONENTS), sorted(bound - state - set(worker_mod.COMPONENTS))


def test_an_audit_hook_of_the_candidates_is_refused(tmp_path):
    """An audit hook of its own would be called for every audited event, on every thread, the worker's included:
    refused and logged (CPython then drops the new hook without an error). A garbage-collector callback or a
    replaced builtin runs candidate code on the worker's thread only when the worker calls it, which the
    trusted-thread guard ends (test_candidate_code_called_on_the_trusted_thread_ends_the_worker); they are not
    reported as patched."""
    out = _run(tmp_path, """
        import builtins, gc, os, sys
        hits = []
        try:
            sys.addaudithook(lambda event, args: hits.append(event))
            hits.append("added")
        except RuntimeError:
            hits.append("refused")
        sys.audit("kernelgate.test")
        gc.callbacks.append(lambda phase, info: None)
        builtins.len = lambda obj, _len=len: _len(obj)
        os.getppid = lambda _f=os.getppid: _f()
        RESULT = hits
    """)
    assert "kernelgate.test" not in out and "LOG ['sys.addaudithook']" in out, out
    assert "PATCHED []" in out, out


def test_candidate_code_called_on_the_trusted_thread_ends_the_worker(tmp_path):
    """The trusted thread's guard (trusted_thread.arm): candidate code may run on its own thread, never on the main one.
    Exploit it stops: a harness method (or builtin) replaced for a moment ran the candidate's code on the worker's
    main thread at hand-off time (exploits/gelu__harness_method_lazy.py, silu__harness_builtin_lazy.py)."""
    cand = tmp_path / "cand.py"
    cand.write_text("def helper(x):\n    return x + 1\n")
    driver = textwrap.dedent(f"""
        import importlib.util, sys, threading
        from harness.execute.worker.rules import audit
        from harness.execute.worker.rules import trusted_thread
        log = audit.install(({str(tmp_path)!r},))
        print("ARMED", trusted_thread.arm(log), hasattr(sys, "monitoring"), flush=True)
        spec = importlib.util.spec_from_file_location("cand", {str(cand)!r})
        m = importlib.util.module_from_spec(spec)
        t = threading.Thread(target=spec.loader.exec_module, args=(m,)); t.start(); t.join()
        out = []
        t = threading.Thread(target=lambda: out.append(m.helper(1))); t.start(); t.join()
        print("THREAD", out, flush=True)
        sorted([3, 1, 2], key=lambda v: -v)  # the driver's own code on this thread is not the candidate's
        import weakref
        class Box:
            pass
        box = Box()
        weakref.finalize(box, sys.setprofile, None)  # a finalizer run on this thread tries to unset the guard
        del box
        print("LOG", log.take(), flush=True)
        m.helper(2)
        print("NOT CAUGHT", flush=True)
    """)
    script = tmp_path.parent / f"{tmp_path.name}_guard.py"
    script.write_text(driver)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    from harness.execute.worker.rules.trusted_thread import EXIT_TRUSTED_THREAD

    assert proc.returncode == EXIT_TRUSTED_THREAD, (proc.returncode, proc.stdout, proc.stderr[-2000:])
    assert "THREAD [2]" in proc.stdout and "NOT CAUGHT" not in proc.stdout, proc.stdout
    assert "ARMED" in proc.stdout and proc.stdout.split("ARMED", 1)[1].split("\n")[0].endswith("False")
    assert "trusted thread: helper" in proc.stderr, proc.stderr
    assert "LOG ('sys.setprofile: on the trusted thread',)" in proc.stdout, proc.stdout
