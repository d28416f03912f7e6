#!/usr/bin/python3
"""Draws the RL placer's learning curves as one SVG (standard library only).

Usage: plot_rl_curves.py OUT/summary.json docs/rl_learning_curves.svg

One panel per workload of the summary written by bench/rl_bench.py: the best step time found so
far (solid) and each update's batch mean (light) against wall-clock seconds, from the curve CSV
(`--param curve=...`), with dashed lines at the expert placement and at the best classic placer,
and a dotted vertical line at each restart (fresh weights), labelled with the grouping the restart
turns to where the run has two (`shared-weights=alternate` on a graph with shared weights).
"""
import csv
import json
import math
import os
import sys

PANEL_W, PANEL_H = 420, 260
MARGIN_L, MARGIN_R, MARGIN_T, MARGIN_B = 62, 16, 30, 42
COLUMNS = 2


def nice_ticks(lo, hi, n=5):
    span = hi - lo
    if span <= 0:
        return [lo]
    raw = span / n
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=10 * mag)
    first = math.ceil(lo / step) * step
    ticks = []
    t = first
    while t <= hi + 1e-9 * span:
        ticks.append(round(t, 10))
        t += step
    return ticks


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def binned(rows, bins=300):
    """At most `bins` points per curve: the batch mean averaged and the best-so-far taken at the
    end of each run of updates, so the SVG stays small for curves of 10,000+ updates."""
    step = max(1, math.ceil(len(rows) / bins))
    xs, best, mean = [], [], []
    for i in range(0, len(rows), step):
        chunk = rows[i:i + step]
        xs.append(float(chunk[-1]["elapsed_s"]))
        best.append(float(chunk[-1]["best_step_time_s"]) * 1e3)
        mean.append(sum(float(r["mean_step_time_s"]) for r in chunk) * 1e3 / len(chunk))
    return xs, best, mean


def restarts(rows):
    """(elapsed seconds, grouping name) at the first update after each restart. The CSV counts a
    restart on the update that triggers it, so the new turn (fresh weights, coarsest level, maybe
    the other grouping) starts on the next row. The name is empty where the run has a single
    grouping (or the CSV predates the column)."""
    groupings = {r.get("grouping", "") for r in rows}
    marks = []
    for prev, r, first in zip(rows, rows[1:], rows[2:]):
        if int(r.get("restarts", 0)) > int(prev.get("restarts", 0)):
            name = first.get("grouping", "") if len(groupings) > 1 else ""
            marks.append((float(first["elapsed_s"]), name))
    return marks


