"""Render the HTML report in headless Chromium: it must paint, hold its tables, and fit common widths.

Skipped when ``chromium`` is not on PATH (Debian: ``apt-get install -y
chromium``). Chromium runs with networking and background services off and a
throw-away profile, through ``tools/report_screenshot.py`` (the script the
screenshots are taken with), so the test measures what that script does.

Widths: 800 (a narrow window), 1280, 1400 and 1920 CSS pixels. At each, no
element may be wider than its box (no horizontal scrollbar anywhere, no
clipped cell) and nothing may reach past the viewport, with every
``<details>`` open. Three reports are measured: the synthetic suite (every
status, four generators, a comparison section), the committed H200 suite with
the adversarial fixtures of the same protocol (210 records with real error
texts, warnings and lint findings) and its calibrated ceilings, and the same
records as ``kernelgate report`` draws them without ceilings.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from synth_results import CEILINGS, suite

from harness.report.html import write_report
from harness.results.store import load_results

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "evidence" / "h200-results" / "2026-12-03-8448562"
H200_FIXTURES = ROOT / "evidence" / "exploit-fixtures" / "2026-12-03-d69935c"
WIDTHS = (800, 1280, 1400, 1920)


def _tool():
    spec = importlib.util.spec_from_file_location("report_screenshot", ROOT / "tools" / "report_screenshot.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


TOOL = _tool()
pytestmark = pytest.mark.skipif(TOOL.chromium() is None, reason="chromium is not installed")


@pytest.fixture(scope="module")
def synthetic_report(tmp_path_factory) -> Path:
    html, _ = write_report(suite(), tmp_path_factory.mktemp("synthetic"), ceilings=CEILINGS, n_boot=300)
    return html


def _ceilings(environment: Path) -> dict:
    """The ceilings `kernelgate calibrate` printed into an evidence folder's environment.txt, as write_report takes
    them."""
    out: dict = {"dram_bytes_per_s": None, "peaks_flops_per_s": {}}
    for line in environment.read_text().splitlines():
        if m := re.match(r"DRAM bandwidth\s+([\d.]+) TB/s", line):
            out["dram_bytes_per_s"] = float(m[1]) * 1e12
        elif m := re.match(r"matmul (\S+)\s+([\d.]+) TFLOP/s", line):
            out["peaks_flops_per_s"][m[1]] = float(m[2]) * 1e12
    assert out["dram_bytes_per_s"] and out["peaks_flops_per_s"], environment
    return out


def _h200_results():
    """The committed H200 suite and the adversarial fixtures of the same protocol (long generator labels such
    as adversarial-fixtures@1 beside the categories, once 22 px wider than an 800 px window)."""
    return load_results([H200 / "suite_results.jsonl.gz", H200_FIXTURES / "fixtures_results.jsonl.gz"])


@pytest.fixture(scope="module")
def h200_report(tmp_path_factory) -> Path:
    html, _ = write_report(_h200_results(), tmp_path_factory.mktemp("h200"), ceilings=_ceilings(H200 / "environment.txt"),
                           n_boot=300)
    return html


@pytest.fixture(scope="module")
def h200_no_ceilings_report(tmp_path_factory) -> Path:
    """The same records as 'kernelgate report' draws them without ceilings."""
    html, _ = write_report(_h200_results(), tmp_path_factory.mktemp("h200nc"), n_boot=300)
    return html


def test_report_renders_in_chromium(synthetic_report, tmp_path):
    shot = TOOL.screenshot(synthetic_report, tmp_path / "shot.png", 1280, height=2000)
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 20_000  # a blank page compresses to a few KB

    proc = TOOL._run(["--dump-dom", synthetic_report.as_uri()])
    dom = proc.stdout
    assert 'id="leaderboard-table"' in dom and "gen-a@2" in dom and 'id="comparison"' in dom
    assert dom.count("<tr") > 20 and dom.count("<circle") >= 5  # roofline hover targets (nearby points share one)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("which", ["synthetic", "h200", "h200_no_ceilings"])
def test_no_horizontal_overflow(which, width, request):
    html = request.getfixturevalue(f"{which}_report")
    m = TOOL.measure(html, width)
    assert m["viewport_width_px"] == width
    assert m["document_scroll_width_px"] == width, m
    assert m["n_overflowing"] == 0, m["overflowing"]
    assert m["n_beyond_viewport"] == 0, m["beyond_viewport"]


def test_measurement_sees_an_overflow(tmp_path):
    """The check itself: a page with a 3000 px wide table inside a scroll box is reported at 1280 px."""
    page = tmp_path / "wide.html"
    page.write_text('<!DOCTYPE html><html><body><div style="overflow-x:auto" id="box">'
                    '<table style="width:3000px"><tr><td>x</td></tr></table></div></body></html>')
    m = TOOL.measure(page, 1280)
    assert m["n_overflowing"] >= 1 and any(o["element"].startswith("div#box") for o in m["overflowing"])


HOVER_JS = r"""
<script>
(function () {
  var out = [];
  document.querySelectorAll(".hot circle").forEach(function (c) {
    var r = c.getBoundingClientRect();
    var x = r.left + r.width / 2, y = r.top + r.height / 2;
    window.scrollTo(0, Math.max(0, y + window.scrollY - 200));
    r = c.getBoundingClientRect();
    var hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    out.push({title: c.querySelector("title").textContent, hit: hit === c});
  });
  var pre = document.createElement("pre");
  pre.id = "kg-measure";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"""


@pytest.mark.parametrize("width", [800, 1400])
def test_roofline_points_are_named_under_the_pointer(h200_report, width):
    """Every roofline point has a hover target at its position, on top, whose title names the kernel.

    Points that nearly coincide share one target; its title has a line per
    point, so every timed record and library point is named.
    """
    targets = TOOL.page_result(h200_report, width, HOVER_JS)
    assert all(t["hit"] for t in targets), [t["title"] for t in targets if not t["hit"]][:5]
    names = [line for t in targets for line in t["title"].splitlines()]
    kernels = [n for n in names if not n.startswith("library")]
    assert len(kernels) == 102 + 4  # the bundled submissions and the four timed fixture records
    assert any(n.startswith("defects@1.0 defects/layernorm__tl_serial_row.py · layernorm") for n in kernels)
