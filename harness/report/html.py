"""A self-contained HTML report and a Markdown summary of results records.

``write_report`` builds the leaderboard (:mod:`harness.report.leaderboard`)
and renders two templates from ``harness/report/templates``:

* ``report.html`` -- one file with inline CSS and the charts embedded as
  base64 PNG data URIs, so it can be mailed or attached to a CI run as is;
  rendered with ``autoescape=True`` because candidate names, error messages
  and diagnostics are untrusted text;
* ``report.md`` -- the same tables in Markdown; its charts are written beside
  it as ``roofline.png`` and ``fast_p.png`` (Markdown viewers do not show data
  URIs). Every text that is not the template's own goes through the ``md``
  or ``mdcode`` filter (:mod:`harness.report.escape`): a candidate's error
  message holding ``<script>`` or ``|`` is shown as text, never as HTML or a
  broken table.

Sections: leaderboard, charts (roofline with the flagged kernels labelled and
every point named in a hover title, fast_p), per category, per problem, the
generator comparison (:func:`harness.report.versions.version_comparison`, when
the records hold two or more generator@version labels), failures with their
error text, and every record with its error, warnings and static findings
under it. CPU-path records are shown as correctness only
(:data:`harness.report.metrics.CPU_PATH_NOTE`).

Layout: no table needs a horizontal scrollbar from 800 to 1920 CSS pixels
(``tests/report/test_report_browser.py`` measures it in Chromium): names get
line-break opportunities after ``/ _ @ -``, numbers never wrap, and below
960 px the tables tighten. ``tools/report_screenshot.py`` renders a report
to PNG.

Charts need matplotlib; without it both files still render, with a note in
place of the charts. Nothing here reads anything but the records and the
optional ceilings, so a report is regenerated, never edited.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import struct
import tempfile
from collections import defaultdict
from pathlib import Path

from harness.jsonio import atomic_write_text
from harness.records import JobResult
from harness.report import metrics as M
from harness.report._text import fmt, pct

TEMPLATES = Path(__file__).resolve().parent / "templates"


def _readable(path: Path) -> None:
    """mkstemp creates files 0600; a report is meant to be shared (served, attached to CI), so 0644."""
    os.chmod(path, 0o644)


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        _readable(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _png_width(png: bytes) -> int:
    """Pixel width from a PNG's IHDR chunk (bytes 16-20), so a figure and its caption are as wide as the image."""
    return struct.unpack(">I", png[16:20])[0]


def _status_class(status: str) -> str:
    if status == "PASSED":
        return "ok"
    if status == "LOWERED":
        return "lowered"
    if status == "REWARD_HACK":
        return "hack"
    return "bad"


VERDICT_TEXT = {"cpu_path": M.CPU_PATH_NOTE, "not_timed": "not timed"}
"""How a verdict bucket is written in the report when its name alone would not say it."""


def _verdict_text(bucket: str) -> str:
    return VERDICT_TEXT.get(bucket, bucket)


def _agg_cells(agg: dict) -> list[str]:
    fp = agg["fast_p"]
    return [str(agg["n_candidates"]), f"{agg['n_problems_correct']}/{agg['n_problems']}", pct(agg["correctness_rate"]),
            str(agg["n_lowered"]) if agg["n_lowered"] else "-",
            *[pct(fp[f"{p:g}"]) for p in M.FAST_P],
            fmt(agg["geomean_e_lib"]), fmt(agg["geomean_u_roof"]), fmt(agg["mean_s"], ".3f"),
            "; ".join(f"{_verdict_text(k)} {n}" for k, n in agg["verdicts"].items() if n) or "-"]


AGG_HEADERS = ["candidates", "problems correct", "correct (records)", "compiled only",
               *[f"fast_{p:g}" for p in M.FAST_P], "E_lib (geomean)", "U_roof (geomean)", "mean S", "verdicts (records)"]

ERROR_SUMMARY_CHARS = 240
"""Characters of an error's first line shown in the failures list before "..." (the whole text is one click away)."""


def _first_line(text: str | None) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    if len(line) <= ERROR_SUMMARY_CHARS:
        return line
    cut = line.rfind(" ", 0, ERROR_SUMMARY_CHARS)
    return line[:cut if cut > 0 else ERROR_SUMMARY_CHARS] + " ..."


