#!/usr/bin/env python3
"""One placer on every built-in model and cluster preset, against a baseline binary (RESULTS.md).

For every model of `dplace models`, every preset of `dplace clusters` and both the training and
the inference graph it runs

    dplace place MODEL --cluster CLUSTER [--inference] --placer P --budget-seconds B --seed S --json
                 [--param key=value ...]

with --dplace and, when given, with --baseline (e.g. the binary of the previous commit), one cell
after the other, and prints a markdown table of the cells whose step time differs, then a summary:
how many cells got faster or slower and the geometric mean of new / baseline step time. The
default budget is generous so that placers with a fixed amount of work (anneal's evaluations)
finish it and the figures do not depend on the machine's speed; a cell that hit the budget is
marked. --csv FILE writes every cell. Standard library only. Usage (from the repository root):

    /usr/bin/python3 bench/placer_sweep.py --dplace build/bin/dplace --baseline OLD/dplace \\
        --placer anneal [--param key=value ...] [--csv build/sweep.csv]
"""
import argparse
import csv
import json
import math
import subprocess
import sys


def names(dplace, what):
    out = subprocess.run([dplace, what, "--json"], check=True, capture_output=True, text=True)
    return [entry["name"] for entry in json.loads(out.stdout)[what]]


def place(dplace, model, cluster, inference, args):
    cmd = [dplace, "place", model, "--cluster", cluster, "--placer", args.placer,
           "--budget-seconds", str(args.budget_seconds), "--seed", str(args.seed), "--json"]
    if inference:
        cmd.append("--inference")
    for p in args.param:
        cmd += ["--param", p]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": out.stderr.strip()}
    return json.loads(out.stdout)


def cell_text(r):
    if "error" in r:
        return "error"
    text = f"{r['step_time_s'] * 1e3:.4g} ms"
    if not r["feasible"]:
        text += " (OOM)"
    if "the result depends on machine speed" in r.get("note", ""):  # cut by --budget-seconds
        text += " (budget)"
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dplace", required=True)
    ap.add_argument("--baseline", help="a second dplace binary to compare against")
    ap.add_argument("--placer", required=True)
    ap.add_argument("--param", action="append", default=[], help="placer option key=value")
    ap.add_argument("--budget-seconds", type=float, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--csv", help="write every cell here")
    args = ap.parse_args()

    rows = []
    for model in names(args.dplace, "models"):
        for cluster in names(args.dplace, "clusters"):
            for inference in (False, True):
                new = place(args.dplace, model, cluster, inference, args)
                old = place(args.baseline, model, cluster, inference, args) if args.baseline else None
                rows.append({"model": model, "cluster": cluster, "inference": inference,
                             "new": new, "old": old})
                print(f"placer_sweep: {model} {cluster}{' inference' if inference else ''}: "
                      f"{cell_text(new)}" + (f" (baseline {cell_text(old)})" if old else ""),
                      file=sys.stderr, flush=True)

    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["model", "cluster", "graph", "step_time_s", "feasible", "seconds",
                        "baseline_step_time_s", "baseline_feasible", "note"])
            for r in rows:
                new, old = r["new"], r["old"] or {}
                w.writerow([r["model"], r["cluster"], "inference" if r["inference"] else "training",
                            new.get("step_time_s", ""), new.get("feasible", ""),
                            new.get("placement_seconds", ""), old.get("step_time_s", ""),
                            old.get("feasible", ""), new.get("note", new.get("error", ""))])

    if not args.baseline:
        return
    print("| model | cluster | graph | baseline | new | change |")
    print("|---|---|---|---:|---:|---:|")
    faster = slower = compared = 0
    log_sum = 0.0
    for r in rows:
        new, old = r["new"], r["old"]
        if "error" in new or "error" in old or new["feasible"] != old["feasible"]:
            if cell_text(new) != cell_text(old):
                print(f"| {r['model']} | {r['cluster']} | "
                      f"{'inference' if r['inference'] else 'training'} | {cell_text(old)} | "
                      f"{cell_text(new)} | |")
            continue
        ratio = new["step_time_s"] / old["step_time_s"]
        compared += 1
        log_sum += math.log(ratio)
        if abs(ratio - 1) < 1e-9:
            continue
        faster += ratio < 1
        slower += ratio > 1
        print(f"| {r['model']} | {r['cluster']} | {'inference' if r['inference'] else 'training'} "
              f"| {cell_text(old)} | {cell_text(new)} | {(ratio - 1) * 100:+.1f}% |")
    print(f"\n{len(rows)} cells, {compared} compared (both ran, same feasibility): {faster} faster, "
          f"{slower} slower, {compared - faster - slower} the same; geometric mean of new / "
          f"baseline step time {math.exp(log_sum / max(compared, 1)):.4f}")


if __name__ == "__main__":
    main()
