#!/usr/bin/python3
"""RL placer benchmark: the `rl` placer against the classic placers (bench/RESULTS.md, "RL placer").

For each workload MODEL@CLUSTER it runs, through the dplace command line,
  dplace compare MODEL --cluster CLUSTER --placers single-gpu,expert,scotch,mincut,heft,m-etf,anneal
                 --budget-seconds B --seed S --json
  dplace place   MODEL --cluster CLUSTER --placer rl --budget-seconds B --seed S --json --progress
                 --param curve=OUT/curve_MODEL_CLUSTER.csv [--param key=value ...]
  dplace place   MODEL --cluster CLUSTER --placer anneal --param evaluations=10N --param rounds=8
                 --param starts=1 --json
(N: anneal's default evaluations, read from its note; rounds of 10N moves, up to 8 in waves of two,
is how rl polishes its learned placement, so the "anneal 10x, rounds" column is the classic search
given the same effort from its own best start) and writes OUT/summary.json,
OUT/summary.md (the markdown table for RESULTS.md) and, with bench/plot_rl_curves.py, the
learning-curve SVG.

Usage (from the repository root):
  /usr/bin/python3 bench/rl_bench.py --dplace build/bin/dplace --out bench/results/rl \
      [--workloads nmt@paper-k80x4[:SECONDS],...] [--budget-seconds 600] [--seed 1] [--param key=value ...]
      [--svg docs/rl_learning_curves.svg]
Standard library only.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

DEFAULT_WORKLOADS = [
    "nmt@paper-k80x4",
    "inception_v3@paper-k80x4",
    "nmt@paper-k80x2",
    "inception_v3@paper-k80x2",
    "rnnlm@paper-k80x4",
    "rnnlm@paper-k80x2",
]
CLASSIC = ["single-gpu", "expert", "scotch", "mincut", "heft", "m-etf", "anneal"]


def run(cmd, log_path=None):
    start = time.monotonic()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seconds = time.monotonic() - start
    if log_path:
        with open(log_path, "w") as f:
            f.write(" ".join(cmd) + "\n" + proc.stderr)
    if proc.returncode != 0:
        sys.exit(f"rl_bench: {' '.join(cmd)} failed with status {proc.returncode}:\n{proc.stderr}")
    return json.loads(proc.stdout), seconds


def faster_or_slower(t, reference):
    change = (1 - t / reference) * 100
    return f"{change:.1f}% faster" if change >= 0 else f"{-change:.1f}% slower"


def fmt_ms(seconds):
    return f"{seconds * 1e3:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dplace", default="build/bin/dplace")
    ap.add_argument("--out", default="bench/results/rl")
    ap.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS))
    ap.add_argument("--budget-seconds", type=float, default=600)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--param", action="append", default=[], help="rl option key=value")
    ap.add_argument("--skip-classic", action="store_true",
                    help="reuse the classic rows of an earlier OUT/summary.json")
    ap.add_argument("--svg", default="docs/rl_learning_curves.svg")
    ap.add_argument("--render-only", action="store_true",
                    help="only redraw the table and SVG from OUT/summary.json")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    summary_path = os.path.join(args.out, "summary.json")
    previous = {}
    if args.skip_classic and os.path.exists(summary_path):
        with open(summary_path) as f:
            previous = {(w["model"], w["cluster"]): w for w in json.load(f)["workloads"]}

    workloads = []
    if args.render_only:
        with open(summary_path) as f:
            workloads = json.load(f)["workloads"]
    for spec in ([] if args.render_only else args.workloads.split(",")):
        spec, _, seconds = spec.partition(":")
        budget = float(seconds) if seconds else args.budget_seconds
        model, cluster = spec.split("@")
        tag = f"{model}_{cluster}"
        entry = {"model": model, "cluster": cluster}
        if (model, cluster) in previous:
            entry["classic"] = previous[(model, cluster)]["classic"]
        else:
            print(f"rl_bench: {spec}: classic placers", file=sys.stderr, flush=True)
            classic, _ = run([args.dplace, "compare", model, "--cluster", cluster, "--placers",
                              ",".join(CLASSIC), "--budget-seconds", str(args.budget_seconds),
                              "--seed", str(args.seed), "--json"])
            entry["classic"] = classic["rows"]
        if (model, cluster) in previous and "anneal_rounds" in previous[(model, cluster)]:
            entry["anneal_rounds"] = previous[(model, cluster)]["anneal_rounds"]
        else:
            anneal = next(r for r in entry["classic"] if r.get("placer") == "anneal")
            moves = int(re.search(r"(\d+) moves", anneal["note"]).group(1))
            print(f"rl_bench: {spec}: anneal with rounds of {10 * moves} evaluations",
                  file=sys.stderr, flush=True)
            entry["anneal_rounds"], _ = run([args.dplace, "place", model, "--cluster", cluster,
                                          "--placer", "anneal", "--param",
                                          f"evaluations={10 * moves}", "--param", "rounds=8",
                                          "--param", "starts=1",
                                          "--budget-seconds",
                                          str(args.budget_seconds), "--seed", str(args.seed),
                                          "--json"])
        print(f"rl_bench: {spec}: rl", file=sys.stderr, flush=True)
        curve = os.path.join(args.out, f"curve_{tag}.csv")
        if os.path.exists(curve):
            os.remove(curve)
        cmd = [args.dplace, "place", model, "--cluster", cluster, "--placer", "rl",
               "--budget-seconds", str(budget), "--seed", str(args.seed), "--json",
               "--progress", "--param", f"curve={curve}"]
        for p in args.param:
            cmd += ["--param", p]
        rl, seconds = run(cmd, os.path.join(args.out, f"log_{tag}.txt"))
        entry["rl"] = rl
        # The note says "rl: G groups, N samples (...)"; "evaluations" counts only the placements
        # simulated (identical samples of a batch are simulated once).
        match = re.search(r"(\d+) samples", rl.get("note", ""))
        entry["rl_samples"] = int(match.group(1)) if match else rl.get("evaluations", 0)
        # With polishing the note goes on "...; polished by anneal: learned T s, polished ...".
        match = re.search(r"learned ([0-9.e+-]+) s", rl.get("note", ""))
        entry["rl_learned_s"] = float(match.group(1)) if match else rl["step_time_s"]
        entry["rl_wall_seconds"] = seconds
        entry["rl_budget_seconds"] = budget
        entry["curve"] = os.path.basename(curve)
        workloads.append(entry)
        with open(summary_path, "w") as f:
            json.dump({"budget_seconds": args.budget_seconds, "seed": args.seed,
                       "params": args.param, "workloads": workloads}, f, indent=1)

    lines = ["| workload | " + " | ".join(CLASSIC) + " | anneal 10x, rounds | rl learned | rl "
             "| rl vs expert | rl vs best classic | rl vs anneal 10x, rounds | rl samples (per s) "
             "| rl wall s |",
             "|---|" + "---|" * (len(CLASSIC) + 8)]
    for w in workloads:
        by_name = {r["placer"]: r for r in w["classic"] if "placer" in r}
        cells = []
        best_classic = None
        for name in CLASSIC:
            r = by_name.get(name)
            if r is None or "step_time_s" not in r:
                cells.append("n/a")
                continue
            cell = fmt_ms(r["step_time_s"]) + ("" if r["feasible"] else " (OOM)")
            cells.append(cell)
            if r["feasible"] and (best_classic is None or r["step_time_s"] < best_classic[1]):
                best_classic = (name, r["step_time_s"])
        rl = w["rl"]
        rl_t = rl["step_time_s"]
        expert = by_name.get("expert")
        vs_expert = "n/a"
        if expert and expert.get("feasible"):
            vs_expert = faster_or_slower(rl_t, expert["step_time_s"])
        vs_best = "n/a"
        if best_classic:
            vs_best = f"{faster_or_slower(rl_t, best_classic[1])} ({best_classic[0]})"
        long = w.get("anneal_rounds")
        long_cell, vs_long = "n/a", "n/a"
        if long:
            long_cell = fmt_ms(long["step_time_s"]) + ("" if long["feasible"] else " (OOM)")
            if long["feasible"]:
                vs_long = faster_or_slower(rl_t, long["step_time_s"])
        learned = fmt_ms(w.get("rl_learned_s", rl_t))
        samples = w.get("rl_samples", rl.get("evaluations", 0))
        rate = samples / max(rl["placement_seconds"], 1e-9)
        lines.append(f"| {w['model']} @ {w['cluster']} | " + " | ".join(cells) +
                     f" | {long_cell} | {learned} | **{fmt_ms(rl_t)}**"
                     f"{'' if rl['feasible'] else ' (OOM)'} | {vs_expert} | {vs_best} | {vs_long} | "
                     f"{samples} ({rate:.0f}) | {rl['placement_seconds']:.0f} |")
    table = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(table)
    print(table)
    if args.svg:
        here = os.path.dirname(os.path.abspath(__file__))
        subprocess.run([sys.executable, os.path.join(here, "plot_rl_curves.py"), summary_path,
                        args.svg], check=True)


if __name__ == "__main__":
    main()
