"""Size constants of a problem file: ``--set`` parsing, source-level overrides, effective values.

A problem's sizes are its module-level constants (``ROWS = 4096``,
KernelBench's ``batch_size = 16``, ``kernel_size = (3, 5)``). Overriding one
must behave as if the file had been written with the new value, so constants
computed from it follow::

    N = 8
    M = 2 * N        # --set N=16  ->  M == 32

That is why overrides are applied to the parsed module *before* it runs: an
assignment ``NAME = <value>`` is inserted right after the last top-level
statement that binds ``NAME`` (plain, chained, annotated, tuple or augmented
assignment, an import, also inside top-level ``if``/``try``/``with``), and the
module is compiled from that tree. Nothing else in the file changes and line
numbers stay those of the file, so tracebacks point at the real lines.

``--set`` comes in two forms: ``NAME=VALUE`` applies to every problem that
has the constant (a folder of KernelBench files rarely shares one), and
``PROBLEM:NAME=VALUE`` to one problem only (its id or file stem).
"""

from __future__ import annotations

import ast
import difflib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

SizeValue = int | float | str | bool | tuple
_NUMBER = (int, float)


@dataclass(frozen=True, slots=True)
class SizeOverrides:
    """Parsed ``--set`` options: ``common`` for every problem, ``scoped`` per problem id or file stem."""

    common: dict[str, Any] = field(default_factory=dict)
    scoped: dict[str, dict[str, Any]] = field(default_factory=dict)
    """``{problem id or file stem: {NAME: value}}``; a scoped value wins over a common one."""

    @classmethod
    def coerce(cls, value: SizeOverrides | dict[str, Any] | None) -> SizeOverrides:
        """Accept the older plain ``{NAME: value}`` dict (all common) as well as a SizeOverrides."""
        if value is None:
            return cls()
        if isinstance(value, SizeOverrides):
            return value
        return cls(common=dict(value))

    def __bool__(self) -> bool:
        return bool(self.common or self.scoped)

    def scoped_for(self, *keys: str) -> dict[str, Any]:
        """The scoped overrides addressed to any of ``keys`` (a problem's id and its file stem)."""
        out: dict[str, Any] = {}
        for key in keys:
            out.update(self.scoped.get(key, {}))
        return out

    def to_dict(self) -> dict:
        return {"common": _jsonable(self.common), "scoped": {k: _jsonable(v) for k, v in self.scoped.items()}}


