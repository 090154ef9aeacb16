"""Write the e5 sentence encoder as an ONNX graph from its weights, without torch.

The graph is XLM-RoBERTa as transformers computes it in eager attention mode
(``models/xlm_roberta/modeling_xlm_roberta.py``), followed by the masked mean pooling
and L2 normalisation of sentence-transformers: operator for operator the arithmetic of
the graph that ``torch.onnx.export`` traces from the same folder
(``onnx_export.export_with_torch``), without its shape bookkeeping:

* position ids as ``create_position_ids_from_input_ids``: ``(cumsum(mask) * mask) +
  padding_idx`` with ``mask = input_ids != padding_idx``, in int32 as there;
* token type ids all 0 (the model's zero buffer), so its row 0 is added to every token;
* the additive attention mask of ``masking_utils.eager_mask``: 0 where attended,
  ``finfo(float32).min`` where padded;
* scores ``(Q @ K^T) * head_dim**-0.5`` (``eager_attention_forward``), exact (erf) GELU
  as ``x * (1 + erf(x / sqrt 2)) * 0.5``, post-LayerNorm residuals;
* pooling ``sum(h * mask) / clamp(sum(mask), 1e-9)``, then ``x / clamp(||x||, 1e-12)``
  (``torch.nn.functional.normalize``).

Keeping the same operators in the same order matters beyond the float result: the
dynamic int8 quantiser then quantises the same MatMuls and Gathers, so the served
model gives the torch export's vectors. The weights are read with ``safetensors.numpy``;
neither torch nor transformers is imported. A Linear's weight is stored transposed,
as the tracer folds it, so that ``MatMul(x, W^T)`` is the same product.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from memory_pipeline.embedding.onnx_export import OPSET
from memory_pipeline.errors import ModelUnavailableError


class _Graph:
    """Nodes and initialisers in the order they are added, with fresh value names."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._count = 0

    def op(self, op_type: str, *inputs: str, **attrs: Any) -> str:
        self._count += 1
        out = f"{op_type.lower()}_{self._count}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def const(self, name: str, value: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(value, name))
        return name

    def scalar(self, name: str, value: float) -> str:
        return self.const(name, np.array(value, dtype=np.float32))

    def ints(self, name: str, *values: int) -> str:
        return self.const(name, np.array(values, dtype=np.int64))


class _Weights:
    """The checkpoint's tensors by name; each read once, then dropped from memory."""

    def __init__(self, path: Path) -> None:
        from safetensors.numpy import load_file

        self._tensors = load_file(str(path))

    def take(self, name: str) -> np.ndarray:
        return np.ascontiguousarray(self._tensors.pop(name), dtype=np.float32)


def build_float_graph(source: Path) -> onnx.ModelProto:
    """The float ONNX model of the sentence-transformers folder ``source``."""
    config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    kind = (config.get("model_type"), config.get("hidden_act"))
    if kind != ("xlm-roberta", "gelu"):
        raise ModelUnavailableError(
            f"{source}: the ONNX graph is written for XLM-RoBERTa with erf GELU, not {kind}"
        )
    weights = _Weights(source / "model.safetensors")
    g = _Graph()
    hidden = _embeddings(g, weights, config)
    bias = _attention_bias(g)
    for layer in range(int(config["num_hidden_layers"])):
        hidden = _layer(g, weights, config, hidden, bias, f"encoder.layer.{layer}")
    embedding = _pool_and_normalise(g, hidden)
    g.nodes.append(helper.make_node("Identity", [embedding], ["sentence_embedding"]))

    axes = ["batch", "tokens"]
    graph = helper.make_graph(
        g.nodes,
        "multilingual-e5-small",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, axes),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, axes),
        ],
        [
            helper.make_tensor_value_info(
                "sentence_embedding", TensorProto.FLOAT, ["batch", int(config["hidden_size"])]
            )
        ],
        g.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8  # what the TorchScript exporter writes for opset 17
    return model


