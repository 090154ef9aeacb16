"""Tests of the tantivy BM25 index (memory_pipeline.index.backends.local.sparse)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from memory_pipeline.errors import IndexBusyError, IndexUnavailableError, InvalidInputError
from memory_pipeline.index import bm25
from memory_pipeline.index.backends.local.sparse import (
    BM25_B,
    BM25_K1,
    FIELD_NORMS_TABLE,
    SparseIndex,
    quantize_length,
)
from memory_pipeline.index.tokenizer import tokenize

# tantivy scores in float32; Python (rank_bm25, score_external) in float64. A
# BM25 score is a handful of float32 operations (relative error ~6e-8 each; the
# largest difference measured on this corpus is 1.7e-7), so 1e-5 relative leaves
# ample headroom and still catches any real formula difference (a wrong idf,
# length, k1 or b moves scores by > 1e-3). Field-norm quantisation plays no part
# here: every document has <= 40 tokens, which tantivy stores exactly.
REL_TOL = 1e-5
ABS_TOL = 1e-6

CORPUS_TEXTS = [
    "Hybrid retrieval combines dense vectors with BM25 keyword search.",
    "BM25 ranks documents by term frequency and inverse document frequency.",
    "Dense retrieval encodes queries and passages with a sentence embedding model.",
    "FAISS builds an IVF index for fast approximate nearest neighbour search.",
    "The agent stores long-term memory as chunks in a vector database.",
    "Reciprocal rank fusion merges the dense and the sparse result lists.",
    "Tantivy is a full-text search engine library written in Rust.",
    "Chunks are split by headings, paragraphs and sentences before indexing.",
    "The user prefers short answers and dislikes long explanations.",
    "Yesterday the user asked about the BM25 parameters k1 and b.",
    "Memory consolidation merges similar memories and forgets stale ones.",
    "Query expansion adds synonyms to improve keyword recall.",
    "An HNSW graph gives fast vector search with high recall.",
    "Deleting a document from the index must not require a full rebuild.",
    "The embedding model maps text to a 384 dimensional vector.",
    "Search latency at serving time should stay below fifty milliseconds.",
    "Japanese text has no spaces, so the tokenizer uses character unigrams and bigrams.",
    "The agent remembered the user's favourite programming language: Python.",
    "FAISSのIVFインデックスはベクトル検索に使う。",
    "長期記憶のエージェントは会話を検索する。",
    "BM25はキーワード検索のランキング関数。",
    "ハイブリッド検索は密ベクトルとBM25を使う。",
    "日本語は空白がなく、文字バイグラムで分ける。",
    "ユーザーは短い回答を好みます。",
    "インデックスの更新は増分で、再構築は避ける。",
    "エージェントの記憶はチャンクで保存される。",
    "検索の遅延は五十ミリ秒以内に抑える。",
    "埋め込みモデルは384次元のベクトルを作る。",
    "Tantivyで作ったBM25インデックスを複製して公開する。",
    "The memory pipeline publishes a new index version side by side with the old one.",
]
CORPUS = [tokenize(t) for t in CORPUS_TEXTS]

QUERIES = [
    "BM25 keyword search",
    "dense vector retrieval",
    "long-term memory of the agent",
    "FAISS IVF index",
    "user preferences short answers",
    "インデックスの更新",
    "ベクトル検索",
    "エージェントの記憶",
    "BM25 ランキング",
    "fast search latency",
    "日本語の文字バイグラム",
]


class LuceneIdfBM25(BM25Okapi):
    """rank_bm25's Okapi BM25 with Lucene's (and tantivy's) always-positive idf."""

    def _calc_idf(self, nd: dict[str, int]) -> None:
        for word, freq in nd.items():
            self.idf[word] = math.log(1.0 + (self.corpus_size - freq + 0.5) / (freq + 0.5))


def dedupe(tokens: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(tokens))


def ranking(scored: Sequence[tuple[int, float]], k: int) -> list[int]:
    """Top-k ids; scores rounded so float32/float64 ties order the same (by id)."""
    return [i for i, _ in sorted(scored, key=lambda x: (-round(x[1], 5), x[0]))[:k]]


def build(path: Path, docs: Sequence[tuple[int, Sequence[str]]]) -> SparseIndex:
    index = SparseIndex.create(path)
    index.add(docs)
    index.commit()
    return index


@pytest.fixture
def corpus_index(tmp_path: Path) -> Iterator[SparseIndex]:
    index = build(tmp_path / "corpus", list(enumerate(CORPUS)))
    yield index
    index.close()


# ----------------------------------------------------------------- BM25 parity


def test_corpus_is_within_exact_field_norms() -> None:
    # tantivy stores lengths 0..40 exactly; parity below relies on it.
    assert max(len(d) for d in CORPUS) <= 40
    assert FIELD_NORMS_TABLE[:41] == tuple(range(41))


def test_scores_match_rank_bm25_with_lucene_idf(corpus_index: SparseIndex) -> None:
    reference = LuceneIdfBM25(CORPUS, k1=BM25_K1, b=BM25_B)
    assert len(QUERIES) >= 8
    for text in QUERIES:
        query = dedupe(tokenize(text))
        expected_all = reference.get_scores(query)
        expected = [(i, float(s)) for i, s in enumerate(expected_all) if s > 0]
        got = corpus_index.search(query, len(CORPUS))
        assert expected, text
        assert {i for i, _ in got} == {i for i, _ in expected}, text
        for doc_id, score in got:
            assert score == pytest.approx(expected_all[doc_id], rel=REL_TOL, abs=ABS_TOL), (
                text,
                doc_id,
            )
        assert ranking(got, 5) == ranking(expected, 5), text
        # The top-5 cut made by tantivy itself is the same set.
        assert {i for i, _ in corpus_index.search(query, 5)} == set(ranking(expected, 5))


def test_plain_bm25okapi_rank_agreement(corpus_index: SparseIndex) -> None:
    """Informational: rank_bm25's own idf (ln((N-n+.5)/(n+.5)), eps floor) ranks similarly."""
    plain = BM25Okapi(CORPUS, k1=BM25_K1, b=BM25_B)
    overlaps = []
    for text in QUERIES:
        query = dedupe(tokenize(text))
        got = corpus_index.search(query, 5)
        k = len(got)
        plain_scores = plain.get_scores(query)
        plain_top = ranking([(i, float(s)) for i, s in enumerate(plain_scores)], k)
        overlaps.append(len({i for i, _ in got} & set(plain_top)) / k)
    mean_overlap = sum(overlaps) / len(overlaps)
    print(f"plain BM25Okapi top-5 overlap with tantivy: {mean_overlap:.3f} {overlaps}")
    assert mean_overlap >= 0.8


def test_search_edge_cases(corpus_index: SparseIndex) -> None:
    assert corpus_index.search([], 10) == []
    assert corpus_index.search(["", ""], 10) == []
    assert corpus_index.search(["bm25"], 0) == []
    assert corpus_index.search(["nosuchtoken"], 10) == []
    # An unknown token contributes nothing; duplicates count once.
    assert corpus_index.search(["bm25", "nosuchtoken", "bm25"], 10) == corpus_index.search(
        ["bm25"], 10
    )
    assert len(corpus_index.search(["bm25"], 10_000_000)) == 6
    assert corpus_index.search(["bm25"], 10, allowed_ids=[]) == []


# ----------------------------------------------------------------- filtering


def test_allowed_ids_keeps_matches_crowded_out_of_top_n(tmp_path: Path) -> None:
    strong = [(i, ["memory", "memory", "agent"]) for i in range(20)]
    weak = [(100, ["memory", *[f"filler{j}" for j in range(30)]]), (101, ["unrelated"])]
    index = build(tmp_path / "idx", strong + weak)
    unfiltered_all = dict(index.search(["memory", "agent"], 1000))
    assert 100 not in dict(index.search(["memory", "agent"], 5))

    got = index.search(["memory", "agent"], 5, allowed_ids={100, 101, 3, 12345})
    assert [i for i, _ in got] == [3, 100]  # 101 doesn't match, 12345 doesn't exist
    for doc_id, score in got:
        assert score == pytest.approx(unfiltered_all[doc_id], rel=1e-7)
    # numpy ids work as well, and the top_n cut happens after filtering.
    got = index.search(["memory"], 2, allowed_ids=np.array([100, 5, 6, 7], dtype=np.int64))
    assert [i for i, _ in got] == [5, 6]
    assert index.search(["memory"], 5, allowed_ids=[100]) == [
        (100, index.search(["memory"], 1000)[-1][1])
    ]
    assert index.search(["memory"], 1000)[-1][0] == 100
    index.close()


# ----------------------------------------------------------------- incremental


def test_incremental_add_delete_and_readd(tmp_path: Path) -> None:
    index = build(tmp_path / "idx", [(i, tokenize(f"note {i} alpha")) for i in range(10)])
    assert index.num_docs == 10
    np.testing.assert_array_equal(index.ids(), np.arange(10))

    assert index.add([(i, tokenize(f"note {i} beta")) for i in range(10, 15)]) == 5
    assert index.num_docs == 10  # not visible before commit
    index.commit()
    assert index.num_docs == 15
    assert {i for i, _ in index.search(["beta"], 100)} == set(range(10, 15))

    assert index.delete([2, 3, 3, 999]) == 3
    index.commit()
    assert index.num_docs == 14 - 1  # 999 never existed
    assert index.ids().tolist() == [0, 1, *range(4, 15)]
    assert index.search(["2"], 10) == []

    # Re-adding ids replaces them, whether committed before or within one batch.
    index.add([(5, ["gamma"]), (6, ["gamma"]), (5, ["gamma", "delta"])])
    index.commit()
    assert index.num_docs == 13
    assert index.ids().tolist() == [0, 1, *range(4, 15)]
    assert sorted(i for i, _ in index.search(["gamma"], 10)) == [5, 6]
    assert [i for i, _ in index.search(["delta"], 10)] == [5]
    assert index.search(["note", "5"], 10)[0][0] != 5  # old text of 5 is gone
    assert 5 not in dict(index.search(["alpha"], 100))
    index.close()


def test_ids_are_sorted_int64_and_empty_index(tmp_path: Path) -> None:
    index = SparseIndex.create(tmp_path / "idx")
    assert index.num_docs == 0
    assert index.ids().dtype == np.int64 and index.ids().size == 0
    assert index.search(["x"], 5) == []
    assert index.score_external(["x"], [(1, ["x"])])[0][0] == 1
    index.add([(7, ["x"]), (-3, ["y"]), (2**40, []), (np.int64(5), ["x", "x"])])  # type: ignore[list-item]
    index.commit()
    ids = index.ids()
    assert ids.dtype == np.int64
    assert ids.tolist() == [-3, 5, 7, 2**40]
    assert index.num_docs == 4


def test_invalid_input(tmp_path: Path) -> None:
    index = SparseIndex.create(tmp_path / "idx")
    with pytest.raises(InvalidInputError):
        index.add([(1, ["two words"])])
    with pytest.raises(InvalidInputError):
        index.add([(1, ["ok", ""])])
    with pytest.raises(InvalidInputError):
        index.add([(1, "not tokenized")])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError):
        index.add([("1", ["x"])])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError):
        index.delete([2**63])


