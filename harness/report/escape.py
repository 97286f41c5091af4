"""Untrusted text made safe for the format it lands in: terminal, Markdown, HTML.

Candidates choose their file names, generator names, error messages,
tracebacks and printed output; all of it reaches the terminal, ``report.md``,
``report.html`` and the feedback a generator reads. Each format has its own
hazards, so each has one function here, and every renderer calls it:

* :func:`terminal`: control characters (ANSI escape sequences that recolour,
  move the cursor, set the window title or hide text; a carriage return that
  overwrites a line; bidirectional overrides that reorder what is shown) are
  written out visibly (``\\x1b``, ``\\r``, ``\\u202e``). Newlines and tabs stay.
* :func:`md_text`: text inside a Markdown paragraph, list item or table cell:
  HTML is escaped (Markdown renderers pass raw HTML through, so ``<img
  onerror=...>`` or ``<script>`` would run in a viewer that renders it), the
  characters that make Markdown syntax inside a line (code, emphasis, links
  and images, strikethrough) are backslash-escaped, a table cell
  cannot be split by ``|``, and a newline cannot end the cell or the list item.
* :func:`md_code`: an inline code span that the text cannot close (the fence
  is one backtick longer than the longest run of backticks in the text).
* :func:`md_fence`: a fenced block (code, a traceback) that the text cannot
  close, likewise.
* :func:`html`: HTML text and attribute values (``& < > " '``). The HTML report
  renders through Jinja with autoescaping, which applies the same escaping.

Every function also runs :func:`terminal`'s replacement of control
characters, since Markdown and HTML end up in terminals and editors too.
No CSV is written by KernelGate.
"""

from __future__ import annotations

import re

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""C0 and C1 controls (but newline and tab), DEL, and the Unicode bidirectional marks and overrides."""
_MD_SPECIAL = re.compile(r"([\\`*|~]|\](?=[(\[:]))")
"""Backslash, code, emphasis, table pipe, strikethrough, and a ``]`` that would end a link or image's text
(``[t](url)``, ``[t][ref]``, ``[t]: url``). Other brackets and ``_`` are left alone: ``[3, 7]`` in a message or
``conv2d_3x3`` in a name (GFM does not emphasise inside words) stay readable in the raw file."""
_BACKTICKS = re.compile(r"`+")


def _visible(ch: str) -> str:
    code = ord(ch)
    if ch == "\r":
        return "\\r"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def terminal(text: object) -> str:
    """``text`` with every control character but newline and tab written out visibly (see the module docstring)."""
    return _CONTROL.sub(lambda m: _visible(m.group(0)), str(text))


def html(text: object) -> str:
    """``text`` escaped for HTML content and quoted attribute values, control characters made visible."""
    import html as _html

    return _html.escape(terminal(text), quote=True)


def md_text(text: object, *, newlines: str = " ") -> str:
    """``text`` as literal Markdown inline text: no HTML, no markup, no cell or item break (see the module docstring).

    ``newlines``: what a line break becomes (a space keeps a table row or a
    list item on one line; ``"<br>"`` keeps the break visible in a cell).
    """
    out = _html_in_md(terminal(text))
    out = _MD_SPECIAL.sub(r"\\\1", out)
    return out.replace("\r\n", "\n").replace("\n", newlines)


def _html_in_md(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def md_code(text: object) -> str:
    """``text`` as a Markdown inline code span it cannot close; ``|`` escaped so a table cell stays whole.

    Inside a code span HTML and markup are shown literally; a newline becomes a space (CommonMark does the same).
    """
    body = terminal(text).replace("\r\n", "\n").replace("\n", " ").replace("|", "\\|")
    longest = max((len(m.group(0)) for m in _BACKTICKS.finditer(body)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if body.startswith("`") or body.endswith("`") or not body.strip() else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def md_fence(text: object, info: str = "") -> str:
    """``text`` as a fenced Markdown block it cannot close: ``` (or more backticks than any run inside it).

    ``info``: the info string (``python``, ``text``). Returns the block with
    its opening and closing lines, no trailing newline.
    """
    body = terminal(text).rstrip("\n")
    longest = max((len(m.group(0)) for m in _BACKTICKS.finditer(body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{body}\n{fence}"


__all__ = ["html", "md_code", "md_fence", "md_text", "terminal"]