def _time(gpu_ms: float | None, host_ms: list | None, k: int) -> str:
    """A time cell: the GPU median, else a CPU-path host-clock median marked ``host`` (:data:`metrics.HOST_CLOCK_NOTE`)."""
    if gpu_ms is None and host_ms:
        return f"{fmt(host_ms[k], '.4g')} host"
    return fmt(gpu_ms, ".4g")


def _entry(i: int, e: dict) -> dict:
    cpu = e["cpu_path"]
    verdict = _verdict_text(e["verdict"])
    if e["borderline"] and e["verdict"] != "borderline":
        verdict += " (borderline)"
    message = e["error_message"] or ""
    return {
        "id": f"rec-{i}", "label": f"{e['generator']}@{e['version']}", "candidate": e["candidate"],
        "problem": e["problem"], "category": e["category"], "workload": e["workload"], "status": e["status"],
        "cls": _status_class(e["status"]), "verdict": verdict, "cpu_path": cpu,
        "t_kernel": _time(e["t_kernel_ms"], e.get("host_times_ms"), 0),
        "t_library": _time(e["t_library_ms"], e.get("host_times_ms"), 1),
        "e_lib": fmt(e["E_lib"]), "u_roof": fmt(e["U_roof"]), "u_roof_lib": fmt(e["U_roof_library"]),
        "bound": e["bound"] or "-", "s": fmt(e["S"], ".3f"), "diagnostics": ", ".join(e["diagnostics"]) or "-",
        "error_type": e["error"] or "", "error_first": _first_line(message),
        "error_more": "\n".join(x for x in (message.strip(), e["error_traceback"] or "") if x)
                      if (len(message.strip().splitlines()) > 1 or e["error_traceback"]
                          or len(message.strip()) > ERROR_SUMMARY_CHARS) else "",
        "warnings": e["warnings"],
        "findings": [{**f, "line": f["line"] if f["line"] is not None else "-"} for f in e["findings"]],
        "has_detail": bool(e["error"] or e["warnings"] or e["findings"]),
    }


def _comparison_context(vc: dict | None) -> dict | None:
    """The generator-comparison section, preformatted (None when the records hold one generator@version)."""
    if vc is None:
        return None
    summaries = []
    for d in vc["comparisons"]:
        s = d["summary"]
        ci = s["ci95"]
        summaries.append({
            "a": d["a"], "b": d["b"], "pairs": f"{s['n_pairs']} ({s['n_timed_pairs']} timed)",
            "correct": f"{s['correct_a']}/{s['attempted_a']} -> {s['correct_b']}/{s['attempted_b']}",
            "geomean": (f"{s['geomean_ratio']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]" if s["geomean_ratio"] is not None else "-"),
            "verdict": ("-" if s["geomean_ratio"] is None else "faster" if ci[1] < 1 else "slower" if ci[0] > 1
                        else "no clear difference"),
            "improved": ", ".join(d["improved"]) or "-", "regressed": ", ".join(d["regressed"]) or "-",
            "mixed": ", ".join(d["mixed"]) or "-",
            "only": [{"label": lbl, "count": len(names), "names": names}
                     for lbl, names in ((d["a"], d["only_a"]), (d["b"], d["only_b"])) if names],
            "warnings": d["warnings"],
        })
    mode = {"raw": "same run", "library_normalized": "lib-normalized", "repeats": "repeats"}
    problems = []
    for pr in vc["problems"]:
        groups = []
        for w in pr["workloads"]:
            rows = []
            for r in sorted(w["rows"], key=lambda r: not r["baseline"]):  # the baseline first, then label order
                ci = r["ci95"]
                ratio = "-"
                if r["ratio"] is not None:
                    ratio = f"{r['ratio']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"
                elif r["change"] == "cpu_path":
                    ratio = "not compared (CPU path)"
                elif r["baseline"]:
                    ratio = "baseline"
                rows.append({
                    "label": r["label"], "baseline": r["baseline"], "candidate": r["candidate"], "status": r["status"],
                    "cpu_path": r["cpu_path"],
                    "cls": _status_class(r["status"]), "verdict": _verdict_text(r["verdict"]),
                    "e_lib": fmt(r["E_lib"]), "u_roof": fmt(r["U_roof"]), "ratio": ratio,
                    "reference": r["reference"] or "-", "mode": mode.get(r["mode"] or "", "-"),
                    "change": (r["change"] or "-").replace("_", " "), "error": _first_line(r["error"]),
                    "change_cls": {"faster": "ok", "fixed": "ok", "slower": "bad", "broke": "bad"}.get(r["change"] or "",
                                                                                                     ""),
                })
            groups.append({"workload": w["workload"], "rows": rows})
        problems.append({"problem": pr["problem"], "category": pr["category"], "groups": groups})
    return {"baseline": vc["baseline"], "rule": vc["rule"], "change_rule": vc["change_rule"],
            "min_effect": f"{vc['min_effect']:g}", "n_boot": vc["n_boot"], "summaries": summaries, "problems": problems}


