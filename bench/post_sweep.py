#!/usr/bin/python3
"""Post's defaults (docs/post.md, "What the paper leaves open"): one option varied at a time.

Each row runs, for a fixed number of samples (so the result does not depend on the machine's
speed; one thread per run, two runs side by side),
  dplace place MODEL --cluster CLUSTER --placer post --param polish=0 --param samples=N
                     --param threads=1 --budget-seconds 3600 --seed S --json [--param k=v]
and the table gives the learned step time.

Usage (from the repository root):
  /usr/bin/python3 bench/post_sweep.py --dplace build/bin/dplace [--samples 40000] [--long]
Standard library only.
"""
import argparse
import concurrent.futures
import json
import subprocess
import sys

# (workload, seed, params): the default first, then one change each.
RUNS = [("nmt@paper-k80x4", 1, [])] + [
    ("nmt@paper-k80x4", 1, [p]) for p in ["mix=0.1", "mix=0.02", "mix=0.005", "elite=0.05",
                                          "elite=0.2", "ce-every=4", "ce-every=16", "lr=0.05",
                                          "lr=0.2", "batch=32", "epochs=0",
                                          "restart-patience=0"]
] + [("nmt@paper-k80x4", 2, []), ("nmt@paper-k80x4", 2, ["restart-patience=0"])] + [
    (w, 1, p) for w in ["inception_v3@paper-k80x4", "rnnlm@paper-k80x2"]
    for p in [[], ["mix=0.1"], ["mix=0.02"], ["mix=0.005"], ["lr=0.05"], ["epochs=0"],
              ["restart-patience=0"]]
] + [("inception_v3@paper-k80x4", 2, p) for p in [[], ["lr=0.05"], ["epochs=0"]]]
# With --long (300,000 samples): what the restarts are worth once the distribution converges.
RUNS_LONG = [(w, 1, p) for w in ["inception_v3@paper-k80x4", "rnnlm@paper-k80x2"]
             for p in [[], ["restart-patience=0"]]]


def run(dplace, samples, workload, seed, params):
    model, cluster = workload.split("@")
    cmd = [dplace, "place", model, "--cluster", cluster, "--placer", "post", "--param", "polish=0",
           "--param", f"samples={samples}", "--param", "threads=1", "--budget-seconds", "3600",
           "--seed", str(seed), "--json"]
    for p in params:
        cmd += ["--param", p]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"post_sweep: {' '.join(cmd)} failed:\n{proc.stderr}")
    return json.loads(proc.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dplace", default="build/bin/dplace")
    ap.add_argument("--samples", type=int, default=40000)
    ap.add_argument("--long", action="store_true",
                    help="the restart rows at 300,000 samples instead of the sweep")
    args = ap.parse_args()
    runs, samples = (RUNS_LONG, 300000) if args.long else (RUNS, args.samples)
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda r: run(args.dplace, samples, *r), runs))
    print("| workload | seed | change from the defaults | learned step time (ms) |")
    print("|---|---:|---|---:|")
    for (workload, seed, params), r in zip(runs, results):
        change = ", ".join(params) if params else "none (defaults)"
        oom = "" if r["feasible"] else " (OOM)"
        print(f"| {workload.replace('@', ' @ ')} | {seed} | {change} | "
              f"{r['step_time_s'] * 1e3:.1f}{oom} |")


if __name__ == "__main__":
    main()
