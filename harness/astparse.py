"""``ast.parse`` and ``compile`` of a tree for a process with threads: one at a time.

CPython 3.11 keeps the AST constructor's recursion depth in state shared by an interpreter's threads. A
thread switch while one thread builds its tree, and another thread's parse in between, corrupt that depth, and
``ast.parse`` raises ``SystemError: AST constructor recursion depth mismatch`` on valid source
(python/cpython gh-106905; CPython's later fix keeps the depth per parse, and its notes say 3.12 made the race
rare by changing when the garbage collector can run). The harness parses candidates and problems from several threads of one process:
the service runs each batch of its engine in a thread, and every engine parses each candidate's source
(its DSL, its static scans). Bug it stops: in ``tests/serve/test_serve_restart.py``, where two batches
evaluate at once, an honest candidate got a HARNESS_ERROR record ("the engine failed on this batch: AST
constructor recursion depth mismatch (before=33, after=27)"). Run two at a time on a 2-core machine, that test
failed so in 1 of 24 runs without this lock and in none of 40 with it; CI had failed on it once.

:func:`compile_tree` (a tree back to code, through the same generated module) takes the same lock as a
precaution; no failure of it was seen.
Every parse in ``harness`` goes through :func:`parse` (``tests/test_structure.py`` keeps it so). A parse takes
milliseconds; the lock costs nothing measurable beside a candidate's evaluation.
"""

from __future__ import annotations

import ast
import threading
from types import CodeType

_LOCK = threading.Lock()


def parse(source: str | bytes, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """:func:`ast.parse`, one thread at a time in this process."""
    with _LOCK:
        return ast.parse(source, filename=filename, mode=mode)


def compile_tree(tree: ast.AST, filename: str, mode: str) -> CodeType:
    """:func:`compile` of an AST, under the same lock as :func:`parse`."""
    with _LOCK:
        return compile(tree, filename, mode)