def context(lb: dict, *, title: str, chart_notes: list[str], comparison: dict | None = None,
            roofline_map: dict | None = None) -> dict:
    """Everything the templates show, as preformatted strings (rounding happens here only).

    ``comparison``: :func:`harness.report.versions.version_comparison` of the
    same records (None: no comparison section). ``roofline_map``: the hover
    positions of :func:`harness.report.plots.charts`.
    """
    gens = {g["label"]: g for g in lb["generators"]}
    leaderboard = [{"rank": e["rank"], "label": e["label"], "cells": _agg_cells(gens[e["label"]]["overall"])}
                   for e in lb["ranking"]]
    categories = [{"label": e["label"], "category": cat, "cells": _agg_cells(agg)}
                  for e in lb["ranking"] for cat, agg in gens[e["label"]]["by_category"].items()]

    labels = [e["label"] for e in lb["ranking"]]
    matrix: dict[str, dict[str, dict]] = defaultdict(dict)
    cats: dict[str, str] = {}
    for pr in lb["problems"]:
        cats[pr["problem"]] = pr["category"]
        if not pr["attempted"]:
            text, cls = "compiled only", "lowered"
        elif pr["correct"] and pr.get("cpu_path"):
            text, cls = "ok (CPU path: correctness only)", "ok"
        elif pr["correct"]:
            text, cls = (f"ok, E_lib {fmt(pr['e_lib_min'])}" if pr["e_lib_min"] is not None else "ok (untimed)"), "ok"
        else:
            text, cls = "failed", "bad"
        matrix[pr["problem"]][pr["label"]] = {"text": text, "cls": cls, "candidate": pr["best_candidate"]}
    problem_matrix = [{"problem": p, "category": cats[p],
                       "cells": [matrix[p].get(lbl, {"text": "-", "cls": "none", "candidate": ""}) for lbl in labels]}
                      for p in sorted(matrix, key=lambda p: (cats[p], p))]

    entries = [_entry(i, e) for i, e in enumerate(lb["entries"])]
    failures = [e for e in entries if e["error_type"]]
    n_warned = sum(bool(e["warnings"]) for e in entries)

    env_keys = ("device_name", "device_kind", "driver", "torch", "triton", "tilelang", "python", "harness", "sandbox")
    envs = [{"index": i, "cells": [str(env.get(k) if env.get(k) is not None else "-") for k in env_keys]}
            for i, env in enumerate(lb["envs"])]
    th = lb["thresholds"]
    inp = lb["inputs"]
    cpu_labels = [g["label"] for g in lb["generators"] if g["overall"]["n_cpu_path"]]
    hot = None
    if roofline_map:
        from harness.report.plots import HOTSPOT_RADIUS_PX

        hot = {"width": roofline_map["width_px"], "height": roofline_map["height_px"], "radius": HOTSPOT_RADIUS_PX,
               "n_labelled": roofline_map["n_labelled"],
               "points": [{"x": h["x_px"], "y": h["y_px"], "title": h["title"]} for h in roofline_map["hotspots"]]}
    return {
        "title": title,
        "summary": (f"{inp['n_records']} record(s) from {len(inp['run_ids'])} run(s) "
                    f"({', '.join(inp['run_ids']) or 'none'})"
                    + (f"; {inp['n_superseded']} superseded record(s) ignored" if inp["n_superseded"] else "")
                    + (f"; latest record {inp['latest_created_at']}" if inp["latest_created_at"] else "")),
        "source": inp["source"],
        "warnings": lb["warnings"],
        "cpu_note": M.CPU_PATH_NOTE if cpu_labels else "",
        "host_note": M.HOST_CLOCK_NOTE if any(e.get("host_times_ms") for e in lb["entries"]) else "",
        "cpu_labels": cpu_labels,
        "agg_headers": AGG_HEADERS,
        "fast_p_labels": [f"{p:g}" for p in M.FAST_P],
        "leaderboard": leaderboard,
        "categories": categories,
        "labels": labels,
        "problem_matrix": problem_matrix,
        "entries": entries,
        "failures": failures,
        "n_warned": n_warned,
        "comparison": _comparison_context(comparison),
        "roofline_hot": hot,
        "env_headers": ["#", *env_keys],
        "envs": envs,
        "thresholds": (f"tau_lib={th.get('tau_lib')}, tau_roof_memory={th.get('tau_roof_memory')}, "
                       f"tau_roof_compute={th.get('tau_roof_compute')}, hack U_roof > {th.get('hack_u_roof')} "
                       f"({th.get('source')})"),
        "ranking_rule": lb["ranking_rule"],
        "definitions": sorted(lb["definitions"].items()),
        "chart_notes": chart_notes,
    }


