"""The house rules of harness/, checked on its source (no import of the package under test).

* no import circle between harness modules, with every import that runs followed: at module level and inside
  functions (a deferred import only moves a circle to run time); ``TYPE_CHECKING`` blocks are not followed,
  since they never run;
* scoring (harness/score) is pure: it never imports the layers above it (the engine and its wire protocol,
  results reports, the service, the commands);
* the engine (harness/execute) never imports the planner (harness.pipeline) or a command;
* no module over 600 lines, and one over 500 says why in its docstring (a ``Size (...)`` paragraph);
* every module outside the engine is used (imported, a command, started with ``python -m``, or an entry point);
* every parse goes through ``harness.astparse.parse`` (one at a time per process: CPython 3.11 can corrupt
  the AST constructor's state when two threads parse at once).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "harness"
EXPLAIN_LINES = 500
MAX_LINES = 600



def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = p.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def _import_nodes(tree: ast.Module, *, deferred: bool) -> list[ast.Import | ast.ImportFrom]:
    """The import statements of a module that can run: those at module level (in class bodies and ``if``,
    ``try`` and ``with`` blocks too) and, when ``deferred``, those inside functions and methods. Never those
    under ``if TYPE_CHECKING:`` (that block never runs; its ``else`` does)."""
    out: list[ast.Import | ast.ImportFrom] = []

    def visit(stmts: list) -> None:
        for n in stmts:
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                out.append(n)
            elif isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
                visit(n.orelse)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if deferred:
                    visit(n.body)
            else:
                for name in ("body", "orelse", "finalbody", "handlers", "cases"):
                    for child in getattr(n, name, None) or []:
                        visit([child] if isinstance(child, ast.stmt) else child.body)

    visit(tree.body)
    return out


def _imports(name: str, path: Path, mods: dict[str, Path], *, deferred: bool = True) -> set[str]:
    """The harness modules ``name`` imports (inside functions too unless ``deferred`` is False)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for n in _import_nodes(tree, deferred=deferred):
        if isinstance(n, ast.Import):
            out.update(a.name for a in n.names if a.name in mods)
        elif isinstance(n, ast.ImportFrom):
            base = n.module or ""
            if n.level:
                here = name.split(".") if is_pkg else name.split(".")[:-1]
                anchor = here[: len(here) - (n.level - 1)]
                base = ".".join(anchor + ([n.module] if n.module else []))
            subs = {f"{base}.{a.name}" for a in n.names if f"{base}.{a.name}" in mods}
            out.update(subs)
            if base in mods and len(subs) < len(n.names):
                out.add(base)
    out.discard(name)
    return out


def _graph(*, deferred: bool = True) -> dict[str, set[str]]:
    mods = _modules()
    return {m: _imports(m, p, mods, deferred=deferred) for m, p in mods.items()}


def _circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan): each holds at least one circle, and
    every module on a circle is in one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(u: str) -> None:
        index[u] = low[u] = len(index)
        stack.append(u)
        on_stack.add(u)
        for v in sorted(graph[u]):
            if v not in index:
                visit(v)
                low[u] = min(low[u], low[v])
            elif v in on_stack:
                low[u] = min(low[u], index[v])
        if low[u] == index[u]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == u:
                    break
            if len(comp) > 1:
                found.append(frozenset(comp))

    for m in sorted(graph):
        if m not in index:
            visit(m)
    return found


def test_the_circle_finder_follows_deferred_imports_and_skips_type_checking(tmp_path):
    """The finder sees a circle closed by an import inside a function, and none closed only by a
    ``TYPE_CHECKING`` import; a circle in a module-level-only graph is still a circle."""
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [frozenset({"a", "b", "c"})]
    assert _circles({"a": {"b"}, "b": set()}) == []
    pkg = tmp_path / "harness"
    pkg.mkdir()
    (pkg / "a.py").write_text("from harness import b\n")
    (pkg / "b.py").write_text("def f():\n    from harness.a import x\n    return x\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from harness import a\n"
                              "else:\n    import harness.d\n")
    (pkg / "d.py").write_text("class K:\n    import harness.c\n")
    mods = {f"harness.{n}": pkg / f"{n}.py" for n in "abcd"}
    graph = {m: _imports(m, p, mods) for m, p in mods.items()}
    assert graph == {"harness.a": {"harness.b"}, "harness.b": {"harness.a"}, "harness.c": {"harness.d"},
                     "harness.d": {"harness.c"}}
    assert sorted(map(sorted, _circles(graph))) == [["harness.a", "harness.b"], ["harness.c", "harness.d"]]
    assert _imports("harness.b", mods["harness.b"], mods, deferred=False) == set()


