#!/usr/bin/python3
"""Writes an ONNX model of N calls of one model-local function, or the same graph written flat.

For timing the importer's inlining of model-local functions (bench/RESULTS.md, "Import"):

    /usr/bin/python3 bench/function_calls.py --calls 10000 --out build/calls.onnx
    /usr/bin/python3 bench/function_calls.py --calls 10000 --flat --out build/flat.onnx
    build/bin/import_bench import build/calls.onnx --repeat 5

The function Blk(x) is a chain of ten elementwise nodes (Sigmoid and Relu alternating) on an
8 x 64 float tensor; the graph chains N calls, c0 ... c{N-1} (with --same-name all "c"). --flat
writes each call's nodes in the graph itself, with the names inlining gives them ("c7/n3", or
"c_7/n3"), so both files import to the same ops.
"""

import argparse

import onnx
from onnx import TensorProto, helper

NODES_PER_CALL = 10


def body_op(k):
    return "Relu" if k % 2 else "Sigmoid"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, required=True)
    parser.add_argument("--flat", action="store_true", help="write the calls' bodies inline")
    parser.add_argument("--same-name", action="store_true",
                        help='name every call "c" (inlining numbers them c, c_1, c_2, ...)')
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("bench", 1)]
    body = []
    for k in range(NODES_PER_CALL):
        source = "x" if k == 0 else f"t{k - 1}"
        target = "y" if k == NODES_PER_CALL - 1 else f"t{k}"
        body.append(helper.make_node(body_op(k), [source], [target], name=f"n{k}"))
    function = helper.make_function("bench", "Blk", ["x"], ["y"], body, opsets)
    nodes = []
    previous = "in"
    for i in range(args.calls):
        output = f"h{i}"
        call = ("c" if i == 0 else f"c_{i}") if args.same_name else f"c{i}"
        if args.flat:
            source = previous
            for k in range(NODES_PER_CALL):
                target = output if k == NODES_PER_CALL - 1 else f"{call}/t{k}"
                nodes.append(helper.make_node(body_op(k), [source], [target], name=f"{call}/n{k}"))
                source = target
        else:
            nodes.append(helper.make_node("Blk", [previous], [output],
                                          name="c" if args.same_name else call, domain="bench"))
        previous = output
    graph = helper.make_graph(
        nodes, "function_calls", [helper.make_tensor_value_info("in", TensorProto.FLOAT, [8, 64])],
        [helper.make_tensor_value_info(previous, TensorProto.FLOAT, [8, 64])])
    model = helper.make_model(graph, opset_imports=opsets,
                              functions=[] if args.flat else [function])
    onnx.save(model, args.out)


if __name__ == "__main__":
    main()
