"""harness/report/escape.py: untrusted text cannot become markup, HTML or terminal control in any output format."""

from __future__ import annotations

import re

import pytest

from harness.report.escape import html, md_code, md_fence, md_text, terminal

HOSTILE = ("<h2>big</h2><img src=x onerror=alert(1)><script>alert(2)</script> | cell `code` *em* "
           "[link](javascript:alert(3)) ![img](http://tracker/x.png) \x1b[31mred\x1b[0m \x1b]0;title\x07 "
           "over\rwrite \u202eevil\u202c ~~strike~~\nsecond line")


@pytest.mark.parametrize("fn", [terminal, html, md_text, md_code, md_fence])
def test_no_control_character_survives(fn):
    out = fn(HOSTILE)
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", out), repr(out)


def test_terminal_keeps_newlines_and_tabs_and_shows_the_rest():
    out = terminal("a\tb\nc\x1b[2Jd\re\u202ef")
    assert out == "a\tb\nc\\x1b[2Jd\\re\\u202ef"
    assert terminal(out) == out  # idempotent: printable text is left alone


def test_markdown_text_is_literal():
    out = md_text(HOSTILE)
    assert "<" not in out and ">" not in out  # no HTML reaches a Markdown renderer
    assert "&lt;script&gt;" in out and "&lt;img src=x" in out
    assert "\n" not in out  # a table row or list item stays one line
    assert "|" not in out.replace("\\|", "")  # every pipe escaped: the cell is not split
    assert "\\`code\\`" in out and "\\*em\\*" in out and "[link\\](" in out and "![img\\](" in out
    assert md_text("worst at [3, 7]") == "worst at [3, 7]" and md_text("[a][b]") == "[a\\][b]"
    assert "\\~\\~strike\\~\\~" in out
    assert md_text("triton-reference/conv2d_3x3.py") == "triton-reference/conv2d_3x3.py"  # names stay readable
    assert md_text("a\nb", newlines="<br>") == "a<br>b"


def test_markdown_code_span_cannot_be_closed_by_its_text():
    assert md_code("plain.py") == "`plain.py`"
    out = md_code("a``b`c|d")
    fence = re.match(r"`+", out).group(0)
    assert len(fence) == 3 and out.endswith(fence) and "``b`c" in out and "\\|" in out
    assert md_code("`x`") == "`` `x` ``"  # CommonMark: a space pads a span that starts or ends with a backtick


def test_markdown_fence_is_longer_than_any_run_inside():
    block = md_fence("def f():\n    '''```python\n    inner```'''\n", "python")
    lines = block.splitlines()
    assert lines[0] == "````python" and lines[-1] == "````"
    assert md_fence("x = 1", "python") == "```python\nx = 1\n```"


def test_html_escapes_text_and_attributes():
    assert html('<img src="x" onerror=\'a\'>&') == "&lt;img src=&quot;x&quot; onerror=&#x27;a&#x27;&gt;&amp;"