def _embeddings(g: _Graph, w: _Weights, config: dict[str, Any]) -> str:
    pad = int(config["pad_token_id"])
    not_pad = g.op("Not", g.op("Equal", "input_ids", g.ints("pad_id", pad)))
    mask = g.op("Cast", not_pad, to=TensorProto.INT32)
    counted = g.op("CumSum", mask, g.const("axis_1", np.array(1, dtype=np.int32)))
    positions = g.op(
        "Add",
        g.op("Cast", g.op("Mul", counted, mask), to=TensorProto.INT64),
        g.const("pad_offset", np.array(pad, dtype=np.int64)),
    )
    zeros = g.op(
        "ConstantOfShape",
        g.op("Shape", "input_ids"),
        value=numpy_helper.from_array(np.array([0], dtype=np.int64)),
    )
    prefix = "embeddings"
    words = g.op(
        "Gather", g.const(f"{prefix}.word", w.take(f"{prefix}.word_embeddings.weight")), "input_ids"
    )
    types = g.op(
        "Gather", g.const(f"{prefix}.type", w.take(f"{prefix}.token_type_embeddings.weight")), zeros
    )
    place = g.op(
        "Gather",
        g.const(f"{prefix}.pos", w.take(f"{prefix}.position_embeddings.weight")),
        positions,
    )
    summed = g.op("Add", g.op("Add", words, types), place)
    return _layer_norm(g, w, config, summed, f"{prefix}.LayerNorm")


def _attention_bias(g: _Graph) -> str:
    """``eager_mask``: 0 for a token attended to, the dtype's min for padding; [B, 1, 1, T]."""
    keep = g.op("Cast", "attention_mask", to=TensorProto.BOOL)
    keep = g.op("Unsqueeze", keep, g.ints("axes_1_2", 1, 2))
    lowest = float(np.finfo(np.float32).min)
    return g.op("Where", keep, g.scalar("zero", 0.0), g.scalar("float_min", lowest))


def _linear(g: _Graph, w: _Weights, x: str, name: str) -> str:
    weight = g.const(f"{name}.weight_t", np.ascontiguousarray(w.take(f"{name}.weight").T))
    return g.op("Add", g.const(f"{name}.bias", w.take(f"{name}.bias")), g.op("MatMul", x, weight))


def _layer_norm(g: _Graph, w: _Weights, config: dict[str, Any], x: str, name: str) -> str:
    scale = g.const(f"{name}.weight", w.take(f"{name}.weight"))
    bias = g.const(f"{name}.bias", w.take(f"{name}.bias"))
    eps = float(config["layer_norm_eps"])
    return g.op("LayerNormalization", x, scale, bias, axis=-1, epsilon=eps)


def _layer(g: _Graph, w: _Weights, config: dict[str, Any], x: str, bias: str, name: str) -> str:
    heads = int(config["num_attention_heads"])
    head_dim = int(config["hidden_size"]) // heads
    split = g.ints(f"{name}.split", 0, 0, heads, head_dim)

    def project(part: str, perm: list[int]) -> str:
        y = _linear(g, w, x, f"{name}.attention.self.{part}")
        return g.op("Transpose", g.op("Reshape", y, split), perm=perm)

    query = project("query", [0, 2, 1, 3])
    key_t = project("key", [0, 2, 3, 1])
    value = project("value", [0, 2, 1, 3])
    scores = g.op("Mul", g.op("MatMul", query, key_t), g.scalar(f"{name}.scaling", head_dim**-0.5))
    probs = g.op("Softmax", g.op("Add", scores, bias), axis=-1)
    context = g.op("Transpose", g.op("MatMul", probs, value), perm=[0, 2, 1, 3])
    context = g.op("Reshape", context, g.ints(f"{name}.merge", 0, 0, -1))
    attended = g.op("Add", _linear(g, w, context, f"{name}.attention.output.dense"), x)
    attended = _layer_norm(g, w, config, attended, f"{name}.attention.output.LayerNorm")

    inner = _linear(g, w, attended, f"{name}.intermediate.dense")
    erf = g.op("Erf", g.op("Div", inner, g.scalar(f"{name}.sqrt2", math.sqrt(2.0))))
    gelu = g.op(
        "Mul",
        g.op("Mul", inner, g.op("Add", erf, g.scalar(f"{name}.one", 1.0))),
        g.scalar(f"{name}.half", 0.5),
    )
    out = g.op("Add", _linear(g, w, gelu, f"{name}.output.dense"), attended)
    return _layer_norm(g, w, config, out, f"{name}.output.LayerNorm")


def _pool_and_normalise(g: _Graph, hidden: str) -> str:
    mask = g.op(
        "Cast", g.op("Unsqueeze", "attention_mask", g.ints("axes_last", -1)), to=TensorProto.FLOAT
    )
    axis = g.ints("axes_tokens", 1)
    summed = g.op("ReduceSum", g.op("Mul", hidden, mask), axis, keepdims=0)
    count = g.op("Clip", g.op("ReduceSum", mask, axis, keepdims=0), g.scalar("min_count", 1e-9))
    pooled = g.op("Div", summed, count)
    norm = g.op("Clip", g.op("ReduceL2", pooled, axes=[1], keepdims=1), g.scalar("min_norm", 1e-12))
    return g.op("Div", pooled, norm)
