#!/usr/bin/env python3
"""Writes an onnxruntime profile of a dplace.graph/1 graph's ops, for timing `--profile`.

The events are laid out as onnxruntime's profiler writes them (onnxruntime/core/common/
profiler.cc, framework/sequential_executor.cc): per run and node a `_fence_before`, a
`_kernel_time` with the args onnxruntime records, and a `_fence_after` event, then a `model_run`
session event. The times are made up (a microsecond per MFLOP, at least 1), not measured: the file
is for timing the reader, bench/RESULTS.md section "Reading onnxruntime profiles". Usage:

    build/bin/dplace info tests/data/onnx/inception_v3.onnx --dim batch=1 -o build/inc.json
    /usr/bin/python3 bench/ort_profile.py --graph build/inc.json --runs 1000 --out build/inc_prof.json
"""
import argparse
import json


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", required=True, help="a dplace.graph/1 file (dplace info -o)")
    parser.add_argument("--runs", type=int, default=10, help="session runs profiled")
    parser.add_argument("--out", required=True, help="file to write")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    with open(args.graph) as f:
        graph = json.load(f)
    nodes = [op for op in graph["ops"] if op.get("type") != "Input"]
    ts = 0
    with open(args.out, "w") as out:
        out.write("[\n")
        out.write('{"cat" : "Session","pid" :1,"tid" :1,"dur" :5000,"ts" :0,"ph" : "X",'
                  '"name" :"model_loading_uri","args" : {}}')
        for run in range(args.runs):
            start = ts
            for index, op in enumerate(nodes):
                name = op.get("onnxruntime_name", op["name"])
                shapes = op.get("output_shapes", [[1]])
                shape_text = json.dumps([{"float": s} for s in shapes], separators=(",", ":"))
                dur = max(1, int(op.get("flops", 0) / 1e6))
                head = '{"cat" : "Node","pid" :1,"tid" :1,'
                out.write(',\n%s"dur" :1,"ts" :%d,"ph" : "X","name" :"%s_fence_before",'
                          '"args" : {"op_name" : "%s"}}' % (head, ts, name, op["type"]))
                out.write(',\n%s"dur" :%d,"ts" :%d,"ph" : "X","name" :"%s_kernel_time",'
                          '"args" : {"op_name" : "%s","provider" : "CPUExecutionProvider",'
                          '"node_index" : "%d","activation_size" : "4096","parameter_size" : '
                          '"0","output_size" : "4096","input_type_shape" : %s,'
                          '"output_type_shape" : %s,"thread_scheduling_stats" : {"main_thread" : '
                          '{"thread_pool_name" : "session-1-intra-op","thread_id" : "1",'
                          '"block_size" : [],"core" : -1,"num_run" : 0}}}}'
                          % (head, dur, ts + 1, name, op["type"], index, shape_text,
                             shape_text))
                out.write(',\n%s"dur" :0,"ts" :%d,"ph" : "X","name" :"%s_fence_after",'
                          '"args" : {"op_name" : "%s"}}' % (head, ts + 1 + dur, name, op["type"]))
                ts += dur + 2
            out.write(',\n{"cat" : "Session","pid" :1,"tid" :1,"dur" :%d,"ts" :%d,"ph" : "X",'
                      '"name" :"model_run","args" : {}}' % (ts - start, start))
        out.write("\n]\n")


if __name__ == "__main__":
    main()
