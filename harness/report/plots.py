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
``min(peak[unit], bandwidth * intensity)`` per measured peak. CPU-path records
have no kernel time here (:mod:`harness.report.metrics`) and are never plotted.

Kernel names: every point of a kernel whose verdict is not ``efficient`` is
labelled with its candidate and dtype where the label fits without covering
another label, and :func:`charts` returns each kernel point's pixel position
and a one-line description (``hotspots``), which the HTML report lays over the
image as hover titles, so every point can be identified, labelled or not.
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
    fig.savefig(buf, format="png", dpi=fig.dpi, metadata={"Software": None})  # pixel positions assume fig.dpi
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
        fps = e["flops"] / (e["t_kernel_ms"] * 1e-3)
        stem = e["candidate"].rsplit("/", 1)[-1].removesuffix(".py")
        pts.append({"series": f"{e['generator']}@{e['version']}", "ai": ai, "flops_per_s": fps, "library": False,
                    "name": f"{stem} {e['workload'].split('-', 1)[0]}", "flagged": e["verdict"] != "efficient",
                    "title": (f"{e['generator']}@{e['version']} {e['candidate']} · {e['problem']} {e['workload']}: "
                              f"{_flops_text(fps)}, E_lib {_num(e['E_lib'])}, U_roof {_num(e['U_roof'])}, "
                              f"{e['verdict']}")})
        if e["t_library_ms"]:
            lib[(e["problem"], e["workload"], e["run_id"])].append(e)
    for (problem, workload, _), es in sorted(lib.items()):
        t = statistics.median(x["t_library_ms"] for x in es)
        fps = es[0]["flops"] / (t * 1e-3)
        pts.append({"series": "library", "ai": es[0]["flops"] / es[0]["min_bytes"], "flops_per_s": fps,
                    "library": True, "name": problem, "flagged": False,
                    "title": f"library · {problem} {workload}: {_flops_text(fps)}, U_roof "
                             f"{_num(es[0]['U_roof_library'])}"})
    return pts, skipped


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def _tflops_number(fps: float) -> str:
    """FLOP/s in TFLOP/s, three significant digits, never in e-notation (1400, not 1.4e+03)."""
    t = fps / 1e12
    return f"{t:.0f}" if t >= 100 else f"{t:.3g}"


def _flops_text(fps: float) -> str:
    return f"{fps / 1e12:.3g} TFLOP/s" if fps >= 1e11 else f"{fps / 1e9:.3g} GFLOP/s"


HOTSPOT_RADIUS_PX = 6.0
"""Radius of a point's hover target in the report; points closer than twice this share one target (so no two
targets overlap)."""

MARKER_CLEARANCE_PX = 4.0
"""Half the side of the square around each plotted point that labels keep clear of."""

LABEL_OFFSETS_PT = ((5, 4), (5, -9), (-5, 4), (-5, -9), (0, 9), (0, -14))
"""Where a point's label may go, in points from the point (first that fits wins)."""


def _label_points(fig, ax, points: list[dict], obstacles: list | None = None) -> int:
    """Label the flagged kernel points where a label fits inside the axes, clear of other labels and points.

    ``obstacles``: artists (the roofs' labels) that labels must not cover
    either. Returns how many were labelled; the rest are named by the
    report's hover titles only.
    """
    from matplotlib.transforms import Bbox

    renderer = fig.canvas.get_renderer()
    axbox = ax.get_window_extent(renderer)
    r = MARKER_CLEARANCE_PX
    markers = {}
    for p in points:
        x, y = ax.transData.transform((p["ai"], p["flops_per_s"]))
        markers[id(p)] = Bbox.from_extents(x - r, y - r, x + r, y + r)
    placed: list = [a.get_window_extent(renderer) for a in obstacles or ()]
    n = 0
    for p in sorted((p for p in points if p["flagged"] and not p["library"]), key=lambda p: (-p["flops_per_s"], p["name"])):
        for dx, dy in LABEL_OFFSETS_PT:
            ann = ax.annotate(p["name"], (p["ai"], p["flops_per_s"]), xytext=(dx, dy), textcoords="offset points",
                              ha="left" if dx > 0 else "right" if dx < 0 else "center", fontsize=6.5,
                              color="#333333", zorder=5)
            box = ann.get_window_extent(renderer)
            inside = axbox.x0 <= box.x0 and box.x1 <= axbox.x1 and axbox.y0 <= box.y0 and box.y1 <= axbox.y1
            if (inside and not any(box.overlaps(b) for b in placed)
                    and not any(box.overlaps(b) for k, b in markers.items() if k != id(p))):
                placed.append(box)
                n += 1
                break
            ann.remove()
    return n


PEAK_LABEL_GAP = 1.08
"""Peaks closer than this factor share one roof line and one label (fp16 and bf16 are usually 1% apart,
and two labels that close overlap)."""


