"""Untrusted text (error messages, candidate and generator names) in every output: report.md, report.html, the
terminal tables of run, compare and leaderboard; and CPU-path host-clock times shown where they were recorded."""

from __future__ import annotations

import dataclasses

from synth_results import ENV_CPU, LN1, SM, record, timing

from harness.commands.run import summary_table
from harness.records import ErrorInfo
from harness.report.compare import compare_generators, format_comparison
from harness.report.html import write_report
from harness.report.leaderboard import build_leaderboard, format_leaderboard

MESSAGE = ("bad <h2>heading</h2><img src=x onerror=alert(1)><script>alert(2)</script> | pipe `tick` "
           "\x1b[2J\x1b]0;pwned\x07cleared\rover")
NAME = "evil`<b>x</b>|\x1b[31m.py"


def _records():
    bad = record("gen-a", "1", "softmax", SM, status="RUNTIME_ERROR", candidate=NAME)
    bad = bad.replace(error=ErrorInfo("RuntimeError", MESSAGE, "Traceback ...\nRuntimeError: " + MESSAGE))
    ok = record("gen-a", "1", "layernorm", LN1, t_kernel=1.0, t_library=1.2)
    other = record("gen-b\x1b[1m", "1", "softmax", SM, status="COMPILE_ERROR", error=MESSAGE)
    return [bad, ok, other]


def test_report_markdown_shows_html_and_markup_as_text(tmp_path):
    """Was: the error message's HTML appeared verbatim in report.md (a Markdown viewer renders it)."""
    _, md_path = write_report(_records(), tmp_path)
    md = md_path.read_text()
    for raw in ("<h2>", "<img", "<script>", "\x1b", "\r", "\x07"):
        assert raw not in md, raw
    assert md.count("<b>") == md.count("``evil`<b>x</b>")  # only inside code spans, where HTML is shown as text
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in md and "\\|" in md
    assert "`` evil`&lt;b&gt;" not in md  # inside a code span HTML is literal, not entity-escaped
    assert "``evil`<b>x</b>\\|\\x1b[31m.py``" in md  # the name in a code span it cannot close
    for line in md.splitlines():
        if line.startswith("| ") and "RUNTIME_ERROR" in line:
            assert line.count(" | ") == line.replace("\\|", "").count(" | ")  # no cell split by the name


def test_report_html_escapes_the_same_text(tmp_path):
    html_path, _ = write_report(_records(), tmp_path)
    html = html_path.read_text()
    assert "<script>alert" not in html and "<img src=x" not in html and "<h2>heading" not in html
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in html


def test_terminal_tables_show_control_characters_instead_of_obeying_them():
    """Was: a candidate's ANSI escapes (clear screen, window title) and carriage returns reached the terminal."""
    recs = _records()
    texts = [summary_table(recs), format_leaderboard(build_leaderboard(recs)),
             format_comparison(compare_generators(recs, "gen-a", "gen-b\x1b[1m", n_boot=200))]
    for text in texts:
        assert "\x1b" not in text and "\r" not in text and "\x07" not in text
    assert "\\x1b[2J\\x1b]0;pwned\\x07cleared" in texts[0]  # the first line ends at the carriage return


def test_cpu_path_host_times_are_shown_and_labelled_where_recorded(tmp_path):
    """Was: 'run --timing' on the CPU path recorded times, but the run table and the report showed '-'."""
    rec = record("gen-a", "1", "layernorm", LN1, env=ENV_CPU, screen=False)
    rec = dataclasses.replace(rec, timing=timing(12.5), library_timing=timing(3.25))
    table = summary_table([rec])
    assert "12.5 host" in table and "3.25 host" in table and "host-clock times" in table
    html_path, md_path = write_report([rec], tmp_path)
    md, html = md_path.read_text(), html_path.read_text()
    assert "| 12.5 host | 3.25 host |" in md and "Times marked host: host-clock times" in md
    assert "12.5 host" in html and "host-clock times of the Triton interpreter" in html
    lb = build_leaderboard([rec])
    (entry,) = lb["entries"]
    assert entry["t_kernel_ms"] is None and entry["E_lib"] is None  # shown, never used as a GPU time