# ----------------------------------------------------------------- open / readers


def test_reader_sees_state_committed_at_open(tmp_path: Path) -> None:
    path = tmp_path / "idx"
    writer = build(path, [(1, ["a"]), (2, ["b"])])
    reader = SparseIndex.open(path)
    assert not reader.writable
    writer.add([(3, ["a"])])
    writer.delete([2])
    writer.commit()
    assert reader.num_docs == 2
    assert reader.ids().tolist() == [1, 2]
    assert [i for i, _ in reader.search(["a"], 10)] == [1]
    fresh = SparseIndex.open(path)
    assert fresh.ids().tolist() == [1, 3]
    with pytest.raises(IndexUnavailableError, match="read-only"):
        reader.add([(4, ["c"])])
    writer.close()


def test_single_writer(tmp_path: Path) -> None:
    path = tmp_path / "idx"
    writer = SparseIndex.create(path)
    with pytest.raises(IndexBusyError):
        SparseIndex.open(path, writable=True)
    writer.commit()  # still the only writer after a commit
    with pytest.raises(IndexBusyError):
        SparseIndex.open(path, writable=True)
    writer.close()
    with SparseIndex.open(path, writable=True) as again:
        again.add([(1, ["x"])])
        again.commit()
    assert SparseIndex.open(path).num_docs == 1