def panel(ox, oy, w, curve_rows):
    out = []
    xs, best, mean = binned(curve_rows)
    by_name = {r["placer"]: r for r in w["classic"] if "step_time_s" in r}
    refs = []
    expert = by_name.get("expert")
    if expert and expert["feasible"]:
        refs.append(("expert", expert["step_time_s"] * 1e3, "#d62728"))
    feasible = [r for r in by_name.values() if r["feasible"]]
    if feasible:
        b = min(feasible, key=lambda r: r["step_time_s"])
        refs.append((f"best classic ({b['placer']})", b["step_time_s"] * 1e3, "#2ca02c"))
    x_max = max(xs[-1] if xs else 1, 1)
    lo = min(best + [v for _, v, _ in refs]) if best else 0
    # The batch mean starts far above; clip the axis at 1.6 x the expert (or the first best).
    cap = max([v for _, v, _ in refs] + [best[0] if best else 1]) * 1.35
    hi = cap
    lo = lo * 0.92
    pw = PANEL_W - MARGIN_L - MARGIN_R
    ph = PANEL_H - MARGIN_T - MARGIN_B

    def px(x):
        return ox + MARGIN_L + pw * x / x_max

    def py(y):
        y = min(max(y, lo), hi)
        return oy + MARGIN_T + ph * (1 - (y - lo) / (hi - lo))

    title = f"{w['model']} @ {w['cluster']}"
    if "rl_budget_seconds" in w:
        title += f" ({w['rl_budget_seconds']:g} s)"
    out.append(f'<text x="{ox + MARGIN_L}" y="{oy + 18}" font-size="13" '
               f'font-weight="bold">{esc(title)}</text>')
    out.append(f'<rect x="{ox + MARGIN_L}" y="{oy + MARGIN_T}" width="{pw}" height="{ph}" '
               f'fill="none" stroke="#888"/>')
    for t in nice_ticks(lo, hi):
        y = py(t)
        out.append(f'<line x1="{ox + MARGIN_L - 4}" y1="{y:.1f}" x2="{ox + MARGIN_L + pw}" '
                   f'y2="{y:.1f}" stroke="#eee"/>')
        out.append(f'<text x="{ox + MARGIN_L - 6}" y="{y + 4:.1f}" font-size="10" '
                   f'text-anchor="end">{t:g}</text>')
    for t in nice_ticks(0, x_max):
        x = px(t)
        out.append(f'<line x1="{x:.1f}" y1="{oy + MARGIN_T + ph}" x2="{x:.1f}" '
                   f'y2="{oy + MARGIN_T + ph + 4}" stroke="#888"/>')
        out.append(f'<text x="{x:.1f}" y="{oy + MARGIN_T + ph + 16}" font-size="10" '
                   f'text-anchor="middle">{t:g}</text>')
    out.append(f'<text x="{ox + MARGIN_L + pw / 2}" y="{oy + PANEL_H - 8}" font-size="11" '
               f'text-anchor="middle">wall-clock seconds</text>')
    out.append(f'<text x="{ox + 14}" y="{oy + MARGIN_T + ph / 2}" font-size="11" '
               f'text-anchor="middle" transform="rotate(-90 {ox + 14} '
               f'{oy + MARGIN_T + ph / 2})">step time (ms)</text>')
    label_x, label_y = -1e9, oy + MARGIN_T + ph - 4
    for t, grouping in restarts(curve_rows):
        x = px(t)
        out.append(f'<line x1="{x:.1f}" y1="{oy + MARGIN_T}" x2="{x:.1f}" y2="{oy + MARGIN_T + ph}" '
                   f'stroke="#999" stroke-dasharray="1,3"/>')
        if grouping:
            # Labels of restarts closer than a word's width stack upwards instead of overlapping.
            label_y = label_y - 11 if x - label_x < 36 else oy + MARGIN_T + ph - 4
            label_x = x
            out.append(f'<text x="{x + 3:.1f}" y="{label_y}" font-size="9" '
                       f'fill="#666">{esc(grouping)}</text>')
    if xs:
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, mean))
        out.append(f'<polyline points="{pts}" fill="none" stroke="#9ecae1" stroke-width="1"/>')
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, best))
        out.append(f'<polyline points="{pts}" fill="none" stroke="#1f77b4" stroke-width="2"/>')
    ly = oy + MARGIN_T + 14
    for name, v, color in refs:
        y = py(v)
        out.append(f'<line x1="{ox + MARGIN_L}" y1="{y:.1f}" x2="{ox + MARGIN_L + pw}" '
                   f'y2="{y:.1f}" stroke="{color}" stroke-dasharray="5,4"/>')
        out.append(f'<text x="{ox + MARGIN_L + pw - 4}" y="{y - 4:.1f}" font-size="10" '
                   f'fill="{color}" text-anchor="end">{esc(name)} {v:.1f}</text>')
    out.append(f'<text x="{ox + MARGIN_L + 6}" y="{ly}" font-size="10" fill="#1f77b4">'
               f'rl learned {w.get("rl_learned_s", w["rl"]["step_time_s"]) * 1e3:.1f} ms, '
               f'polished {w["rl"]["step_time_s"] * 1e3:.1f} ms, '
               f'{w.get("rl_samples", w["rl"]["evaluations"])} samples</text>')
    out.append(f'<text x="{ox + MARGIN_L + 6}" y="{ly + 13}" font-size="10" fill="#6baed6">'
               f'batch mean</text>')
    return out


def main():
    summary_path, svg_path = sys.argv[1], sys.argv[2]
    with open(summary_path) as f:
        summary = json.load(f)
    base = os.path.dirname(summary_path)
    workloads = summary["workloads"]
    rows = math.ceil(len(workloads) / COLUMNS)
    width = PANEL_W * min(COLUMNS, len(workloads))
    height = PANEL_H * rows + 24
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif">',
             f'<rect width="{width}" height="{height}" fill="white"/>',
             f'<text x="8" y="16" font-size="12">dplace rl placer: learning curves '
             f'(seed {summary["seed"]}; batch mean averaged over runs of updates; dotted: '
             f'restarts)</text>']
    for i, w in enumerate(workloads):
        with open(os.path.join(base, w["curve"])) as f:
            curve_rows = list(csv.DictReader(f))
        ox = (i % COLUMNS) * PANEL_W
        oy = 24 + (i // COLUMNS) * PANEL_H
        parts += panel(ox, oy, w, curve_rows)
    parts.append("</svg>")
    os.makedirs(os.path.dirname(os.path.abspath(svg_path)), exist_ok=True)
    with open(svg_path, "w") as f:
        f.write("\n".join(parts) + "\n")


if __name__ == "__main__":
    main()
