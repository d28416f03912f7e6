#!/usr/bin/python3
"""Regenerates the ONNX test fixtures under tests/data/onnx/.

Run with Debian's interpreter, which sees python3-torch, python3-torchvision and python3-onnx
(`bash scripts/install-deps.sh --fixtures` installs them):

    /usr/bin/python3 scripts/make-onnx-fixtures.py [OUT_DIR]

It exports a few small real models with random weights, then strips every weight of 1 KiB or more
to external data and deletes the data file, so each fixture keeps its initializers' names, dims and
dtypes but not their values (the importer reads only those). Small tensors (shape constants, small
biases) stay inline. It also writes a corpus of malformed models and `expected.json`, the statistics
the C++ tests compare against (computed here from the ONNX protos, not by dplace). Tests never run
Python: the outputs are committed.
"""

import json
import os
import sys

import onnx
import torch
import torchvision
from onnx import TensorProto, helper

OPSET = 14
EXTERNAL_THRESHOLD_BYTES = 1024


def dtype_bytes(data_type):
    return {
        TensorProto.FLOAT: 4, TensorProto.UINT8: 1, TensorProto.INT8: 1, TensorProto.UINT16: 2,
        TensorProto.INT16: 2, TensorProto.INT32: 4, TensorProto.INT64: 8, TensorProto.BOOL: 1,
        TensorProto.FLOAT16: 2, TensorProto.DOUBLE: 8, TensorProto.UINT32: 4,
        TensorProto.UINT64: 8, TensorProto.BFLOAT16: 2,
    }[data_type]


def tensor_bytes(tensor):
    n = 1
    for d in tensor.dims:
        n *= d
    return n * dtype_bytes(tensor.data_type)


def strip_to_absent_external_data(path):
    """Rewrites `path` with every large initializer moved to external data, then deletes the data."""
    model = onnx.load(path)
    data_name = os.path.basename(path) + ".data"
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=data_name, size_threshold=EXTERNAL_THRESHOLD_BYTES)
    data_path = os.path.join(os.path.dirname(path), data_name)
    if os.path.exists(data_path):
        os.remove(data_path)


def stats(path, dims, published_gmac=None, weights_as_inputs=False):
    """Statistics of a fixture, read from the proto without loading external data."""
    model = onnx.load(path, load_external_data=False)
    g = model.graph
    init_names = {t.name for t in g.initializer}
    op_types = {}
    for n in g.node:
        op_types[n.op_type] = op_types.get(n.op_type, 0) + 1
    data_inputs = [i.name for i in g.input if i.name not in init_names]
    entry = {
        "file": os.path.basename(path),
        "dims": dims,
        "nodes": len(g.node),
        "data_inputs": data_inputs,
        "initializers": len(g.initializer),
        "initializer_bytes": sum(tensor_bytes(t) for t in g.initializer),
        "op_types": dict(sorted(op_types.items())),
        "file_bytes": os.path.getsize(path),
        "opset": model.opset_import[0].version,
    }
    if weights_as_inputs:
        # Weights are graph inputs without initializers: their bytes are the parameter bytes.
        weights = [i for i in g.input if i.name not in init_names and i.name not in ("input",)]
        total = 0
        for w in weights:
            n = 1
            for d in w.type.tensor_type.shape.dim:
                n *= d.dim_value
            total += n * dtype_bytes(w.type.tensor_type.elem_type)
        entry["data_inputs"] = ["input"]
        entry["weight_input_bytes"] = total
        entry["initializer_bytes"] = total
    if published_gmac is not None:
        entry["published_gmac"] = published_gmac
    return entry


def export(module, args, path, input_names, dynamic_axes, opset=OPSET, export_params=True):
    module.eval()
    with torch.no_grad():
        torch.onnx.export(module, args, path, input_names=input_names, output_names=["output"],
                          dynamic_axes=dynamic_axes, opset_version=opset,
                          export_params=export_params, do_constant_folding=export_params)


class Seq2Seq(torch.nn.Module):
    """A small LSTM encoder-decoder with teacher forcing (the decoder reads the target tokens)."""

    def __init__(self, vocab=32, embed=16, hidden=16, layers=2):
        super().__init__()
        self.src_embed = torch.nn.Embedding(vocab, embed)
        self.tgt_embed = torch.nn.Embedding(vocab, embed)
        self.encoder = torch.nn.LSTM(embed, hidden, num_layers=layers)
        self.decoder = torch.nn.LSTM(embed, hidden, num_layers=layers)
        self.project = torch.nn.Linear(hidden, vocab)

    def forward(self, src, tgt):
        _, state = self.encoder(self.src_embed(src))
        out, _ = self.decoder(self.tgt_embed(tgt), state)
        return torch.log_softmax(self.project(out), dim=-1)


