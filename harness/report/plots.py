"""Charts of a leaderboard as PNG bytes: a roofline and the fast_p curve.

matplotlib is an optional extra (``pip install kernelgate[plot]``); every
function here returns ``None`` instead of raising when it is missing, and
:func:`charts` says so in its note so the report can show it. Figures are
built with the object API (``matplotlib.figure.Figure``) on the Agg canvas,
which needs no display and leaves the caller's pyplot backend and state alone.

Roofline: one point per (candidate, workload) that PASSED and was timed, at
arithmetic intensity ``FLOPs / min_bytes`` and achieved ``FLOPs / t_kernel``;
library points (crosses) are one per (problem, workload, run), at the median
library time of that session. With measured ceilings the roofs are drawn:
``min(peak[unit], bandwidth * intensity)`` per measured peak.
"""

from __future__ import annotations

import io
import statistics
from collections import defaultdict


def have_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _figure(width_in: float, height_in: float):
    """A headless Figure on the Agg canvas, or None without matplotlib."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return None
    fig = Figure(figsize=(width_in, height_in), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def roofline_points(lb: dict) -> tuple[list[dict], int]:
    """(points, number of timed records left out because their FLOPs are 0)."""
    pts: list[dict] = []
    skipped = 0
    lib: dict[tuple, list[dict]] = defaultdict(list)
    for e in lb["entries"]:
        if e["status"] != "PASSED" or e["t_kernel_ms"] is None:
            continue
        if not e["flops"] or not e["min_bytes"]:
            skipped += 1
            continue
        ai = e["flops"] / e["min_bytes"]
        pts.append({"series": f"{e['generator']}@{e['version']}", "ai": ai,
                    "flops_per_s": e["flops"] / (e["t_kernel_ms"] * 1e-3), "library": False})
        if e["t_library_ms"]:
            lib[(e["problem"], e["workload"], e["run_id"])].append(e)
    for (_, _, _), es in sorted(lib.items()):
        t = statistics.median(x["t_library_ms"] for x in es)
        pts.append({"series": "library", "ai": es[0]["flops"] / es[0]["min_bytes"],
                    "flops_per_s": es[0]["flops"] / (t * 1e-3), "library": True})
    return pts, skipped


def roofline_png(points: list[dict], ceilings: dict | None) -> bytes | None:
    fig = _figure(7.5, 4.8)
    if fig is None:
        return None
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    series = sorted({p["series"] for p in points if not p["library"]})
    markers = "osD^v<>ph*"
    for i, s in enumerate(series):
        xs = [p["ai"] for p in points if p["series"] == s]
        ys = [p["flops_per_s"] for p in points if p["series"] == s]
        ax.scatter(xs, ys, marker=markers[i % len(markers)], s=28, alpha=0.8, label=s, zorder=3)
    lib = [p for p in points if p["library"]]
    if lib:
        ax.scatter([p["ai"] for p in lib], [p["flops_per_s"] for p in lib], marker="x", s=46, c="black",
                   label="library (per workload and run)", zorder=4)
    if points:
        lo = min(p["ai"] for p in points) / 3
        hi = max(p["ai"] for p in points) * 3
    else:
        lo, hi = 0.1, 1e4
    if ceilings and ceilings.get("dram_bytes_per_s"):
        bw = float(ceilings["dram_bytes_per_s"])
        peaks = {k: float(v) for k, v in (ceilings.get("peaks_flops_per_s") or {}).items() if v}
        if peaks:
            hi = max(hi, max(peaks.values()) / bw * 3)
        n = 200
        xs = [lo * (hi / lo) ** (i / (n - 1)) for i in range(n)]
        ax.plot(xs, [bw * x for x in xs] if not peaks else [min(bw * x, max(peaks.values())) for x in xs],
                color="grey", lw=1.4, label=f"DRAM {bw / 1e12:.3g} TB/s")
        by_peak: dict[float, list[str]] = defaultdict(list)  # fp16 and bf16 usually share one peak
        for unit, peak in peaks.items():
            by_peak[round(peak, -9)].append(unit)
        for peak, units in sorted(by_peak.items()):
            ax.plot(xs, [min(bw * x, peak) for x in xs], color="grey", lw=0.8, ls="--")
            ax.annotate(f"{'/'.join(sorted(units))} {peak / 1e12:.3g} TFLOP/s", (hi, peak), xytext=(-4, 3),
                        textcoords="offset points", ha="right", fontsize=7, color="dimgrey")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOPs / minimum bytes)")
    ax.set_ylabel("achieved FLOP/s")
    ax.set_title("Roofline" + ("" if ceilings else " (no measured ceilings)"), fontsize=10)
    ax.grid(True, which="major", lw=0.3)
    if points:
        ax.legend(fontsize=7, loc="lower right")
    return _png(fig)


def fast_p_curves(lb: dict) -> dict[str, list[tuple[float, float]]]:
    """Per generator@version, (p, fast_p) on a grid of p; groups that were never timed are left out."""
    by: dict[str, list[dict]] = defaultdict(list)
    for pr in lb["problems"]:
        if pr["attempted"]:
            by[pr["label"]].append(pr)
    e_max = max((pr["e_lib_min"] for prs in by.values() for pr in prs
                 if pr["e_lib_min"] is not None and pr["e_lib_min"] != float("inf")), default=2.0)
    p_max = min(10.0, max(2.0, 1.1 * e_max))
    grid = [p_max * i / 200 for i in range(201)]
    out = {}
    for label, prs in sorted(by.items()):
        if not any(pr["e_lib_min"] is not None for pr in prs):
            continue
        n = len(prs)
        out[label] = [(p, sum(pr["correct"] if p <= 0 else (pr["correct"] and pr["e_lib_min"] is not None
                                                             and pr["e_lib_min"] > p) for pr in prs) / n)
                      for p in grid]
    return out


def fast_p_png(curves: dict[str, list[tuple[float, float]]]) -> bytes | None:
    fig = _figure(7.5, 4.0)
    if fig is None:
        return None
    ax = fig.add_subplot()
    for label, pts in curves.items():
        ax.step([p for p, _ in pts], [f for _, f in pts], where="post", label=label, lw=1.5)
    ax.axvline(1.0, color="grey", lw=0.8, ls=":")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("p (E_lib threshold; 1 = library speed)")
    ax.set_ylabel("fast_p (fraction of attempted problems)")
    ax.set_title("fast_p: correct and E_lib > p on every timed workload", fontsize=10)
    ax.grid(True, lw=0.3)
    if curves:
        ax.legend(fontsize=8)
    return _png(fig)


def charts(lb: dict, ceilings: dict | None) -> dict:
    """{"roofline": png bytes | None, "fast_p": png bytes | None, "notes": [str]}."""
    notes: list[str] = []
    if not have_matplotlib():
        return {"roofline": None, "fast_p": None,
                "notes": ["charts are not available: matplotlib is not installed (pip install 'kernelgate[plot]')"]}
    pts, skipped = roofline_points(lb)
    if skipped:
        notes.append(f"roofline: {skipped} timed record(s) with no declared FLOPs are not plotted")
    if not ceilings:
        notes.append("roofline: no measured ceilings given (kernelgate report --ceilings FILE, or calibrate on the "
                     "device that produced the results): roofs are not drawn")
    roof = roofline_png(pts, ceilings) if pts else None
    if roof is None:
        notes.append("roofline: no timed record to plot")
    curves = fast_p_curves(lb)
    fp = fast_p_png(curves) if curves else None
    if fp is None:
        notes.append("fast_p: no timed record to plot")
    return {"roofline": roof, "fast_p": fp, "notes": notes}