def _peak_groups(peaks: dict[str, float]) -> list[list[str]]:
    """Units grouped so that consecutive peaks of a group are within :data:`PEAK_LABEL_GAP` of each other."""
    groups: list[list[str]] = []
    for unit in sorted(peaks, key=peaks.__getitem__):
        if groups and peaks[unit] <= peaks[groups[-1][-1]] * PEAK_LABEL_GAP:
            groups[-1].append(unit)
        else:
            groups.append([unit])
    return groups


def roofline_chart(points: list[dict], ceilings: dict | None) -> dict | None:
    """{"png": bytes, "width_px", "height_px", "hotspots": [{x_px, y_px, title}], "n_labelled"}; None without matplotlib.

    ``hotspots`` are pixel positions in the PNG (origin top left) with a
    title naming the point, for hover titles over the image; points within
    twice :data:`HOTSPOT_RADIUS_PX` of each other share one hotspot whose title
    has a line per point, so no point hides another's name.
    """
    fig = _figure(9.6, 5.8)
    if fig is None:
        return None
    ax = fig.add_subplot()
    roof_labels: list = []
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
        for group in _peak_groups(peaks):
            top = max(peaks[u] for u in group)
            ax.plot(xs, [min(bw * x, top) for x in xs], color="grey", lw=0.8, ls="--")
            text = ", ".join(f"{u} {_tflops_number(peaks[u])}" for u in sorted(group, key=lambda u: -peaks[u]))
            roof_labels.append(ax.annotate(f"{text} TFLOP/s", (hi, top), xytext=(-4, 3), textcoords="offset points",
                                           ha="right", fontsize=7, color="dimgrey"))
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOPs / minimum bytes)")
    ax.set_ylabel("achieved FLOP/s")
    ax.set_title("Roofline" + ("" if ceilings else " (no measured ceilings)"), fontsize=10)
    ax.grid(True, which="major", lw=0.3)
    if points:
        ax.legend(fontsize=7, loc="lower right")
    fig.canvas.draw()  # fixes the constrained layout, so label boxes and pixel positions are final
    n_labelled = _label_points(fig, ax, points, roof_labels + ([ax.get_legend()] if ax.get_legend() else []))
    fig.canvas.draw()
    width, height = fig.canvas.get_width_height()
    hotspots: list[dict] = []
    for p in points:
        x, y = ax.transData.transform((p["ai"], p["flops_per_s"]))
        x, y = round(float(x), 1), round(height - float(y), 1)
        near = next((h for h in hotspots if (h["x_px"] - x) ** 2 + (h["y_px"] - y) ** 2 < (2 * HOTSPOT_RADIUS_PX) ** 2),
                    None)
        if near is not None:  # points this close share one target, which names them all
            near["title"] += "\n" + p["title"]
        else:
            hotspots.append({"x_px": x, "y_px": y, "title": p["title"]})
    return {"png": _png(fig), "width_px": width, "height_px": height, "hotspots": hotspots, "n_labelled": n_labelled}


def roofline_png(points: list[dict], ceilings: dict | None) -> bytes | None:
    """The roofline chart as PNG bytes (:func:`roofline_chart` without the hotspots)."""
    chart = roofline_chart(points, ceilings)
    return chart["png"] if chart else None


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
    fig = _figure(6.0, 4.0)
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
    """{"roofline": png bytes | None, "fast_p": png bytes | None, "roofline_map": {width_px, height_px, hotspots} | None,
    "notes": [str]}."""
    notes: list[str] = []
    if not have_matplotlib():
        return {"roofline": None, "fast_p": None, "roofline_map": None,
                "notes": ["charts are not available: matplotlib is not installed (pip install 'kernelgate[plot]')"]}
    pts, skipped = roofline_points(lb)
    if skipped:
        notes.append(f"roofline: {skipped} timed record(s) with no declared FLOPs are not plotted")
    n_cpu = sum(e["cpu_path"] and e["status"] == "PASSED" for e in lb["entries"])
    if n_cpu:
        notes.append(f"roofline and fast_p: {n_cpu} PASSED record(s) of the CPU path are not plotted "
                     "(CPU path: correctness only, no performance verdict)")
    if not ceilings:
        notes.append("roofline: no measured ceilings given (kernelgate report --ceilings FILE, or calibrate on the "
                     "device that produced the results): roofs are not drawn")
    roof = roofline_chart(pts, ceilings) if pts else None
    if roof is None:
        notes.append("roofline: no timed record to plot")
    curves = fast_p_curves(lb)
    fp = fast_p_png(curves) if curves else None
    if fp is None:
        notes.append("fast_p: no timed record to plot")
    return {"roofline": roof["png"] if roof else None, "fast_p": fp, "notes": notes,
            "roofline_map": {k: roof[k] for k in ("width_px", "height_px", "hotspots", "n_labelled")} if roof else None}