_BREAK = re.compile(r"(?<=[/_-])|(?=@)")


def _breakable(text: object):
    """Escaped ``text`` with line-break opportunities (``<wbr>``) after ``/ _ -`` and before ``@``.

    Names such as ``defects/conv2d_3x3__naive_direct.py``, ``INCORRECT_NUMERICAL``
    or ``tilelang-reference@1.0`` then wrap at their parts in a narrow column
    (``tilelang-reference`` / ``@1.0``) instead of widening the table or
    breaking mid-word; ``.`` is no break, so versions and numbers stay whole.
    """
    import markupsafe

    parts = [p for p in _BREAK.split(str(text))]
    return markupsafe.Markup("<wbr>").join(markupsafe.escape(p) for p in parts)


def _environment(autoescape: bool):
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=autoescape,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True)
    from harness.report.escape import md_code, md_text

    env.filters["md"] = md_text  # report.md: untrusted text as literal Markdown (no HTML, no markup, no cell break)
    env.filters["mdcode"] = md_code
    env.filters["brk"] = _breakable
    return env


def write_report(results: list[JobResult], out_dir: str | os.PathLike, *, ceilings: dict | None = None,
                 title: str = "KernelGate report", source: str = "", baseline: str | None = None,
                 n_boot: int = 2000, seed: int = 0) -> tuple[Path, Path]:
    """Write ``out_dir/report.html`` (self-contained) and ``out_dir/report.md``; return their paths.

    ``ceilings``: measured roofline ceilings ``{"dram_bytes_per_s": float,
    "peaks_flops_per_s": {"fp16": float, ...}}`` of the device that produced
    the results, drawn as roofs in the roofline chart when given.
    ``baseline``: the generator@version other generators are compared with
    in the generator-comparison section (default: the first-ranked one);
    ``n_boot``/``seed``: its bootstrap, as in ``kernelgate compare``. Raises
    ValueError when ``baseline`` names no generator of the records.
    """
    from harness.report.versions import version_comparison
    from harness.report.leaderboard import build_leaderboard
    from harness.report.plots import charts

    out = Path(out_dir)
    lb = build_leaderboard(results, source=source)
    comparison = version_comparison(results, baseline=baseline,
                                    default_baseline=lb["ranking"][0]["label"] if lb["ranking"] else None,
                                    n_boot=n_boot, seed=seed)
    ch = charts(lb, ceilings)
    notes = list(ch["notes"])
    if ceilings and len(lb["envs"]) > 1:
        notes.append("the ceilings drawn belong to one device, but the records come from several environments")
    ctx = context(lb, title=title, chart_notes=notes, comparison=comparison, roofline_map=ch["roofline_map"])

    images = {k: ch[k] for k in ("roofline", "fast_p") if ch[k] is not None}
    html = _environment(True).get_template("report.html.j2").render(
        **ctx, images={k: "data:image/png;base64," + base64.b64encode(v).decode("ascii") for k, v in images.items()},
        image_widths={k: _png_width(v) for k, v in images.items()})
    for name in ("roofline", "fast_p"):
        png = out / f"{name}.png"
        if name in images:
            _atomic_write_bytes(png, images[name])
        elif png.exists():
            png.unlink()  # a stale chart from an earlier report must not sit beside this one
    md = _environment(False).get_template("report.md.j2").render(**ctx, images={k: f"{k}.png" for k in images})
    html_path, md_path = out / "report.html", out / "report.md"
    atomic_write_text(html_path, html)
    atomic_write_text(md_path, md)
    for path in (html_path, md_path):
        _readable(path)
    return html_path, md_path
