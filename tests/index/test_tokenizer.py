"""Table tests of the BM25 tokenizer (memory_pipeline.index.tokenizer)."""

from __future__ import annotations

import pytest

from memory_pipeline.index.tokenizer import tokenize

# Unigrams and bigrams of インデックス, in position order.
INDEX = ["イ", "イン", "ン", "ンデ", "デ", "デッ", "ッ", "ック", "ク", "クス", "ス"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # empty / nothing to index
        ("", []),
        ("   \t\n ", []),
        ("!!! ... --- ??? ", []),
        ("…「」『』【】、。・", []),
        # English
        ("Hello World", ["hello", "world"]),
        ("The quick brown fox.", ["the", "quick", "brown", "fox"]),
        ("Hybrid dense+BM25 retrieval!", ["hybrid", "dense", "bm25", "retrieval"]),
        ("state-of-the-art", ["state", "of", "the", "art"]),
        ("snake_case and CamelCase", ["snake", "case", "and", "camelcase"]),
        ("e-mail: bob@example.com", ["e", "mail", "bob", "example", "com"]),
        ("https://x.org/a?b=c#d", ["https", "x", "org", "a", "b", "c", "d"]),
        # apostrophes: kept inside words, final possessive 's dropped, curly -> ASCII
        ("Don't stop", ["don't", "stop"]),
        ("don’t stop", ["don't", "stop"]),
        ("the user's memory", ["the", "user", "memory"]),
        ("the user’s memory", ["the", "user", "memory"]),
        ("James's and users' notes", ["james", "and", "users", "notes"]),
        ("O'Reilly rock'n'roll", ["o'reilly", "rock'n'roll"]),
        ("'quoted' words", ["quoted", "words"]),
        # digits
        ("2024", ["2024"]),
        ("v2 gpt-4o 3.14 1,000", ["v2", "gpt", "4o", "3", "14", "1", "000"]),
        ("top_k=50", ["top", "k", "50"]),
        # full-width and compatibility forms (NFKC)
        ("ＦＡＩＳＳ１２３", ["faiss123"]),
        ("Ｈｅｌｌｏ，　Ｗｏｒｌｄ！", ["hello", "world"]),
        ("ﬁle ﬂow", ["file", "flow"]),
        ("① ② ⅻ", ["1", "2", "xii"]),
        ("ｲﾝﾃﾞｯｸｽ", INDEX),  # half-width katakana
        # case folding beyond ASCII
        ("Straße", ["strasse"]),
        ("ΣΊΣΥΦΟΣ", ["σίσυφοσ"]),
        ("Привет, МИР!", ["привет", "мир"]),
        ("Café déjà vu", ["café", "déjà", "vu"]),
        ("e\u0301clair", ["éclair"]),  # decomposed accent is composed by NFKC
        ("हिन्दी भाषा", ["हिन्दी", "भाषा"]),  # combining vowel signs stay in the word
        # Japanese: no spaces, unigrams + overlapping bigrams, script changes don't split a run
        ("インデックス", INDEX),
        ("の", ["の"]),
        (
            "日本語の検索",
            ["日", "日本", "本", "本語", "語", "語の", "の", "の検", "検", "検索", "索"],
        ),
        ("検索。記憶", ["検", "検索", "索", "記", "記憶", "憶"]),
        ("データ・検索", ["デ", "デー", "ー", "ータ", "タ", "検", "検索", "索"]),  # ・ separates
        ("ユーザー", ["ユ", "ユー", "ー", "ーザ", "ザ", "ザー", "ー"]),
        ("人々", ["人", "人々", "々"]),
        # mixed Latin + CJK
        ("FAISSのIVFインデックス", ["faiss", "の", "ivf", *INDEX]),
        ("BM25とFAISS", ["bm25", "と", "faiss"]),
        ("Python3で書く", ["python3", "で", "で書", "書", "書く", "く"]),
        ("AIの記憶", ["ai", "の", "の記", "記", "記憶", "憶"]),
        # Chinese and Korean
        ("混合检索", ["混", "混合", "合", "合检", "检", "检索", "索"]),
        ("한국어 검색", ["한", "한국", "국", "국어", "어", "검", "검색", "색"]),
    ],
)
def test_tokenize_table(text: str, expected: list[str]) -> None:
    assert tokenize(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Plain ASCII text, with punctuation!",
        "Don't drop the user's apostrophes; O'Reilly's books.",
        "snake_case v2 3.14 state-of-the-art top_k=50",
        "'s 's's x's it's",
    ],
)
def test_ascii_fast_path_agrees_with_unicode_path(text: str) -> None:
    # A no-break space is turned into a space by NFKC but forces the general path.
    assert tokenize(text) == tokenize(text + "\u00a0")


@pytest.mark.parametrize(
    "text",
    [
        "FAISSのIVFインデックス\u3000全角スペース\u00a0nbsp\u2003em\u2028line",
        "tabs\tand\nnewlines\r\n",
        "zero\u200bwidth\ufeffmarks",
        "日本語 English Русский Ελληνικά 한국어",
    ],
)
def test_tokens_are_never_empty_and_never_contain_whitespace(text: str) -> None:
    tokens = tokenize(text)
    assert tokens
    for token in tokens:
        assert token
        assert token == "".join(token.split())
        assert len(token.split()) == 1


def test_query_and_document_tokenize_the_same() -> None:
    doc = tokenize("長期記憶エージェントはFAISSのIVFインデックスを使う")
    query = tokenize("IVFインデックス")
    assert set(query) <= set(doc)


def test_a_one_character_word_matches_in_any_context() -> None:
    # 卵 ("egg") is followed by different particles in the question and the text:
    # no bigram is shared, the unigram is.
    query, doc = set(tokenize("卵は何色ですか")), set(tokenize("この魚の卵を見た"))
    assert "卵" in query & doc
    assert not {t for t in query & doc if len(t) == 2 and "卵" in t}
