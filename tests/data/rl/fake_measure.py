#!/usr/bin/python3
"""A stand-in for a real measurement command, used by the RL placer tests.

Usage: fake_measure.py PLACEMENT.json [--fail | --garbage | --hang-on-cpu] [--log FILE]
Reads a dplace.placement/1 file and prints a made-up step time in seconds: 1 ms, plus 10 ms per
op on /cpu:0, plus 1 ms per device used beyond the first. Prints "oom" when op A1 is on /gpu:1.
--fail exits with status 3; --garbage prints something that is not a time; --hang-on-cpu sleeps
for a minute (a hung run) when any op is on /cpu:0; --log appends one line to FILE per measurement.
"""
import json
import sys
import time

with open(sys.argv[1]) as f:
    placement = json.load(f)
assert placement["format"] == "dplace.placement/1"
assignment = placement["assignment"]
if "--fail" in sys.argv:
    print("simulated crash", file=sys.stderr)
    sys.exit(3)
if "--garbage" in sys.argv:
    print("step time: fast")
    sys.exit(0)
if "--log" in sys.argv:
    with open(sys.argv[sys.argv.index("--log") + 1], "a") as log:
        log.write(sys.argv[1] + "\n")
print("measuring...")
if assignment.get("A1") == "/gpu:1":
    print("OOM")
    sys.exit(0)
on_cpu = sum(1 for d in assignment.values() if d == "/cpu:0")
if "--hang-on-cpu" in sys.argv and on_cpu > 0:
    sys.stdout.flush()
    time.sleep(60)
devices = len(set(assignment.values()))
print(f"{1e-3 + 10e-3 * on_cpu + 1e-3 * (devices - 1):.9f}")