class OpMix(torch.nn.Module):
    """Ops the models above do not use: ConvTranspose, BatchNorm, GRU, Resize, Pad, Split,
    LayerNormalization (opset 17)."""

    def __init__(self):
        super().__init__()
        self.up = torch.nn.ConvTranspose2d(8, 4, kernel_size=3, stride=2, padding=1,
                                           output_padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.gru = torch.nn.GRU(16, 12)
        self.norm = torch.nn.LayerNorm(12)

    def forward(self, image, seq):
        y = self.up(image)                                   # [1, 4, 16, 16]
        y = torch.nn.functional.interpolate(y, scale_factor=2.0, mode="nearest")  # [1, 4, 32, 32]
        y = torch.nn.functional.pad(self.bn(y), (1, 1, 1, 1))  # [1, 4, 34, 34]
        a, b = torch.split(y, 2, dim=1)
        z = (a * b).mean(dim=(2, 3))                          # [1, 2]
        out, _ = self.gru(seq)                                # [5, 1, 12]
        h = torch.nn.functional.gelu(self.norm(out))
        return h.sum() + z.sum()


def write_malformed(out_dir, good_path):
    """The malformed-input corpus: each file must give exit status 2 or a warning, never a crash."""
    with open(good_path, "rb") as f:
        data = f.read()
    with open(os.path.join(out_dir, "malformed_truncated.onnx"), "wb") as f:
        f.write(data[: len(data) // 2])
    with open(os.path.join(out_dir, "malformed_not_protobuf.onnx"), "wb") as f:
        f.write(b"\xff\xfe this is not an ONNX model \x00\x01\x02\n")

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    opset = [helper.make_opsetid("", OPSET), helper.make_opsetid("example.custom", 1)]

    # A Reshape whose target shape is a runtime input: the output shape cannot be inferred.
    shape_in = helper.make_tensor_value_info("shape", TensorProto.INT64, [2])
    node = helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape_dynamic")
    graph = helper.make_graph([node], "missing_shapes", [x, shape_in], [y])
    onnx.save(helper.make_model(graph, opset_imports=opset[:1]),
              os.path.join(out_dir, "malformed_missing_shapes.onnx"))

    # A custom-domain op ONNX has no schema for, whose output shape is declared in value_info:
    # it imports with a bytes-only cost and a warning.
    relu = helper.make_node("Relu", ["x"], ["r"], name="relu")
    custom = helper.make_node("FancyOp", ["r"], ["c"], name="fancy", domain="example.custom")
    tanh = helper.make_node("Tanh", ["c"], ["y"], name="tanh")
    graph = helper.make_graph([relu, custom, tanh], "unknown_op", [x],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
                              value_info=[helper.make_tensor_value_info("c", TensorProto.FLOAT,
                                                                        [2, 8])])
    onnx.save(helper.make_model(graph, opset_imports=opset),
              os.path.join(out_dir, "unknown_op.onnx"))

    # The same custom op without a declared output shape: nothing can be inferred after it.
    graph = helper.make_graph([relu, custom, tanh], "unknown_op_no_shape", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=opset),
              os.path.join(out_dir, "malformed_unknown_op_no_shape.onnx"))

    # A dynamic input dimension with no name: --dim cannot set it.
    x_anon = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 8])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                              "unnamed_dim", [x_anon], [y])
    onnx.save(helper.make_model(graph, opset_imports=opset[:1]),
              os.path.join(out_dir, "unnamed_dim.onnx"))


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "onnx")
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(0)
    expected = {"generator": "scripts/make-onnx-fixtures.py", "torch": torch.__version__,
                "torchvision": torchvision.__version__, "onnx": onnx.__version__, "models": {}}
    models = expected["models"]
    batch_axes = {"input": {0: "batch"}, "output": {0: "batch"}}

    # Published forward cost: torchvision's model documentation lists 5.71 GFLOPS (multiply-adds)
    # for inception_v3 at 299x299 and 4.09 for resnet50 at 224x224.
    path = os.path.join(out_dir, "inception_v3.onnx")
    net = torchvision.models.inception_v3(weights=None, aux_logits=True, init_weights=False)
    export(net, torch.randn(1, 3, 299, 299), path, ["input"], batch_axes)
    strip_to_absent_external_data(path)
    models["inception_v3"] = stats(path, {"batch": 1}, published_gmac=5.71)

    path = os.path.join(out_dir, "resnet50.onnx")
    net = torchvision.models.resnet50(weights=None)
    export(net, torch.randn(1, 3, 224, 224), path, ["input"], batch_axes)
    strip_to_absent_external_data(path)
    models["resnet50"] = stats(path, {"batch": 1}, published_gmac=4.09)

    # The same network with weights as graph inputs (export_params=False): no initializers.
    path = os.path.join(out_dir, "resnet50_weights_as_inputs.onnx")
    export(net, torch.randn(1, 3, 224, 224), path, ["input"], batch_axes, export_params=False)
    models["resnet50_weights_as_inputs"] = stats(path, {"batch": 1}, published_gmac=4.09,
                                                 weights_as_inputs=True)

    path = os.path.join(out_dir, "transformer_encoder.onnx")
    layer = torch.nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=512,
                                             dropout=0.0, activation="gelu")
    net = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    export(net, torch.randn(16, 1, 128), path, ["input"],
           {"input": {0: "seq", 1: "batch"}, "output": {0: "seq", 1: "batch"}})
    strip_to_absent_external_data(path)
    models["transformer_encoder"] = stats(path, {"seq": 16, "batch": 1})

    # Small enough to keep its weights inline (the "weights stored inline" case).
    path = os.path.join(out_dir, "lstm_seq2seq.onnx")
    net = Seq2Seq()
    src = torch.randint(0, 32, (10, 1))
    tgt = torch.randint(0, 32, (7, 1))
    export(net, (src, tgt), path, ["src", "tgt"],
           {"src": {0: "src_len", 1: "batch"}, "tgt": {0: "tgt_len", 1: "batch"},
            "output": {0: "tgt_len", 1: "batch"}})
    models["lstm_seq2seq"] = stats(path, {"src_len": 10, "tgt_len": 7, "batch": 1})

    path = os.path.join(out_dir, "op_mix.onnx")
    export(OpMix(), (torch.randn(1, 8, 8, 8), torch.randn(5, 1, 16)), path, ["image", "seq"], None,
           opset=17)
    models["op_mix"] = stats(path, {})

    write_malformed(out_dir, os.path.join(out_dir, "resnet50.onnx"))
    models["unknown_op"] = stats(os.path.join(out_dir, "unknown_op.onnx"), {})

    with open(os.path.join(out_dir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=2, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
