"""The Python source of a candidate file, when the file is an LLM's Markdown reply rather than code.

Generators often save the whole reply: prose, then a ```python fence with
the code, sometimes several fences (a draft and a final answer, a CUDA block
and a Python block). Executing that text fails at line 1 with nothing useful
to say. :func:`extract_source` returns the code to execute and a note saying
what was taken from where:

* a file that parses as Python is taken as it is (even if a string in it
  holds a fence);
* otherwise its fenced blocks tagged ``python``/``py``/``python3`` or untagged
  are parsed: one that parses is taken; of several, the one defining a
  top-level ``class ModelNew``, and of several of those, the last (a reply's
  final answer comes last); text inside ``<think>...</think>`` is searched
  only when nothing outside it has a fence;
* when nothing can be extracted the error says why: where the syntax error
  is (line, column, the line's text), or which fences were found and why each
  was refused.

Never imports or runs the candidate.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from harness import astparse

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+.#-]*)[^\n`]*$")
_PYTHON_TAGS = {"", "python", "py", "python3", "py3"}
_THINK = re.compile(r"<think>.*?(</think>|\Z)", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Extraction:
    """The code to execute (``source``), what was done (``note``: empty for a plain Python file), or an error."""

    source: str
    note: str = ""
    error: str | None = None
    first_line: int = 1
    """1-based line of the file where ``source`` starts (the fence's first code line when extracted): add
    ``first_line - 1`` to a line of ``source`` to point into the file."""

    @property
    def extracted(self) -> bool:
        return bool(self.note) and self.error is None


@dataclass(frozen=True, slots=True)
class _Block:
    lang: str
    first_line: int
    """1-based line of the first code line in the file."""
    last_line: int
    code: str
    closed: bool


def _blocks(text: str) -> list[_Block]:
    lines = text.splitlines()
    out: list[_Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group("fence"), m.group("lang").lower()
        start = i + 1
        j = start
        while j < len(lines):
            close = re.match(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", lines[j])
            if close:
                break
            j += 1
        closed = j < len(lines)
        out.append(_Block(lang, start + 1, j, "\n".join(lines[start:j]) + "\n", closed))
        i = j + 1
    return out


def _defines_model_new(tree: ast.Module) -> bool:
    return any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body)


def syntax_error_text(exc: SyntaxError, text: str) -> str:
    """``line L, column C: MSG: 'the line'`` for a syntax error in ``text``."""
    line = ""
    if exc.lineno and 0 < exc.lineno <= len(text.splitlines()):
        line = text.splitlines()[exc.lineno - 1].strip()
    where = f"line {exc.lineno}, column {exc.offset}" if exc.offset else f"line {exc.lineno}"
    shown = f": {line[:100]!r}" if line else ""
    return f"{where}: {exc.msg}{shown}"


def extract_source(text: str) -> Extraction:
    """The Python code in ``text`` (a candidate file's contents); see the module docstring for the rules."""
    try:
        astparse.parse(text)
        return Extraction(text)
    except SyntaxError as exc:
        plain_error = syntax_error_text(exc, text)
    outside = _THINK.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    blocks = _blocks(outside) or _blocks(text)
    if not blocks:
        return Extraction(text, error=f"not valid Python: {plain_error} (and no ```python fence to take code from)")
    python = [b for b in blocks if b.lang in _PYTHON_TAGS]
    others = sorted({b.lang for b in blocks if b.lang not in _PYTHON_TAGS})
    if not python:
        return Extraction(text, error=(f"a Markdown reply with {len(blocks)} fenced block(s), none of them Python "
                                       f"(tagged {', '.join(others)}); KernelGate needs the Python code of ModelNew"))
    parsed: list[tuple[_Block, ast.Module]] = []
    refused: list[str] = []
    for b in python:
        try:
            parsed.append((b, astparse.parse(b.code)))
        except SyntaxError as exc:
            inner = syntax_error_text(exc, b.code)
            refused.append(f"lines {b.first_line}-{b.last_line}: {inner}")
    if not parsed:
        return Extraction(text, error=(f"a Markdown reply whose {len(python)} Python fence(s) do not parse: "
                                       + "; ".join(refused)))
    with_model = [(b, t) for b, t in parsed if _defines_model_new(t)]
    if len(parsed) == 1:
        (chosen, tree), why = parsed[0], "the only Python fence that parses"
    elif with_model:
        chosen, tree = with_model[-1]
        why = "the only one defining ModelNew" if len(with_model) == 1 else \
            f"the last of {len(with_model)} defining ModelNew"
    else:
        return Extraction(text, error=(f"a Markdown reply with {len(parsed)} Python fences, none defining class "
                                       "ModelNew; keep the one with the solution"))
    total = len(blocks)
    where = f"lines {chosen.first_line}-{chosen.last_line}"
    note = (f"code extracted from a Markdown reply: the ```{chosen.lang or ''} fence at {where} "
            f"({python.index(chosen) + 1} of {len(python)} Python fence(s), {total} in all; {why})")
    if not chosen.closed:
        note += "; the fence was never closed (the reply may be truncated)"
    if not _defines_model_new(tree):
        note += "; it defines no ModelNew"
    return Extraction(chosen.code, note=note, first_line=chosen.first_line)
