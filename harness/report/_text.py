"""Rendering helpers for numbers and plain text tables (rounding happens only here)."""

from __future__ import annotations

import math


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


def table(rows: list[list[str]], headers: list[str]) -> str:
    """A plain aligned text table."""
    widths = [len(h) for h in headers]
    for r in rows:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(str(c)))

    def line(cells: list[str]) -> str:
        return "  ".join(str(c).ljust(widths[i]) for i, c in enumerate(cells)).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])
