"""The house rules of harness/, checked on its source (no import of the package under test).

* no import cycle between harness modules (module-level imports; ``TYPE_CHECKING`` blocks and imports
  inside functions are the sanctioned way to break one);
* the engine (harness/execute) never imports the planner (harness.pipeline) or a command;
* a module over 500 lines says why in its docstring (a ``Size (...)`` paragraph);
* every parse goes through ``harness.astparse.parse`` (one at a time per process: CPython 3.11 can corrupt
  the AST constructor's state when two threads parse at once).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "harness"
MAX_LINES = 500


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = p.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def _top_level_imports(name: str, path: Path, mods: dict[str, Path], *, everywhere: bool = False) -> set[str]:
    """The harness modules ``name`` imports (at module level unless ``everywhere``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes: list[ast.stmt] = []
    if everywhere:
        nodes = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]  # type: ignore[misc]
    else:
        for n in tree.body:
            if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
                continue
            nodes.extend(n.body if isinstance(n, (ast.If, ast.Try)) else [n])
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for n in nodes:
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


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    state: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(u: str) -> None:
        state[u] = 1
        stack.append(u)
        for v in sorted(graph[u]):
            if state.get(v) == 1:
                found.append(stack[stack.index(v):] + [v])
            elif v not in state:
                visit(v)
        stack.pop()
        state[u] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_harness_modules():
    mods = _modules()
    graph = {m: _top_level_imports(m, p, mods) for m, p in mods.items()}
    assert sum(len(v) for v in graph.values()) > 100  # the graph was really read
    assert not _cycles(graph), _cycles(graph)


def test_the_engine_never_imports_the_planner_or_a_command():
    mods = _modules()
    bad = {}
    for m, p in mods.items():
        if m.startswith("harness.execute"):
            hits = {i for i in _top_level_imports(m, p, mods, everywhere=True)
                    if i == "harness.pipeline" or i.startswith(("harness.commands", "harness.cli"))}
            if hits:
                bad[m] = sorted(hits)
    assert "harness.execute.parent.session" in mods and not bad, bad


def test_long_modules_say_why():
    unexplained = []
    for p in sorted(PKG.rglob("*.py")):
        n = len(p.read_text(encoding="utf-8").splitlines())
        doc = ast.get_docstring(ast.parse(p.read_text(encoding="utf-8"))) or ""
        if n > MAX_LINES and "Size (" not in doc:
            unexplained.append(f"{p.relative_to(ROOT)} ({n} lines)")
    assert not unexplained, ("modules over 500 lines without a 'Size (...)' paragraph in their docstring: "
                             + ", ".join(unexplained))


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
