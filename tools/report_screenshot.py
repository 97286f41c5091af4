"""Render a KernelGate HTML report in headless Chromium: a PNG screenshot, and a horizontal-overflow check.

Usage::

    python tools/report_screenshot.py runs/h200/report --width 1400 --out docs/report.png
    python tools/report_screenshot.py runs/h200/report --width 1400 --height 1600 --out top.png
    python tools/report_screenshot.py runs/h200/report --measure --width 800 --width 1280 --width 1400 --width 1920

REPORT is a report folder (its ``report.html``) or an HTML file. Without
``--height`` the screenshot is the whole page (measured first, capped at
``--max-height`` pixels); ``--scale 2`` renders at twice the pixel density.

``--measure`` loads a copy of the page with a small script appended that,
after opening every ``<details>``, records the viewport width, the document's
``scrollWidth`` and every element whose content is wider than its box
(``scrollWidth > clientWidth``: a horizontal scrollbar or clipped content) or
that reaches past the right edge of the viewport; Chromium's ``--dump-dom``
returns it in the DOM. It prints one JSON line per width and exits 1 when
anything overflows at any width. Why ``--dump-dom`` and not the DevTools
protocol: it needs nothing but the browser binary.

Chromium runs with networking, background services and the GPU off, and a
throw-away profile (``--user-data-dir`` in a new temporary folder). Debian:
``apt-get install -y chromium``. Exit status 2 when Chromium is missing or
fails.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
         "--force-color-profile=srgb")
TIMEOUT_S = 180

MEASURE_JS = r"""
<script>
(function () {
  document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  var vw = document.documentElement.clientWidth;
  function name(el) {
    var s = el.tagName.toLowerCase();
    if (el.id) s += "#" + el.id;
    if (el.classList.length) s += "." + Array.prototype.join.call(el.classList, ".");
    var sec = el.closest("[id]");
    if (sec && sec !== el) s += " in #" + sec.id;
    var top = el;
    while (top.parentElement && top.parentElement !== document.body) top = top.parentElement;
    for (var h = top; h; h = h.previousElementSibling) {
      if (/^H[23]$/.test(h.tagName) && h.id) { s += " under #" + h.id; break; }
    }
    return s;
  }
  var overflowing = [], beyond = [];
  document.querySelectorAll("body *").forEach(function (el) {
    if (el.closest("svg") && el.tagName.toLowerCase() !== "svg") return;
    if (el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1)
      overflowing.push({element: name(el), scroll_width_px: el.scrollWidth, client_width_px: el.clientWidth});
    var r = el.getBoundingClientRect();
    if (r.width > 0 && r.right > vw + 1)
      beyond.push({element: name(el), right_px: Math.round(r.right)});
  });
  var out = {viewport_width_px: vw, inner_width_px: window.innerWidth,
             document_scroll_width_px: document.documentElement.scrollWidth,
             document_height_px: document.documentElement.scrollHeight,
             overflowing: overflowing.slice(0, 50), n_overflowing: overflowing.length,
             beyond_viewport: beyond.slice(0, 50), n_beyond_viewport: beyond.length};
  var pre = document.createElement("pre");
  pre.id = "kg-measure";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"""


def chromium() -> str | None:
    """The Chromium binary on PATH, or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def _html_path(report: str | Path) -> Path:
    p = Path(report)
    p = p / "report.html" if p.is_dir() else p
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no report.html here; write one with 'kernelgate report --out DIR'")
    return p.resolve()


def _run(args: list[str], *, binary: str | None = None) -> subprocess.CompletedProcess:
    binary = binary or chromium()
    if binary is None:
        raise RuntimeError("chromium is not installed (Debian: apt-get install -y chromium)")
    with tempfile.TemporaryDirectory(prefix="kg-chromium-") as profile:
        return subprocess.run([binary, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                              text=True, timeout=TIMEOUT_S, check=False)


def page_result(report: str | Path, width: int, script: str, *, height: int = 1000) -> dict:
    """Load a copy of the page with ``script`` appended and return what it put in ``<pre id="kg-measure">``.

    ``script`` is a ``<script>`` element that writes one JSON value as the
    text of a ``<pre id="kg-measure">`` it appends to the body; Chromium's
    ``--dump-dom`` returns the DOM after the load event.
    """
    src = _html_path(report)
    html = src.read_text(encoding="utf-8")
    cut = html.rfind("</body>")
    if cut < 0:
        raise ValueError(f"{src}: no </body>; not an HTML report")
    with tempfile.TemporaryDirectory(prefix="kg-measure-") as tmp:
        page = Path(tmp) / "measure.html"
        page.write_text(html[:cut] + script + html[cut:], encoding="utf-8")
        proc = _run([f"--window-size={width},{height}", "--force-device-scale-factor=1", "--dump-dom",
                     page.as_uri()])
    m = re.search(r'<pre id="kg-measure">(.*?)</pre>', proc.stdout, re.DOTALL)
    if m is None:
        raise RuntimeError(f"chromium returned no result (exit {proc.returncode}): {proc.stderr[-1500:]}")
    return json.loads(html_unescape(m.group(1)))


def html_unescape(text: str) -> str:
    import html

    return html.unescape(text)


def measure(report: str | Path, width: int, *, height: int = 1000) -> dict:
    """Overflow measurements of the report at ``width`` CSS pixels (see the module docstring)."""
    out = page_result(report, width, MEASURE_JS, height=height)
    out["width_px"] = width
    return out


def screenshot(report: str | Path, out: str | Path, width: int, *, height: int | None = None, scale: float = 1.0,
               max_height: int = 16000) -> Path:
    """Write a PNG of the report at ``width`` CSS pixels; ``height`` None: the whole page (up to ``max_height``)."""
    src = _html_path(report)
    if height is None:
        height = min(max_height, int(measure(src, width)["document_height_px"]) + 8)
    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    proc = _run([f"--window-size={width},{height}", f"--force-device-scale-factor={scale:g}",
                 f"--screenshot={out}", src.as_uri()])
    if not out.exists() or not out.read_bytes().startswith(b"\x89PNG"):
        raise RuntimeError(f"chromium wrote no screenshot (exit {proc.returncode}): {proc.stderr[-1500:]}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report", help="report folder (its report.html) or an HTML file")
    ap.add_argument("--width", type=int, action="append", help="viewport width in CSS pixels (repeatable with "
                    "--measure; default 1400)")
    ap.add_argument("--height", type=int, help="screenshot height in CSS pixels (default: the whole page)")
    ap.add_argument("--max-height", type=int, default=16000, help="cap of a whole-page screenshot (default 16000)")
    ap.add_argument("--scale", type=float, default=1.0, help="device pixel ratio of the screenshot (default 1)")
    ap.add_argument("--out", help="PNG to write (default: REPORT/report-<width>.png)")
    ap.add_argument("--measure", action="store_true", help="print the horizontal-overflow measurements instead")
    args = ap.parse_args(argv)
    widths = args.width or [1400]
    try:
        if args.measure:
            bad = False
            for w in widths:
                m = measure(args.report, w)
                bad |= bool(m["n_overflowing"] or m["n_beyond_viewport"] or
                            m["document_scroll_width_px"] > m["viewport_width_px"])
                print(json.dumps(m, sort_keys=True))
            return 1 if bad else 0
        if len(widths) != 1:
            ap.error("give one --width for a screenshot")
        default = _html_path(args.report).parent / f"report-{widths[0]}.png"
        path = screenshot(args.report, args.out or default, widths[0], height=args.height, scale=args.scale,
                          max_height=args.max_height)
        print(path)
        return 0
    except (FileNotFoundError, ValueError) as exc:
        print(f"report_screenshot: error: {exc}", file=sys.stderr)
        return 2
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"report_screenshot: chromium failed: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