def test_close_discards_uncommitted(tmp_path: Path) -> None:
    path = tmp_path / "idx"
    index = build(path, [(1, ["a"])])
    index.add([(2, ["b"])])
    index.close()
    assert SparseIndex.open(path).ids().tolist() == [1]


def test_open_errors(tmp_path: Path) -> None:
    with pytest.raises(IndexUnavailableError, match="does not exist"):
        SparseIndex.open(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(IndexUnavailableError, match=r"meta\.json is missing"):
        SparseIndex.open(tmp_path / "empty")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "meta.json").write_text("{not json")
    with pytest.raises(IndexUnavailableError, match="corrupt"):
        SparseIndex.open(bad)

    path = tmp_path / "idx"
    build(path, [(1, ["a"]), (2, ["b"])]).close()
    for f in path.glob("*.idx"):
        f.unlink()
    with pytest.raises(IndexUnavailableError, match="corrupt"):
        SparseIndex.open(path)

    other = tmp_path / "other"
    build(other, [(1, ["a"])]).close()
    meta = json.loads((other / "meta.json").read_text())
    meta["schema"][0]["name"] = "text"
    (other / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(IndexUnavailableError, match="not a sparse index"):
        SparseIndex.open(other)


def test_create_refuses_non_empty_dir(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "file").write_text("hi")
    with pytest.raises(IndexUnavailableError, match="not empty"):
        SparseIndex.create(tmp_path / "x")


# ----------------------------------------------------------------- clone


def test_clone_is_cheap_and_isolated(tmp_path: Path) -> None:
    src, dst = tmp_path / "v1", tmp_path / "v2"
    docs = list(enumerate(CORPUS))
    source = build(src, docs)
    source.delete([0])  # a .del file in the snapshot too
    source.commit()
    source.close()
    before_files = {p.name: p.read_bytes() for p in src.iterdir()}
    reader = SparseIndex.open(src)
    query = tokenize("BM25 インデックス search")
    expected = reader.search(query, 10)
    expected_ids = reader.ids().tolist()

    SparseIndex.clone(src, dst)
    assert not any(p.name.startswith(".tantivy") for p in dst.iterdir())
    segment_files = [p for p in dst.iterdir() if p.suffix in (".idx", ".store", ".term", ".del")]
    assert segment_files
    for p in segment_files:  # hard links, not copies
        assert os.stat(p).st_ino == os.stat(src / p.name).st_ino
    assert (dst / "meta.json").read_bytes() == (src / "meta.json").read_bytes()
    assert os.stat(dst / "meta.json").st_ino != os.stat(src / "meta.json").st_ino

    clone = SparseIndex.open(dst, writable=True)
    assert clone.search(query, 10) == expected
    # Many small commits: new segments, .del files, merges and garbage collection in dst.
    for round_ in range(10):
        clone.add([(1000 + round_, tokenize("BM25 インデックス new version")), (1, ["changed"])])
        clone.delete([2 + round_])
        clone.commit()
    clone.close()
    changed = SparseIndex.open(dst)
    assert changed.ids().tolist() != expected_ids
    assert changed.search(query, 10) != expected

    # The source directory, an old reader and a new reader are untouched.
    assert {p.name: p.read_bytes() for p in src.iterdir()} == before_files
    assert reader.search(query, 10) == expected
    assert reader.ids().tolist() == expected_ids
    fresh = SparseIndex.open(src)
    assert fresh.search(query, 10) == expected
    assert fresh.ids().tolist() == expected_ids

    # ...and writing to the source afterwards does not change the clone either.
    again = SparseIndex.open(src, writable=True)
    again.delete(expected_ids)
    again.commit()
    assert SparseIndex.open(src).num_docs == 0
    assert SparseIndex.open(dst).ids().tolist() == changed.ids().tolist()


def test_clone_refuses_non_empty_destination(tmp_path: Path) -> None:
    build(tmp_path / "src", [(1, ["a"])]).close()
    (tmp_path / "dst").mkdir()
    (tmp_path / "dst" / "x").write_text("")
    with pytest.raises(IndexUnavailableError):
        SparseIndex.clone(tmp_path / "src", tmp_path / "dst")
    with pytest.raises(IndexUnavailableError):
        SparseIndex.clone(tmp_path / "missing", tmp_path / "dst2")
    (tmp_path / "empty").mkdir()
    SparseIndex.clone(tmp_path / "src", tmp_path / "empty")
    assert SparseIndex.open(tmp_path / "empty").ids().tolist() == [1]


def test_clone_skips_uncommitted_segments(tmp_path: Path) -> None:
    src = tmp_path / "src"
    index = build(src, [(1, ["a"])])
    index.add([(i, ["b"] * 5) for i in range(2, 2000)])  # pending, possibly flushed
    SparseIndex.clone(src, tmp_path / "dst")
    assert SparseIndex.open(tmp_path / "dst").ids().tolist() == [1]
    index.close()


# ----------------------------------------------------------------- score_external


def _lengths_doc(n: int, *, with_terms: Sequence[str]) -> list[str]:
    return [*with_terms, *(f"pad{j}" for j in range(n - len(with_terms)))]


@pytest.mark.parametrize("length", [3, 12, 40, 41, 45, 57, 100, 333])
def test_score_external_equals_search_of_indexed_doc(tmp_path: Path, length: int) -> None:
    """score_external(X) on index(base) == search() score of X in index(base + X).

    score_external counts X itself in N, n(t) and the average length, so both
    sides use identical statistics; the only difference is float32 vs float64
    arithmetic (REL_TOL). Lengths > 40 exercise tantivy's length quantisation.
    """
    base = list(enumerate(CORPUS))
    x_id = 999
    x_tokens = _lengths_doc(length, with_terms=["bm25", "bm25", "検索", "memory", "rust"])
    query = dedupe(tokenize("BM25 memory 検索 rust nosuchtoken"))

    with_x = build(tmp_path / "with_x", [*base, (x_id, x_tokens)])
    indexed_score = dict(with_x.search(query, 1000))[x_id]
    without_x = build(tmp_path / "without_x", base)
    external = without_x.score_external(query, [(x_id, x_tokens)])
    assert [i for i, _ in external] == [x_id]
    assert external[0][1] == pytest.approx(indexed_score, rel=REL_TOL)

    # Leaving X out of the statistics (N, n(t), avgdl of the base corpus only)
    # would give a clearly different score: that is why X is counted.
    reference = LuceneIdfBM25([c for _, c in base], k1=BM25_K1, b=BM25_B)
    unseen_idf = math.log(1 + (reference.corpus_size + 0.5) / 0.5)
    norm = BM25_K1 * (1 - BM25_B + BM25_B * quantize_length(length) / reference.avgdl)
    naive = sum(
        reference.idf.get(t, unseen_idf) * (BM25_K1 + 1) * tf / (tf + norm)
        for t in query
        if (tf := x_tokens.count(t))
    )
    assert abs(naive - indexed_score) / indexed_score > 1e-2


def test_score_external_several_docs_and_ranking(tmp_path: Path) -> None:
    base = list(enumerate(CORPUS[:20]))
    fresh = [(100 + i, c) for i, c in enumerate(CORPUS[20:])]
    fresh.append((200, []))  # empty doc: in N, never scored
    query = dedupe(tokenize("BM25 インデックス ベクトル検索"))

    everything = build(tmp_path / "all", [*base, *fresh])
    expected = [(i, s) for i, s in everything.search(query, 1000) if i >= 100]
    partial = build(tmp_path / "base", base)
    got = partial.score_external(query, fresh)
    assert [i for i, _ in got] == [i for i, _ in expected]
    for (_, a), (_, b) in zip(got, expected, strict=True):
        assert a == pytest.approx(b, rel=REL_TOL)
    assert partial.score_external([], fresh) == []
    assert partial.score_external(query, []) == []
    assert partial.score_external(["nosuchtoken"], fresh) == []


def test_score_external_with_unmerged_deletes(tmp_path: Path) -> None:
    """tantivy keeps deleted docs in N / n / avgdl until a merge; so does score_external."""
    base = list(enumerate(CORPUS))
    doomed = [(500 + i, ["bm25", *(f"junk{j}" for j in range(i))]) for i in range(5)]
    x = (999, tokenize("BM25 keyword search for the agent memory"))
    query = dedupe(tokenize("bm25 memory agent"))

    a = build(tmp_path / "a", [*base, *doomed, x])
    a.delete([i for i, _ in doomed])
    a.commit()
    b = build(tmp_path / "b", [*base, *doomed])
    b.delete([i for i, _ in doomed])
    b.commit()
    # The deleted documents are still in tantivy's statistics (no merge happened).
    assert a.num_docs == len(base) + 1
    assert a._global_stats(query)[0] == len(base) + len(doomed) + 1
    indexed = dict(a.search(query, 1000))[x[0]]
    external = b.score_external(query, [x])
    assert external[0][1] == pytest.approx(indexed, rel=REL_TOL)


def test_quantize_length() -> None:
    assert [quantize_length(n) for n in (0, 1, 40, 41, 42, 43, 56, 57, 60)] == [
        0,
        1,
        40,
        40,
        42,
        42,
        56,
        56,
        60,
    ]
    assert FIELD_NORMS_TABLE[-1] == 2_013_265_944
    assert list(FIELD_NORMS_TABLE) == sorted(set(FIELD_NORMS_TABLE))


def test_scores_for_equals_search_scores_of_the_same_ids(corpus_index: SparseIndex) -> None:
    query = tokenize("BM25 インデックス search memory")
    full = dict(corpus_index.search(query, len(CORPUS)))
    ids = [3, 7, 18, 22, 25, 30]
    got = dict(corpus_index.scores_for(query, ids))
    # Exactly the ids that share a term with the query, with search()'s scores.
    assert set(got) == {i for i in ids if i in full}
    for i, score in got.items():
        assert score == pytest.approx(full[i], rel=1e-6)
    assert corpus_index.scores_for(query, []) == []
    assert corpus_index.scores_for([], ids) == []
    assert corpus_index.scores_for(query, [10_000]) == []  # not in the index
    with pytest.raises(InvalidInputError):
        corpus_index.scores_for(query, ["7"])  # type: ignore[list-item]


def test_documents_alone_score_as_tantivy_would_index_them(tmp_path: Path) -> None:
    """With nothing published, serving scores queued chunks by the same formula alone."""
    from memory_pipeline.index import bm25

    docs = [(i, c) for i, c in enumerate(CORPUS)]
    index = build(tmp_path / "alone", docs)
    for text in QUERIES:
        query = dedupe(tokenize(text))
        expected = index.search(query, 1000)
        got = bm25.score_documents(query, docs)
        assert [i for i, _ in got] == [i for i, _ in expected], text
        for (_, a), (_, b) in zip(got, expected, strict=True):
            assert a == pytest.approx(b, rel=REL_TOL)


def _df(term: str) -> int:
    return {"a": 3, "b": 1}.get(term, 0)


@pytest.mark.parametrize(
    ("query", "docs", "asked"),
    [
        (["a", "b", "a", ""], [(1, ["a", "c"]), (2, ["b", "b", "a"])], [["a", "b"]]),
        ([], [(1, ["a"])], []),
        (["", ""], [(1, ["a"])], []),
        (["a"], [], []),
    ],
)
def test_score_external_asks_an_index_its_statistics_once_and_only_when_needed(
    query: list[str], docs: list[tuple[int, list[str]]], asked: list[list[str]]
) -> None:
    """Every backend's ``score_external`` is this: the query's distinct terms, the
    index's statistics for them (nothing asked when there is nothing to score), BM25."""
    calls: list[list[str]] = []

    def stats(terms: Sequence[str]) -> bm25.IndexStats:
        calls.append(list(terms))
        return bm25.IndexStats(n_docs=10, n_tokens=50.0, doc_freq=_df)

    got = bm25.score_external(query, docs, stats)
    assert calls == asked
    expected = (
        bm25.score_documents(["a", "b"], docs, n_index=10, tokens_index=50.0, doc_freq_index=_df)
        if asked
        else []
    )
    assert got == expected