def _jsonable(d: dict[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


def parse_value(text: str) -> SizeValue:
    """``--set`` value: a Python literal (int, float, tuple, bool), else the text itself."""
    text = text.strip()
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
    if isinstance(value, list):
        value = tuple(value)
    if isinstance(value, (int, float, str, bool)) or (isinstance(value, tuple) and all(isinstance(v, _NUMBER) for v in value)):
        return value
    return text


def _split_scope(lhs: str, shown: str) -> tuple[str, str]:
    """(scope, NAME) of ``NAME`` or ``PROBLEM:NAME``; ValueError naming ``shown`` (the option as written)."""
    scope, _, key = lhs.rpartition(":")
    key, scope = key.strip(), scope.strip()
    if not key.isidentifier():
        raise ValueError(f"--set {shown!r}: '{key}' is not a Python identifier (a module constant's name)")
    if ":" in lhs and not scope:
        raise ValueError(f"--set {shown!r}: nothing before ':'; write PROBLEM:NAME=VALUE with a problem id")
    return scope, key


def overrides_from_mapping(values: dict[str, Any] | None) -> SizeOverrides:
    """``{"NAME": value, "PROBLEM:NAME": value}`` (the Python API's ``overrides``) as :class:`SizeOverrides`.

    Keys follow ``--set``: ``NAME`` for every problem that has the constant,
    ``PROBLEM:NAME`` for one problem. Raises ValueError naming the key.
    """
    common: dict[str, Any] = {}
    scoped: dict[str, dict[str, Any]] = {}
    for lhs, value in (values or {}).items():
        if not isinstance(lhs, str):
            raise ValueError(f"overrides: key {lhs!r} is not a string; use 'NAME' or 'PROBLEM:NAME'")
        scope, key = _split_scope(lhs, f"{lhs}={value!r}")
        value = tuple(value) if isinstance(value, list) else value
        if scope:
            scoped.setdefault(scope, {})[key] = value
        else:
            common[key] = value
    return SizeOverrides(common, scoped)


def parse_set_items(items: list[str] | None) -> SizeOverrides:
    """Parse ``--set NAME=VALUE`` and ``--set PROBLEM:NAME=VALUE`` options.

    Raises ValueError naming the option and the expected form. A later option
    for the same name and scope wins (like repeated shell assignments).
    """
    common: dict[str, Any] = {}
    scoped: dict[str, dict[str, Any]] = {}
    for item in items or []:
        if "=" not in item:
            raise ValueError(f"--set {item!r}: expected NAME=VALUE or PROBLEM:NAME=VALUE, e.g. --set N=256 "
                             "or --set 19_ReLU:dim=4096")
        lhs, value = item.split("=", 1)
        scope, key = _split_scope(lhs, item)
        if not value.strip():
            raise ValueError(f"--set {item!r}: no value after '='")
        parsed = parse_value(value)
        if scope:
            scoped.setdefault(scope, {})[key] = parsed
        else:
            common[key] = parsed
    return SizeOverrides(common, scoped)


def override_mistakes(overrides: SizeOverrides, registry: Any) -> list[str]:
    """Every ``--set`` that names something no loaded problem has, as an error message with a did-you-mean.

    ``registry``: a :class:`harness.problems.registry.Registry` loaded with
    ``overrides``. A mistaken size must stop the run before anything executes:
    a problem would otherwise run at its own (often full KernelBench) size
    under a name that says it was resized. Three mistakes:

    * a scoped ``PROBLEM:NAME`` whose PROBLEM is neither a loaded id nor a file stem;
    * a scoped ``PROBLEM:NAME`` whose problem has no constant NAME (that problem failed to load);
    * a common ``NAME`` that no loaded problem has (a common name missing from *some*
      problems is normal over a folder of KernelBench files: those are only warned about).
    """
    out: list[str] = []
    for err in getattr(registry, "errors", ()):
        field_name, path = str(getattr(err, "field", "")), str(getattr(err, "path", ""))
        if path == "--set":  # the registry's unknown scope: field is 'SCOPE:NAME'
            scope, _, name = field_name.partition(":")
            value = overrides.scoped.get(scope, {}).get(name)
            out.append(f"--set {field_name}={value!r}: {err.why}; a scoped size names one problem by its id or file "
                       "stem ('kernelgate problems list' shows the ids)")
        elif field_name.startswith("--set"):
            out.append(f"{field_name}: {path}: {err.why}")
    problems = list(getattr(registry, "problems", {}).values())
    if problems:
        sizes = sorted({k for p in problems for w in p.workloads for k in w.params})
        for name, value in overrides.common.items():
            if all(name in p.skipped_overrides for p in problems):
                close = difflib.get_close_matches(name, sizes, n=3, cutoff=0.5)
                hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
                out.append(f"--set {name}={value!r}: none of the {len(problems)} loaded problem(s) has a constant "
                           f"'{name}'{hint} (their sizes: {', '.join(sizes[:12]) or 'none'}"
                           f"{', ...' if len(sizes) > 12 else ''})")
    return out


# --------------------------------------------------------------------------- where names are bound

def _bound_names(target: ast.expr) -> Iterator[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            yield from _bound_names(elt)
    elif isinstance(target, ast.Starred):
        yield from _bound_names(target.value)


def _statement_binds(stmt: ast.stmt) -> set[str]:
    """Names a top-level statement (re)binds in the module namespace (nested blocks excluded)."""
    if isinstance(stmt, ast.Assign):
        return {n for t in stmt.targets for n in _bound_names(t)}
    if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) and (not isinstance(stmt, ast.AnnAssign) or stmt.value is not None):
        return set(_bound_names(stmt.target))
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    return set()


def _blocks(body: list[ast.stmt]) -> Iterator[list[ast.stmt]]:
    """The statement lists that run at module level: the body and those of top-level if/try/with."""
    yield body
    for stmt in body:
        if isinstance(stmt, ast.If):
            yield from _blocks(stmt.body)
            yield from _blocks(stmt.orelse)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            yield from _blocks(stmt.body)
        elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            for part in (stmt.body, stmt.orelse, stmt.finalbody, *[h.body for h in stmt.handlers]):
                yield from _blocks(part)


def assigned_names(tree: ast.Module) -> list[str]:
    """Names bound by assignment statements at module level, in source order (first binding)."""
    seen: dict[str, None] = {}
    for block in _blocks(tree.body):
        for stmt in block:
            if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for name in sorted(_statement_binds(stmt)):
                    seen.setdefault(name, None)
    return list(seen)


def _literal(value: Any) -> ast.expr:
    if isinstance(value, (tuple, list)):
        return ast.Tuple(elts=[_literal(v) for v in value], ctx=ast.Load())
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"value {value!r} is not a finite number")
    return ast.Constant(value=value)


def apply_overrides(tree: ast.Module, overrides: dict[str, Any]) -> tuple[ast.Module, set[str]]:
    """Insert ``NAME = value`` after the last statement binding each overridden name, in every module-level block.

    Per block (the module body, each branch of a top-level ``if``/``try``,
    each ``with`` body) so that whichever branch runs ends with the override;
    within a block only after the last binding, so a value used before a name
    is rebound stays the file's. Returns the changed tree (modified in place)
    and the names no module-level statement binds (the caller decides: set the
    attribute after execution, or refuse). Inserted statements carry the line
    number of the statement they follow, so the file's own line numbers hold.
    """
    bound: set[str] = set()
    for block in list(_blocks(tree.body)):
        last: dict[str, ast.stmt] = {}
        for stmt in block:
            for name in _statement_binds(stmt) & set(overrides):
                last[name] = stmt
        for name, stmt in last.items():
            new = ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=_literal(overrides[name]))
            for node in ast.walk(new):
                ast.copy_location(node, stmt)
            block.insert(block.index(stmt) + 1, new)
            bound.add(name)
    return tree, set(overrides) - bound


def is_size_value(value: Any) -> bool:
    """A number (not bool) or a tuple/list of numbers: what counts as a size constant."""
    if isinstance(value, bool):
        return False
    if isinstance(value, _NUMBER):
        return True
    return isinstance(value, (tuple, list)) and bool(value) and all(
        isinstance(v, _NUMBER) and not isinstance(v, bool) for v in value)


def effective_sizes(namespace: dict[str, Any], tree: ast.Module) -> dict[str, Any]:
    """Final values of the module's size constants: names assigned at module level whose value is a size.

    Names starting with ``_`` and the ``KERNELGATE`` dict are left out; tuples
    stay tuples (a JSON round trip turns them into lists, which
    :func:`apply_overrides` writes back as tuples).
    """
    out: dict[str, Any] = {}
    for name in assigned_names(tree):
        if name.startswith("_") or name == "KERNELGATE" or name not in namespace:
            continue
        value = namespace[name]
        if is_size_value(value):
            out[name] = tuple(value) if isinstance(value, list) else value
    return out
