#!/usr/bin/env python3
"""Writes a dplace.graph/1 chain: an Input then N Relu ops of 1 MFLOP each, one after another.

The graph of bench/RESULTS.md's "Time limits that hold" row and docs/placers.md's m-sct note
(chain200k.json: N = 200,000), where Clp's presolve grows quadratically. Usage:

    /usr/bin/python3 bench/chain_graph.py --ops 200000 --out build/chain200k.json
"""
import argparse
import json


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=200000, help="Relu ops after the Input")
    parser.add_argument("--out", required=True, help="file to write")
    args = parser.parse_args()
    if args.ops < 1:
        parser.error("--ops must be at least 1")
    ops = [{"name": "x", "type": "Input", "output_bytes": 4096}]
    for i in range(args.ops):
        ops.append({"name": f"r{i}", "type": "Relu", "inputs": [ops[-1]["name"]],
                    "flops": 1e6, "output_bytes": 4096})
    with open(args.out, "w") as f:
        json.dump({"format": "dplace.graph/1", "name": f"chain{args.ops}", "ops": ops}, f)
        f.write("\n")


if __name__ == "__main__":
    main()
