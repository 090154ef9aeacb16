"""chunk_document: budgets, structure, overlap, Japanese, validation and speed."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable

import pytest

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.ingest import Chunk, chunk_document


def words(text: str) -> int:
    return len(text.split())


def chars(text: str) -> int:
    return len(text)


def with_specials(text: str) -> int:
    """Like a BERT tokenizer: every call adds [CLS] and [SEP]."""
    return len(text.split()) + 2


def ends_glued(text: str) -> int:
    """Not additive: a joined ". " costs extra, so summed piece counts underestimate."""
    return len(text.split()) + 3 * text.count(". ")


EN_DOC = (
    "# Memory Design\n\nIntro sentence one. Intro sentence two!\n\n"
    "## Storage\n\n"
    + " ".join(f"Storage fact number {i} is written down here." for i in range(40))
    + "\n\nA second paragraph about storage? Yes, it exists.\n\n"
    "### Details\n\n"
    + " ".join(f"Detail {i} explains a corner case of the storage layer." for i in range(25))
    + "\n\n## Retrieval\n\nShort section.\n"
)
JA_DOC = (
    "# 記憶の設計\n\n"
    + "".join(f"これは{i}番目の文で、検索の設計について説明します。" for i in range(40))
    + "\n\n## 評価\n\n"
    + "".join(f"評価{i}の結果は良好でした！" for i in range(30))
)
CODE_DOC = (
    "# Code\n\nBefore the code.\n\n```python\n# not a heading\n"
    + "\n".join(f"value_{i} = compute({i})  # step {i}" for i in range(60))
    + "\n```\n\nAfter the code.\n"
)
LONG_LINE_DOC = "# Long\n\n" + "x" * 3000 + " " + "word " * 700
JA_NO_PUNCT = "句読点のない長い日本語の文章" * 400

CASES = [
    ("en-words", EN_DOC, words, 64, 8),
    ("en-words-big", EN_DOC, words, 256, 32),
    ("en-chars", EN_DOC, chars, 200, 40),
    ("en-specials", EN_DOC, with_specials, 48, 8),
    ("en-nonadditive", EN_DOC, ends_glued, 64, 8),
    ("ja-chars", JA_DOC, chars, 80, 20),
    ("ja-chars-no-overlap", JA_DOC, chars, 64, 0),
    ("code-words", CODE_DOC, words, 40, 4),
    ("code-chars", CODE_DOC, chars, 120, 10),
    ("long-line-chars", LONG_LINE_DOC, chars, 100, 10),
    ("long-line-words", LONG_LINE_DOC, words, 50, 10),
    ("ja-no-punct", JA_NO_PUNCT, chars, 50, 10),
]


def check_invariants(chunks: list[Chunk], counter: Callable[[str], int], limit: int) -> None:
    assert chunks, "expected at least one chunk"
    for i, chunk in enumerate(chunks):
        assert chunk.index == i
        assert chunk.text.strip(), "empty chunk emitted"
        assert chunk.token_count == counter(chunk.text)
        assert chunk.token_count <= limit, (chunk.token_count, chunk.text)


def body(chunk: Chunk) -> str:
    """Chunk text without its heading prefix line."""
    return chunk.text.split("\n\n", 1)[1] if chunk.heading_path else chunk.text


@pytest.mark.parametrize(
    ("name", "doc", "counter", "limit", "overlap"), CASES, ids=[c[0] for c in CASES]
)
def test_budget_respected_and_nothing_lost(
    name: str, doc: str, counter: Callable[[str], int], limit: int, overlap: int
) -> None:
    chunks = chunk_document(doc, token_counter=counter, max_chunk_size=limit, overlap=overlap)
    check_invariants(chunks, counter, limit)
    # Without overlap, the bodies concatenated hold exactly the document's non-heading text.
    plain = chunk_document(doc, token_counter=counter, max_chunk_size=limit, overlap=0)
    joined = "".join(re.sub(r"\s+", "", body(c)) for c in plain)
    expected = re.sub(
        r"\s+", "", re.sub(r"(?m)^#{1,6} .*$", "", doc.replace("# not a heading", ""))
    )
    if "```" in doc:
        joined = joined.replace("#notaheading", "")
    assert joined == expected


def test_headings_are_carried_as_prefix_and_path() -> None:
    chunks = chunk_document(EN_DOC, token_counter=words, max_chunk_size=64, overlap=8)
    by_path = {c.heading_path: c for c in chunks}
    assert set(by_path) == {
        ("Memory Design",),
        ("Memory Design", "Storage"),
        ("Memory Design", "Storage", "Details"),
        ("Memory Design", "Retrieval"),  # "### Details" is popped by the next "##"
    }
    for c in chunks:
        marks = ["#" * (i + 1) + " " + h for i, h in enumerate(c.heading_path)]
        assert c.text.startswith(" > ".join(marks) + "\n\n")
    assert by_path[("Memory Design", "Retrieval")].text == (
        "# Memory Design > ## Retrieval\n\nShort section."
    )


def test_overlap_carries_trailing_sentences_within_a_section_only() -> None:
    chunks = chunk_document(EN_DOC, token_counter=words, max_chunk_size=64, overlap=12)
    storage = [c for c in chunks if c.heading_path == ("Memory Design", "Storage")]
    assert len(storage) >= 3
    for prev, nxt in itertools.pairwise(storage):
        last_sentence = re.findall(r"[^.!?]+[.!?]", body(prev))[-1].strip()
        assert body(nxt).startswith(last_sentence)
    # The first chunk of a section never starts with text from the previous section.
    first_details = next(c for c in chunks if c.heading_path[-1:] == ("Details",))
    assert body(first_details).startswith("Detail 0 ")


def test_overlap_zero_disables_it() -> None:
    chunks = chunk_document(EN_DOC, token_counter=words, max_chunk_size=64, overlap=0)
    bodies = [body(c) for c in chunks]
    sentences = [s for b in bodies for s in re.findall(r"[^.!?]+[.!?]", b)]
    assert len(sentences) == len(set(sentences))


def test_japanese_splits_at_sentence_ends_and_overlaps() -> None:
    chunks = chunk_document(JA_DOC, token_counter=chars, max_chunk_size=80, overlap=30)
    check_invariants(chunks, chars, 80)
    assert all(" " not in body(c) for c in chunks)
    for c in chunks:
        assert body(c)[-1] in "。！", body(c)  # never cut mid-sentence when sentences fit
    first, second = chunks[0], chunks[1]
    assert first.heading_path == second.heading_path == ("記憶の設計",)
    last = re.findall(r"[^。！]+[。！]", body(first))[-1]
    assert body(second).startswith(last)
    assert chunks[-1].heading_path == ("記憶の設計", "評価")


def test_code_block_kept_whole_when_it_fits() -> None:
    doc = "# T\n\nIntro.\n\n```\nline one\n\n# inside code\nline three\n```\n\nOutro."
    chunks = chunk_document(doc, token_counter=words, max_chunk_size=16, overlap=0)
    code = [c for c in chunks if "```" in c.text]
    assert len(code) == 1
    assert "```\nline one\n\n# inside code\nline three\n```" in code[0].text
    assert all(c.heading_path == ("T",) for c in chunks)


def test_long_code_block_is_split_by_lines() -> None:
    chunks = chunk_document(CODE_DOC, token_counter=words, max_chunk_size=40, overlap=0)
    code_chunks = [c for c in chunks if "compute(" in c.text]
    assert len(code_chunks) > 1
    for c in code_chunks:
        for line in body(c).split("\n"):
            assert not line.startswith("value_") or re.fullmatch(
                r"value_\d+ = compute\(\d+\)  # step \d+", line
            )


def test_paragraph_that_fits_a_fresh_chunk_is_not_split() -> None:
    para_a = " ".join(["alpha"] * 30) + "."
    para_b = "Beta one. " + " ".join(["beta"] * 20) + "."
    chunks = chunk_document(
        f"{para_a}\n\n{para_b}", token_counter=words, max_chunk_size=40, overlap=0
    )
    assert [c.text for c in chunks] == [para_a, para_b]


def test_small_chunk_is_filled_rather_than_left_tiny() -> None:
    para_b = " ".join(f"Beta {i}." for i in range(15))  # 30 words
    chunks = chunk_document(f"Tiny.\n\n{para_b}", token_counter=words, max_chunk_size=20, overlap=0)
    assert chunks[0].text.startswith("Tiny.\n\nBeta 0. Beta 1.")
    assert chunks[0].token_count == 19


@pytest.mark.parametrize("fmt", ["text", "pdf"])
def test_plain_text_ignores_markdown_headings(fmt: str) -> None:
    doc = "# not a heading\n\nFirst. Second."
    chunks = chunk_document(doc, token_counter=words, max_chunk_size=16, overlap=0, fmt=fmt)
    assert [(c.text, c.heading_path) for c in chunks] == [(doc, ())]


def test_html_fmt_uses_markdown_headings() -> None:
    chunks = chunk_document(
        "# A\n\ntext", token_counter=words, max_chunk_size=16, overlap=0, fmt="html"
    )
    assert chunks[0].heading_path == ("A",)


@pytest.mark.parametrize(
    ("doc", "texts"), [("", []), (" \n\n ", []), ("# Only A Title", ["# Only A Title"])]
)
def test_degenerate_documents(doc: str, texts: list[str]) -> None:
    assert [c.text for c in chunk_document(doc, token_counter=words)] == texts


def test_overlong_heading_prefix_is_shortened() -> None:
    doc = "# " + "very " * 40 + "long\n\n## Short\n\nBody sentence here."
    chunks = chunk_document(doc, token_counter=words, max_chunk_size=32, overlap=0)
    check_invariants(chunks, words, 32)
    assert chunks[0].text == "## Short\n\nBody sentence here."
    assert chunks[0].heading_path[-1] == "Short"


def test_counter_is_called_linearly() -> None:
    calls: list[int] = []

    def counting(text: str) -> int:
        calls.append(len(text))
        return len(text.split())

    sentences = 2000
    doc = "# T\n\n" + "\n\n".join(
        " ".join(f"Sentence {i}-{j} has some words." for j in range(5))
        for i in range(sentences // 5)
    )
    chunks = chunk_document(doc, token_counter=counting, max_chunk_size=64, overlap=16)
    # One call per sentence + one per chunk + a few constants (empty string, prefix, separators).
    assert len(calls) <= sentences + len(chunks) + 10
    assert sum(calls) <= 3 * len(doc)


def test_work_grows_linearly_with_the_document() -> None:
    """Twice the text costs twice the counting: no re-counting of growing chunks.

    Measured in calls of the token counter and characters handed to it, not in time;
    a quadratic packer would show about four times the characters on the double input.
    """

    def work(paragraphs: int) -> tuple[int, int, list[Chunk]]:
        calls = chars = 0

        def counting(text: str) -> int:
            nonlocal calls, chars
            calls += 1
            chars += len(text)
            return words(text)

        para = " ".join(f"Sentence {i} talks about retrieval memory design." for i in range(8))
        doc = "# Big\n\n" + "\n\n".join([para] * paragraphs)
        chunks = chunk_document(doc, token_counter=counting, max_chunk_size=256, overlap=32)
        return calls, chars, chunks

    calls, chars, chunks = work(400)
    calls2, chars2, chunks2 = work(800)
    assert chunks and max(c.token_count for c in chunks2) <= 256
    assert len(chunks2) == pytest.approx(2 * len(chunks), abs=2)
    assert 2 * calls - 10 <= calls2 <= 2 * calls + 10
    assert chars2 <= 2 * chars + 1000


def bad_counter(text: str) -> int:
    return 1.5  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_chunk_size": 15}, "at least 16"),
        ({"max_chunk_size": True}, "must be an int"),
        ({"max_chunk_size": 64.0}, "must be an int"),
        ({"overlap": -1}, "overlap must be >= 0"),
        ({"max_chunk_size": 64, "overlap": 32}, r"< max_chunk_size/2 \(32\)"),
        ({"overlap": 2.0}, "overlap must be an int"),
        ({"fmt": "docx"}, "unknown fmt 'docx'"),
        ({"text": b"bytes"}, "text must be a str"),
        ({"token_counter": None}, "token_counter must be a callable"),
        ({"token_counter": bad_counter}, "non-negative int"),
        ({"token_counter": lambda s: 300}, "counts 300 tokens for empty text"),
    ],
)
def test_invalid_arguments(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"text": "Some text.", "token_counter": words, **kwargs}
    with pytest.raises(InvalidInputError, match=message):
        chunk_document(**args)  # type: ignore[arg-type]