def test_no_import_circle_between_harness_modules():
    graph = _graph()
    assert sum(len(v) for v in graph.values()) > 100  # the graph was really read
    circles = [sorted(c) for c in _circles(graph)]
    assert not circles, f"import circles (deferred imports followed): {circles}"


def test_scoring_never_imports_the_layers_above_it():
    """Judging takes facts and scoring reads records: harness/score imports neither the engine (its wire
    messages included) nor the report layer, the service, the planner or a command."""
    above = ("harness.execute", "harness.report", "harness.serve", "harness.commands", "harness.cli",
             "harness.pipeline", "harness.api")
    bad = {m: sorted(i for i in deps if i.startswith(above)) for m, deps in _graph().items()
           if m.startswith("harness.score")}
    bad = {m: v for m, v in bad.items() if v}
    assert "harness.score" in _modules() and not bad, bad


def test_the_engine_never_imports_the_planner_or_a_command():
    bad = {}
    for m, deps in _graph().items():
        if m.startswith("harness.execute"):
            hits = {i for i in deps if i == "harness.pipeline" or i.startswith(("harness.commands", "harness.cli"))}
            if hits:
                bad[m] = sorted(hits)
    assert "harness.execute.parent.session" in _modules() and not bad, bad


ENTRY_POINTS = ("harness.__main__", "harness.serve.client")
"""Modules nothing in harness/ imports, by design: ``python -m harness``, and the service's client library
(imported by users' training loops and ``examples/rl_client.py``)."""


def test_every_module_outside_the_engine_is_used():
    """Bug it stops: ``harness/problems/lint.py`` was imported by no command and no module (dead product code).
    A module must be imported by another, be a command (``harness.cli.COMMANDS``), be started with
    ``python -m`` by the harness, or be one of :data:`ENTRY_POINTS`. Packages' ``__init__`` are exempt."""
    from harness import cli

    mods = _modules()
    graph = _graph()
    imported = {d for deps in graph.values() for d in deps}
    source = "\n".join(p.read_text(encoding="utf-8") for p in mods.values())
    started = set(re.findall(r'"-m", "(harness[\w.]*)"', source))
    commands = {f"harness.commands.{c}" for c in cli.COMMANDS}
    unused = sorted(m for m, p in mods.items()
                    if p.name != "__init__.py" and not m.startswith("harness.execute")
                    and m not in imported | started | commands | set(ENTRY_POINTS))
    assert "harness.serve.problem_probe" in started and not unused, f"modules nothing uses: {unused}"


def _lines(p: Path) -> int:
    return len(p.read_text(encoding="utf-8").splitlines())


def test_long_modules_say_why():
    unexplained = []
    for p in sorted(PKG.rglob("*.py")):
        doc = ast.get_docstring(ast.parse(p.read_text(encoding="utf-8"))) or ""
        if _lines(p) > EXPLAIN_LINES and "Size (" not in doc:
            unexplained.append(f"{p.relative_to(ROOT)} ({_lines(p)} lines)")
    assert not unexplained, (f"modules over {EXPLAIN_LINES} lines without a 'Size (...)' paragraph in their "
                             "docstring: " + ", ".join(unexplained))


def test_no_module_is_over_600_lines():
    long = {str(p.relative_to(ROOT)): _lines(p) for p in sorted(PKG.rglob("*.py")) if _lines(p) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split them along their table of contents): {long}"


def test_every_slow_module_exists():
    """A renamed module would silently drop out of the ``slow`` marker (and into the fast loop)."""
    import importlib.util

    here = Path(__file__).resolve().parent
    spec = importlib.util.spec_from_file_location("kg_tests_root_conftest", here / "conftest.py")
    root_conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(root_conftest)
    SLOW_MODULES = root_conftest.SLOW_MODULES
    assert SLOW_MODULES and all((here / m).is_file() for m in SLOW_MODULES), \
        sorted(m for m in SLOW_MODULES if not (here / m).is_file())


def _direct_parse_calls(tree: ast.AST) -> list[int]:
    """Lines of ``ast.parse(...)`` calls in ``tree``."""
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "parse" and isinstance(n.func.value, ast.Name) and n.func.value.id == "ast"]


def test_every_parse_goes_through_astparse():
    """Bug it stops: harness/astparse.py (a HARNESS_ERROR on an honest candidate when two service batches parsed
    at once). The checker finds what it names:"""
    assert _direct_parse_calls(ast.parse("import ast\nast.parse('x')\nastparse.parse('y')\n")) == [2]
    direct = {str(p.relative_to(ROOT)): lines for p in PKG.rglob("*.py") if p.name != "astparse.py"
              if (lines := _direct_parse_calls(ast.parse(p.read_text(encoding="utf-8"))))}
    assert not direct, f"call harness.astparse.parse instead of ast.parse: {direct}"
