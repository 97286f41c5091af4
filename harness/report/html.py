"""A self-contained HTML report and a Markdown summary of results records.

``write_report`` builds the leaderboard (:mod:`harness.report.leaderboard`)
and renders two templates from ``harness/report/templates``:

* ``report.html`` -- one file with inline CSS and the charts embedded as
  base64 PNG data URIs, so it can be mailed or attached to a CI run as is;
  rendered with ``autoescape=True`` because candidate names, error messages
  and diagnostics are untrusted text;
* ``report.md`` -- the same tables in Markdown; its charts are written beside
  it as ``roofline.png`` and ``fast_p.png`` (Markdown viewers do not show data
  URIs).

Charts need matplotlib; without it both files still render, with a note in
place of the charts. Nothing here reads anything but the records and the
optional ceilings, so a report is regenerated, never edited.
"""

from __future__ import annotations

import base64
import contextlib
import os
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


def _status_class(status: str) -> str:
    if status == "PASSED":
        return "ok"
    if status == "LOWERED":
        return "lowered"
    if status == "REWARD_HACK":
        return "hack"
    return "bad"


def _agg_cells(agg: dict) -> list[str]:
    fp = agg["fast_p"]
    return [str(agg["n_candidates"]), f"{agg['n_problems_correct']}/{agg['n_problems']}", pct(agg["correctness_rate"]),
            str(agg["n_lowered"]) if agg["n_lowered"] else "-",
            *[pct(fp[f"{p:g}"]) for p in M.FAST_P],
            fmt(agg["geomean_e_lib"]), fmt(agg["geomean_u_roof"]), fmt(agg["mean_s"], ".3f"),
            ", ".join(f"{k} {n}" for k, n in agg["verdicts"].items() if n) or "-"]


AGG_HEADERS = ["candidates", "problems correct", "correct (records)", "compiled only",
               *[f"fast_{p:g}" for p in M.FAST_P], "E_lib (geomean)", "U_roof (geomean)", "mean S", "verdicts (records)"]


def context(lb: dict, *, title: str, chart_notes: list[str]) -> dict:
    """Everything the templates show, as preformatted strings (rounding happens here only)."""
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
        elif pr["correct"]:
            text, cls = (f"ok, E_lib {fmt(pr['e_lib_min'])}" if pr["e_lib_min"] is not None else "ok (untimed)"), "ok"
        else:
            text, cls = "failed", "bad"
        matrix[pr["problem"]][pr["label"]] = {"text": text, "cls": cls, "candidate": pr["best_candidate"]}
    problem_matrix = [{"problem": p, "category": cats[p],
                       "cells": [matrix[p].get(lbl, {"text": "-", "cls": "none", "candidate": ""}) for lbl in labels]}
                      for p in sorted(matrix, key=lambda p: (cats[p], p))]

    entries = [{
        "label": f"{e['generator']}@{e['version']}", "candidate": e["candidate"], "problem": e["problem"],
        "category": e["category"], "workload": e["workload"], "status": e["status"], "cls": _status_class(e["status"]),
        "verdict": e["verdict"] + (" (borderline)" if e["borderline"] and e["verdict"] != "borderline" else ""),
        "t_kernel": fmt(e["t_kernel_ms"], ".4g"), "t_library": fmt(e["t_library_ms"], ".4g"),
        "e_lib": fmt(e["E_lib"]), "u_roof": fmt(e["U_roof"]), "u_roof_lib": fmt(e["U_roof_library"]),
        "bound": e["bound"] or "-", "s": fmt(e["S"], ".3f"), "diagnostics": ", ".join(e["diagnostics"]) or "-",
        "error": e["error"] or "",
    } for e in lb["entries"]]

    env_keys = ("device_name", "device_kind", "driver", "torch", "triton", "tilelang", "python", "harness", "sandbox")
    envs = [{"index": i, "cells": [str(env.get(k) if env.get(k) is not None else "-") for k in env_keys]}
            for i, env in enumerate(lb["envs"])]
    th = lb["thresholds"]
    inp = lb["inputs"]
    return {
        "title": title,
        "summary": (f"{inp['n_records']} record(s) from {len(inp['run_ids'])} run(s) "
                    f"({', '.join(inp['run_ids']) or 'none'})"
                    + (f"; {inp['n_superseded']} superseded record(s) ignored" if inp["n_superseded"] else "")
                    + (f"; latest record {inp['latest_created_at']}" if inp["latest_created_at"] else "")),
        "source": inp["source"],
        "warnings": lb["warnings"],
        "agg_headers": AGG_HEADERS,
        "leaderboard": leaderboard,
        "categories": categories,
        "labels": labels,
        "problem_matrix": problem_matrix,
        "entries": entries,
        "env_headers": ["#", *env_keys],
        "envs": envs,
        "thresholds": (f"tau_lib={th.get('tau_lib')}, tau_roof_memory={th.get('tau_roof_memory')}, "
                       f"tau_roof_compute={th.get('tau_roof_compute')}, hack U_roof > {th.get('hack_u_roof')} "
                       f"({th.get('source')})"),
        "ranking_rule": lb["ranking_rule"],
        "definitions": sorted(lb["definitions"].items()),
        "chart_notes": chart_notes,
    }


def _environment(autoescape: bool):
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=autoescape,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True)
    env.filters["md"] = lambda s: str(s).replace("|", "\\|").replace("\n", " ")
    return env


def write_report(results: list[JobResult], out_dir: str | os.PathLike, *, ceilings: dict | None = None,
                 title: str = "KernelGate report", source: str = "") -> tuple[Path, Path]:
    """Write ``out_dir/report.html`` (self-contained) and ``out_dir/report.md``; return their paths.

    ``ceilings``: measured roofline ceilings ``{"dram_bytes_per_s": float,
    "peaks_flops_per_s": {"fp16": float, ...}}`` of the device that produced
    the results, drawn as roofs in the roofline chart when given.
    """
    from harness.report.leaderboard import build_leaderboard
    from harness.report.plots import charts

    out = Path(out_dir)
    lb = build_leaderboard(results, source=source)
    ch = charts(lb, ceilings)
    notes = list(ch["notes"])
    if ceilings and len(lb["envs"]) > 1:
        notes.append("the ceilings drawn belong to one device, but the records come from several environments")
    ctx = context(lb, title=title, chart_notes=notes)

    images = {k: ch[k] for k in ("roofline", "fast_p") if ch[k] is not None}
    html = _environment(True).get_template("report.html.j2").render(
        **ctx, images={k: "data:image/png;base64," + base64.b64encode(v).decode("ascii") for k, v in images.items()})
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
