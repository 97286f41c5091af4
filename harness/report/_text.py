"""Rendering helpers for numbers and plain text tables (rounding happens only here).

Text for the terminal: every cell and every error line passes through
:func:`harness.report.escape.terminal` (candidates' names and messages are
untrusted), before widths are measured so the columns still line up.
"""

from __future__ import annotations

import math
import textwrap

from harness.report.escape import terminal


def fmt(x: float | int | None, spec: str = ".3g") -> str:
    """``x`` formatted with ``spec``; ``-`` for absent values."""
    if x is None:
        return "-"
    if isinstance(x, float) and math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return format(x, spec)


def pct(x: float | None) -> str:
    """A fraction as a percentage, ``-`` when absent."""
    return "-" if x is None else f"{100 * x:.0f}%"


def wrap(text: str, width: int) -> list[str]:
    """``text`` broken at spaces into lines of at most ``width`` characters (a longer word gets a line of its own).

    Line breaks already in ``text`` are kept. Words are never cut, so a path or
    an identifier in an error message stays searchable.
    """
    out: list[str] = []
    for para in str(text).splitlines() or [""]:
        out += textwrap.wrap(para, width, break_long_words=False, break_on_hyphens=False) or [""]
    return out


def first_line(text: str | None, width: int, more: str = "") -> list[str]:
    """The first line of ``text`` wrapped to ``width``; when lines were left out, ``more`` (e.g. where to read them)
    as one last line of its own (never wrapped: it usually holds a path).

    For error texts in terminal tables: the first line of an exception
    message names the problem; tracebacks and compiler logs that follow it
    are pointed to, not printed.
    """
    lines = terminal(text or "").strip().splitlines()
    if not lines:
        return []
    out = wrap(lines[0], width)
    if len(lines) > 1 and more:
        out.append(more)
    return out


def table(rows: list[list[str]], headers: list[str], *, wrap_widths: dict[int, int] | None = None) -> str:
    """A plain aligned text table.

    A cell may hold several lines (``\\n``): the row then takes as many text
    lines, its other cells blank below the first. ``wrap_widths`` maps a
    column index to a width at which that column's cells are word-wrapped
    (:func:`wrap`), so long texts such as error messages are never cut.
    """
    wrap_widths = wrap_widths or {}

    def cell_lines(i: int, c: object) -> list[str]:
        text = terminal(c)
        return wrap(text, wrap_widths[i]) if i in wrap_widths else (text.splitlines() or [""])

    split = [[cell_lines(i, c) for i, c in enumerate(r)] for r in rows]
    headers = [terminal(h) for h in headers]
    widths = [len(h) for h in headers]
    for r in split:
        for i, lines in enumerate(r):
            widths[i] = max([widths[i], *(len(x) for x in lines)])

    def line(cells: list[str]) -> str:
        return "  ".join(str(c).ljust(widths[i]) for i, c in enumerate(cells)).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    for r in split:
        for k in range(max((len(lines) for lines in r), default=1)):
            out.append(line([lines[k] if k < len(lines) else "" for lines in r]))
    return "\n".join(out)
