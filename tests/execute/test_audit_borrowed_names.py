"""Code that wears a name not its own: the audit hooks' rules for made-up and borrowed file names.

The hooks tell candidate code from library code by file name. Each test is an exploit that gave candidate code
a name the hooks trusted, run in a fresh interpreter
with the hooks installed for the candidate's folder, as a worker installs them.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, candidate: str, after: str = "", before: str = "") -> tuple[str, list[str]]:
    """Install the hooks for ``tmp_path``, import ``candidate`` from there, run ``after`` (trusted driver code,
    ``m`` is the module); (the candidate's RESULT, or what ``after`` printed as RESULT; the audit log)."""
    cand = tmp_path / "cand.py"
    cand.write_text(textwrap.dedent(candidate))
    driver = textwrap.dedent(f"""
        import importlib.util, sys
        from harness.execute.worker.rules import audit
        log = audit.install(({str(tmp_path)!r},), exempt=({str(tmp_path / "triton-cache")!r},))
    """) + textwrap.dedent(before) + textwrap.dedent(f"""
        spec = importlib.util.spec_from_file_location("cand", {str(cand)!r})
        m = sys.modules["cand"] = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(m)
            print("RESULT", repr(getattr(m, "RESULT", None)))
        except Exception as exc:
            print("RESULT", repr("raised " + type(exc).__name__))
    """) + textwrap.dedent(after) + textwrap.dedent("""
        for item in log.take():
            print("LOG", item)
    """)
    # the driver runs from a file of its own, outside the candidate's folder, as the worker's loop does (code
    # from "-c" has a made-up file name: with nothing but the standard library under it, it is the candidate's)
    script = tmp_path.parent / f"{tmp_path.name}_driver.py"
    script.write_text(driver)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    result = [line[7:] for line in lines if line.startswith("RESULT ")][-1]
    return result, [line[4:] for line in lines if line.startswith("LOG ")]


def test_code_run_by_typing_from_a_string_annotation_is_the_candidates(tmp_path):
    """The route: typing.get_type_hints evaluates a string annotation as "<string>" code, which
    ran exec, gc.get_objects, sys._current_frames and subprocess as if it were library code."""
    result, log = _run(tmp_path, '''
        import typing
        tried = {}
        def attempt(what, src):
            def probe(x: f"(__import__('builtins').exec({src!r}, globals()), int)[1]"):
                pass
            try:
                typing.get_type_hints(probe)
                tried[what] = "allowed"
            except Exception:
                tried[what] = "refused"
        attempt("gc", "import gc; gc.get_objects()")
        attempt("frames", "import sys; sys._current_frames()")
        attempt("subprocess", "import subprocess; subprocess.run(['true'])")
        RESULT = tried
    ''')
    assert result == "{'gc': 'refused', 'frames': 'refused', 'subprocess': 'refused'}", (result, log)
    assert any(item.startswith(("compile", "exec")) for item in log), log


def test_a_thread_running_made_up_code_is_the_candidates(tmp_path):
    """Made-up code with only the standard library beneath it (a thread's target) has no library to belong
    to: it is the candidate's."""
    result, log = _run(tmp_path, '''
        import importlib.abc, runpy, threading
        box = {}
        code = importlib.abc.InspectLoader.source_to_code(
            "import sys\\ntry:\\n    sys._current_frames(); box['got'] = 'allowed'\\n"
            "except Exception:\\n    box['got'] = 'refused'\\n")
        t = threading.Thread(target=runpy._run_code, args=(code, {"box": box}))
        t.start(); t.join()
        RESULT = box.get("got")
    ''')
    assert result == "'refused'", (result, log)


def test_code_compiled_under_a_library_files_name_does_not_run_as_that_file(tmp_path):
    """InspectLoader.source_to_code and py_compile's dfile compile any text under any name: code named after a
    standard-library file would be trusted as that file, if it ran (exec) or loaded (marshal)."""
    result, log = _run(tmp_path, '''
        import importlib.abc, importlib.machinery, importlib.util, os, py_compile, runpy
        tried = {}
        code = importlib.abc.InspectLoader.source_to_code("import gc\\nn = len(gc.get_objects())\\n", os.__file__)
        try:
            runpy._run_code(code, {})
            tried["source_to_code"] = "allowed"
        except Exception:
            tried["source_to_code"] = "refused"
        src = os.path.join(os.path.dirname(__file__), "evil_src.py")
        with open(src, "w") as fh:
            fh.write("import gc\\nn = len(gc.get_objects())\\n")
        py_compile.compile(src, cfile=src + "c", dfile=os.__file__, doraise=True)
        loader = importlib.machinery.SourcelessFileLoader("evil", src + "c")
        module = importlib.util.module_from_spec(importlib.util.spec_from_loader("evil", loader))
        try:
            loader.exec_module(module)
            tried["py_compile"] = "allowed"
        except Exception:
            tried["py_compile"] = "refused"
        RESULT = tried
    ''')
    assert result == "{'source_to_code': 'refused', 'py_compile': 'refused'}", (result, log)


def test_a_traceback_printed_by_cpython_is_not_a_cheat(tmp_path):
    """CPython's own traceback printer compiles pieces of a library file's lines under that file's name: an
    honest candidate whose __del__ raised inside a library call was REWARD_HACK under a rule on compile."""
    result, log = _run(tmp_path, '''
        import collections, json
        class Holder:
            def __del__(self):
                json.loads("not json")
        d = collections.UserDict()
        d["k"] = Holder()
        del d["k"]
        RESULT = "done"
    ''')
    assert result == "'done'" and log == [], (result, log)


def test_a_renamed_code_object_runs_only_through_its_files_loader(tmp_path):
    """_imp._fix_co_filename renames a code object without an audit event; running it through runpy, or
    through a real loader whose get_code the candidate shadowed, is refused."""
    result, log = _run(tmp_path, '''
        import _imp, importlib.abc, importlib.machinery, importlib.util, os, runpy
        tried = {}
        def forged():
            code = importlib.abc.InspectLoader.source_to_code("import gc\\nobjs = len(gc.get_objects())\\n")
            _imp._fix_co_filename(code, os.__file__)
            return code
        try:
            runpy._run_code(forged(), {})
            tried["runpy"] = "allowed"
        except Exception:
            tried["runpy"] = "refused"
        loader = importlib.machinery.SourceFileLoader("fake_os", os.__file__)
        code = forged()
        loader.get_code = lambda name: code
        module = importlib.util.module_from_spec(importlib.util.spec_from_loader("fake_os", loader))
        try:
            loader.exec_module(module)
            tried["shadowed_loader"] = "allowed"
        except Exception:
            tried["shadowed_loader"] = "refused"
        RESULT = tried
    ''')
    assert result == "{'runpy': 'refused', 'shadowed_loader': 'refused'}", (result, log)
    assert any("run by other than importlib's loader" in item for item in log), log


def test_bytecode_from_the_candidates_folder_is_not_loaded(tmp_path):
    """A .pyc keeps the file name it was built with: one written into the candidate's folder (or a compiler
    cache inside it) and imported without its source would run as whatever file it names."""
    result, log = _run(tmp_path, '''
        import _imp, importlib.abc, importlib.machinery, importlib.util, marshal, os
        code = importlib.abc.InspectLoader.source_to_code("import gc\\nobjs = len(gc.get_objects())\\n")
        _imp._fix_co_filename(code, os.__file__)
        os.makedirs(os.path.join(os.path.dirname(__file__), "triton-cache"), exist_ok=True)
        pyc = os.path.join(os.path.dirname(__file__), "triton-cache", "helper.pyc")
        with open(pyc, "wb") as fh:
            fh.write(importlib.util.MAGIC_NUMBER + b"\\0" * 12 + marshal.dumps(code))
        loader = importlib.machinery.SourcelessFileLoader("helper", pyc)
        module = importlib.util.module_from_spec(importlib.util.spec_from_loader("helper", loader))
        try:
            loader.exec_module(module)
            RESULT = "allowed"
        except Exception:
            RESULT = "refused"
    ''')
    assert result == "'refused'", (result, log)
    assert any(item.startswith("marshal.loads") for item in log), log


def test_honest_code_still_imports_and_uses_generated_code(tmp_path):
    """What honest candidates do that makes or runs code on their behalf: importing a module nothing imported
    yet, dataclasses, namedtuple, type hints evaluated from strings."""
    result, log = _run(tmp_path, '''
        from __future__ import annotations
        import collections, dataclasses, typing
        import fractions, decimal, statistics
        @dataclasses.dataclass(frozen=True)
        class Cfg:
            block: int = 128
        Pair = collections.namedtuple("Pair", "a b")
        def f(x: "int") -> "Cfg":
            return Cfg(x)
        RESULT = (Cfg(64).block, Pair(1, 2).b, typing.get_type_hints(f)["x"].__name__,
                  str(fractions.Fraction(1, 3)))
    ''')
    assert result == "(64, 2, 'int', '1/3')", (result, log)
    assert log == [], log


def test_a_live_function_renamed_in_place_is_still_the_candidates(tmp_path):
    """_imp._fix_co_filename renames a live function's code in place, unaudited: the function's frames then
    wore a library file's name (the code is reachable through dis.Bytecode).
    Candidate code is also known by the identity of its code objects. The rename is done by the trusted driver
    here, so that this rule alone is tested (reading ``__code__`` through ``dis`` is refused by another)."""
    result, log = _run(tmp_path, '''
        import gc
        def payload():
            return len(gc.get_objects())
        def renamed_then_called():
            try:
                payload()
                return "allowed"
            except Exception:
                return "refused"
    ''', after="""
        import _imp
        _imp._fix_co_filename(m.payload.__code__, "/usr/lib/python3/dist-packages/torch/__init__.py")
        print("RESULT", repr(m.renamed_then_called()))
    """)
    assert result == "'refused'", (result, log)
    assert any(item.startswith("gc.get_objects") for item in log), log


def test_a_standard_library_function_handed_the_operation_is_not_the_caller(tmp_path):
    """Exploits: functools.singledispatch, copy.copy with __reduce_ex__, a
    unittest.mock side effect and a ThreadPoolExecutor called gc.get_objects, sys._current_frames or subprocess for the
    candidate; the frame that raised the event was the standard library's, which the hooks took for the caller."""
    result, log = _run(tmp_path, '''
        import concurrent.futures, copy, functools, gc, subprocess, sys
        tried = {}
        def attempt(what, fn):
            try:
                fn()
                tried[what] = "allowed"
            except Exception:
                tried[what] = "refused"
        attempt("singledispatch", lambda: functools.singledispatch(gc.get_objects)(None))
        class R:
            def __reduce_ex__(self, proto):
                return (sys._current_frames, ())
        attempt("copy_reduce", lambda: copy.copy(R()))
        with concurrent.futures.ThreadPoolExecutor(1) as ex:
            attempt("executor", lambda: ex.submit(subprocess.check_output, ["true"]).result())
        import unittest.mock
        attempt("mock", lambda: unittest.mock.Mock(side_effect=gc.get_objects)())
        RESULT = tried
    ''')
    assert result == ("{'singledispatch': 'refused', 'copy_reduce': 'refused', 'executor': 'refused', "
                      "'mock': 'refused'}"), (result, log)
    assert any(item.startswith("gc.get_objects") for item in log), log


def test_a_library_function_handed_the_operation_is_not_the_caller(tmp_path):
    """Trampolines: a library function (torch's pytree, numpy) that
    calls the callable it is handed raised the event from its own frame, which the hooks took for the caller.
    A library frame now owns a screened event only when its code names the operation."""
    result, log = _run(tmp_path, '''
        import concurrent.futures, gc, operator, os, sys, threading
        import numpy as np
        from torch.utils._pytree import tree_map
        tried = {}
        def attempt(what, fn):
            try:
                fn()
                tried[what] = "allowed"
            except Exception:
                tried[what] = "refused"
        attempt("tree_map_gc", lambda: tree_map(gc.get_objects, [0]))
        attempt("tree_map_system", lambda: tree_map(os.system, ["true"]))
        attempt("vectorize_gc", lambda: np.vectorize(gc.get_objects, otypes=[object])([0]))
        gen = (x for x in [1])
        attempt("tree_map_gi_frame", lambda: tree_map(operator.attrgetter("gi_frame"), [gen]))
        attempt("tree_map_code", lambda: tree_map(operator.attrgetter("__code__"), [attempt]))
        attempt("tree_map_getframe", lambda: tree_map(sys._getframe, [0]))
        def in_thread():
            t = threading.Thread(target=tree_map, args=(gc.get_referrers, [tried]))
            t.start()
            t.join()
        errors = []
        threading.excepthook = lambda args: errors.append(args.exc_type.__name__)
        in_thread()
        tried["thread_tree_map"] = "refused" if errors == ["Refused"] else f"allowed {errors}"
        with concurrent.futures.ThreadPoolExecutor(1) as ex:
            attempt("executor_tree_map", lambda: ex.submit(tree_map, gc.get_objects, [0]).result())
        RESULT = tried
    ''')
    assert result == ("{'tree_map_gc': 'refused', 'tree_map_system': 'refused', 'vectorize_gc': 'refused', "
                      "'tree_map_gi_frame': 'refused', 'tree_map_code': 'refused', 'tree_map_getframe': 'refused', "
                      "'thread_tree_map': 'refused', 'executor_tree_map': 'refused'}"), (result, log)
    assert any(item.startswith("os.system") for item in log), log
    assert any(item.startswith("gc.get_referrers") for item in log), log


def test_a_library_that_names_the_operation_still_owns_it(tmp_path):
    """The other side of the trampoline rule: library code that does the operation itself, by name, through a
    standard-library function that does it (``subprocess.run``, ``ctypes.util.find_library``), through a
    generic helper of its own, at its import, or on a thread of its own, is not the candidate's."""
    lib = tmp_path.parent / f"{tmp_path.name}_lib"
    lib.mkdir()
    (lib / "kg_fake_lib.py").write_text(textwrap.dedent('''
        import ctypes.util, gc, subprocess, threading
        AT_IMPORT = subprocess.check_output(["true"])
        def apply(fn, *args):
            return fn(*args)
        def procs():
            return subprocess.run(["true"]).returncode
        def objects():
            return len(gc.get_objects()) > 0
        def objects_through_helper():
            return apply(gc.get_objects)[:0]
        def code_name(f):
            return getattr(f, "__code__").co_name
        def find():
            return ctypes.util.find_library("c") is not None
        def on_a_thread():
            out = []
            t = threading.Thread(target=lambda: out.append(procs()))
            t.start()
            t.join()
            return out
    '''))
    result, log = _run(tmp_path, f'''
        import sys
        sys.path.insert(0, {str(lib)!r})
        import kg_fake_lib as L
        def f():
            pass
        RESULT = (L.procs(), L.objects(), L.objects_through_helper(), L.code_name(f), L.find(), L.on_a_thread())
    ''')
    assert result == "(0, True, [], 'f', True, [0])", (result, log)
    assert log == [], log
