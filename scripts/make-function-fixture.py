#!/usr/bin/python3
"""Writes tests/data/onnx/local_functions.onnx: a model built from model-local functions.

Exporters that keep modules as functions (PyTorch's TorchScript exporter with
export_modules_as_functions, its earlier dynamo exporter, onnxscript) write each module once as a
FunctionProto and call it from the graph. This model has that layout, written with python3-onnx
alone (no torch):

    y = Softmax(Block(Block(x)))                       x: [batch, 64]
    Block(x; alpha) = x + Linear(LeakyRelu<alpha>(Linear(x, w1, b1)), w2, b2)
    Linear(x, w, b) = MatMul(x, w) + b

Block is in domain "mlp" and calls Linear (domain "mlp" too); LeakyRelu's alpha refers to Block's
attribute, given by the first call and left to LeakyRelu's default by the second. The weights are
declared as external data whose file does not exist (dplace reads only their dims and types).

    /usr/bin/python3 scripts/make-function-fixture.py [OUT_DIR]
"""

import os
import sys

import onnx
from onnx import AttributeProto, TensorProto, helper

OPSET = 17
HIDDEN = 64
INNER = 256


def weight(name, dims):
    t = TensorProto()
    t.name = name
    t.data_type = TensorProto.FLOAT
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    entry = t.external_data.add()
    entry.key = "location"
    entry.value = "absent.data"
    return t


def alpha_reference():
    a = AttributeProto()
    a.name = "alpha"
    a.ref_attr_name = "alpha"
    a.type = AttributeProto.FLOAT
    return a


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "onnx")
    opsets = [helper.make_opsetid("", OPSET), helper.make_opsetid("mlp", 1)]
    linear = helper.make_function(
        "mlp", "Linear", ["x", "w", "b"], ["y"],
        [helper.make_node("MatMul", ["x", "w"], ["xw"], name="matmul"),
         helper.make_node("Add", ["xw", "b"], ["y"], name="bias")],
        opsets)
    act = helper.make_node("LeakyRelu", ["h"], ["a"], name="act")
    act.attribute.append(alpha_reference())
    block = helper.make_function(
        "mlp", "Block", ["x", "w1", "b1", "w2", "b2"], ["y"],
        [helper.make_node("Linear", ["x", "w1", "b1"], ["h"], name="fc1", domain="mlp"),
         act,
         helper.make_node("Linear", ["a", "w2", "b2"], ["o"], name="fc2", domain="mlp"),
         helper.make_node("Add", ["x", "o"], ["y"], name="residual")],
        opsets, attributes=["alpha"])
    weights = []
    nodes = []
    previous = "x"
    for i in range(2):
        names = [f"block{i}.w1", f"block{i}.b1", f"block{i}.w2", f"block{i}.b2"]
        weights += [weight(names[0], [HIDDEN, INNER]), weight(names[1], [INNER]),
                    weight(names[2], [INNER, HIDDEN]), weight(names[3], [HIDDEN])]
        call = helper.make_node("Block", [previous] + names, [f"h{i}"], name=f"block{i}",
                                domain="mlp")
        if i == 0:
            call.attribute.append(helper.make_attribute("alpha", 0.1))
        nodes.append(call)
        previous = f"h{i}"
    nodes.append(helper.make_node("Softmax", [previous], ["y"], name="softmax"))
    graph = helper.make_graph(
        nodes, "local_functions",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", HIDDEN])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", HIDDEN])], weights)
    model = helper.make_model(graph, opset_imports=opsets, functions=[linear, block],
                              producer_name="dplace scripts/make-function-fixture.py")
    model.ir_version = 8
    # The checker opens external data files, so check a copy with the weights inline.
    checked = onnx.ModelProto()
    checked.CopyFrom(model)
    for t in checked.graph.initializer:
        t.data_location = TensorProto.DEFAULT
        del t.external_data[:]
        count = 1
        for d in t.dims:
            count *= d
        t.raw_data = bytes(4 * count)
    onnx.checker.check_model(checked, full_check=True)
    path = os.path.join(out_dir, "local_functions.onnx")
    onnx.save(model, path)
    print(path)


if __name__ == "__main__":
    main()
