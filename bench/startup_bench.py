#!/usr/bin/env python3
"""Wall time of short dplace commands, process start included (bench/RESULTS.md, "Start-up").

Runs each command --runs times, one after the other, and prints its minimum and median in seconds
as a markdown table row. Usage:

    /usr/bin/python3 bench/startup_bench.py --dplace build/bin/dplace [--runs 20]
"""
import argparse
import statistics
import subprocess
import time

COMMANDS = [
    ["--version"],
    ["info", "two_tower"],
    ["info", "nmt"],
    ["simulate", "nmt", "--cluster", "paper-k80x4", "--placement", "expert"],
    ["place", "inception_v3", "--cluster", "paper-k80x4", "--placer", "heft"],
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dplace", required=True, help="the dplace binary")
    parser.add_argument("--runs", type=int, default=20, help="runs per command (default 20)")
    args = parser.parse_args()
    print("| command | min | median |")
    print("|---|---:|---:|")
    for command in COMMANDS:
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            subprocess.run([args.dplace] + command, check=True, stdout=subprocess.DEVNULL)
            times.append(time.perf_counter() - start)
        print(f"| `dplace {' '.join(command)}` | {min(times):.3f} s | "
              f"{statistics.median(times):.3f} s |")


if __name__ == "__main__":
    main()
