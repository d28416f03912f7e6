#!/usr/bin/python3
"""Learning placers head to head (bench/RESULTS.md, "Post against rl").

For each workload MODEL@CLUSTER, each placer of --placers (default rl,post) and each seed it runs
  dplace place MODEL --cluster CLUSTER --placer P --budget-seconds B --seed S --json [--param k=v]
and writes OUT/summary.json and OUT/summary.md: the step time found, the learned step time before
the polishing (from the note's "learned T s"; the step time itself with --param polish=0), the
samples, samples per second and the policy's share of the learning's time (from the note).

Usage (from the repository root):
  /usr/bin/python3 bench/learners_bench.py --dplace build/bin/dplace --out build/bench-learners \
      [--workloads nmt@paper-k80x4,...] [--placers rl,post] [--budget-seconds 60] [--seeds 1,2]
      [--param key=value ...] [--inference] [--batch N]
Any placer may be listed (a classic one's samples are 0 and its policy share n/a). --param goes to
every placer listed (scope it, e.g. hsdag.parse=0, to reach one); --inference places the models'
forward graphs, --batch N sets their batch size.
Standard library only.
"""
import argparse
import json
import os
import re
import subprocess
import sys

from rl_bench import DEFAULT_WORKLOADS  # the 2017 paper's six cells, as rl_bench runs them


def place(dplace, model, cluster, placer, budget, seed, params, inference=False, batch=None):
    cmd = [dplace, "place", model] + (["--inference"] if inference else []) + (
        ["--batch", str(batch)] if batch else []) + [
        "--cluster", cluster, "--placer", placer, "--budget-seconds", str(budget), "--seed",
        str(seed), "--json"]
    for p in params:
        cmd += ["--param", p]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"learners_bench: {' '.join(cmd)} failed with status {proc.returncode}:\n"
                 f"{proc.stderr}")
    result = json.loads(proc.stdout)
    note = result.get("note", "")
    samples = re.search(r"(\d+) samples", note)
    learned = re.search(r"learned ([0-9.e+-]+) s", note)
    policy = re.search(r"policy (\d+)%", note)
    return {
        "command": " ".join(cmd),
        "step_time_s": result["step_time_s"],
        "feasible": result["feasible"],
        "learned_s": float(learned.group(1)) if learned else result["step_time_s"],
        "samples": int(samples.group(1)) if samples else 0,
        "seconds": result["placement_seconds"],
        "policy_share": int(policy.group(1)) if policy else None,
        "note": note,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dplace", default="build/bin/dplace")
    ap.add_argument("--out", default="build/bench-learners")
    ap.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS))
    ap.add_argument("--placers", default="rl,post")
    ap.add_argument("--budget-seconds", type=float, default=60)
    ap.add_argument("--seeds", default="1")
    ap.add_argument("--param", action="append", default=[], help="key=value for every placer")
    ap.add_argument("--inference", action="store_true", help="the models' forward graphs only")
    ap.add_argument("--batch", type=int, help="the models' batch size (default: each model's)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    rows = []
    for spec in args.workloads.split(","):
        model, cluster = spec.split("@")
        for seed in [int(s) for s in args.seeds.split(",")]:
            for placer in args.placers.split(","):
                print(f"learners_bench: {spec} {placer} seed {seed}", file=sys.stderr, flush=True)
                r = place(args.dplace, model, cluster, placer, args.budget_seconds, seed,
                          args.param, args.inference, args.batch)
                r.update({"model": model, "cluster": cluster, "placer": placer, "seed": seed})
                rows.append(r)
                with open(os.path.join(args.out, "summary.json"), "w") as f:
                    json.dump({"budget_seconds": args.budget_seconds, "params": args.param,
                               "rows": rows}, f, indent=1)

    def ms(seconds, feasible=True):
        return f"{seconds * 1e3:.1f}" + ("" if feasible else " (OOM)")

    lines = ["| workload | seed | placer | step time (ms) | learned (ms) | samples (per s) "
             "| policy share |", "|---|---:|---|---:|---:|---:|---:|"]
    for r in rows:
        share = "n/a" if r["policy_share"] is None else f"{r['policy_share']}%"
        rate = r["samples"] / max(r["seconds"], 1e-9)
        lines.append(f"| {r['model']} @ {r['cluster']} | {r['seed']} | {r['placer']} | "
                     f"{ms(r['step_time_s'], r['feasible'])} | {ms(r['learned_s'])} | "
                     f"{r['samples']} ({rate:.0f}) | {share} |")
    table = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(table)
    print(table)


if __name__ == "__main__":
    main()
