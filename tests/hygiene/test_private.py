"""``<private>`` and ``<memory-recall>`` spans (hygiene/private.py): a real pair of tags is
dropped with what it holds; an opening tag never closed drops the rest of a message and
nothing of a document (which reports its line); a tag written as code is not a tag."""

from __future__ import annotations

import pytest

from memory_pipeline.hygiene.private import Unclosed, code_spans, drop_spans

# text, kept, spans counted: the same for a message and a document
PAIRED = [
    ("a <private>b</private> c", "a  c", {"private": 1}),
    ("a <PRIVATE >b\nc</private> d <private>e</private>", "a  d ", {"private": 2}),
    ("x <memory-recall>\nrecalled\n</memory-recall>\ny", "x \ny", {"memory-recall": 1}),
    # one span at a time: another kind's tags inside a span go with it
    ("a <private>b <memory-recall> c</private> d", "a  d", {"private": 1}),
    ("a <private>b <private> c</private> d", "a  d", {"private": 1}),
    (
        "<memory-recall>x</memory-recall><private>y</private>z",
        "z",
        {"memory-recall": 1, "private": 1},
    ),
    ("no tags at all < here", "no tags at all < here", {}),
]


@pytest.mark.parametrize(("text", "kept", "counts"), PAIRED)
@pytest.mark.parametrize("document", [False, True])
def test_a_pair_of_tags_is_dropped_with_what_it_holds(
    text: str, kept: str, counts: dict[str, int], document: bool
) -> None:
    done = drop_spans(text, document=document)
    assert (done.text, dict(done.counts), done.unclosed) == (kept, counts, ())


UNCLOSED = [
    # text, kept from a message, kept from a document, the document's unclosed tags
    ("a <private>b and the rest", "a ", "a <private>b and the rest", [("private", 1, 2)]),
    (
        "one\ntwo <private>x</private>\nthree <private> four\nfive",
        "one\ntwo \nthree ",
        "one\ntwo \nthree <private> four\nfive",
        [("private", 3, 35)],
    ),
    (
        "a <private> b <memory-recall>c</memory-recall> d",
        "a ",
        "a <private> b  d",
        [("private", 1, 2)],
    ),
    (
        "<private>1\n<private>2\n<memory-recall>3",
        "",
        "<private>1\n<private>2\n<memory-recall>3",
        [("private", 1, 0), ("private", 2, 11), ("memory-recall", 3, 22)],
    ),
]


@pytest.mark.parametrize(("text", "message", "document", "unclosed"), UNCLOSED)
def test_an_unclosed_tag_ends_a_message_and_keeps_a_document_whole(
    text: str, message: str, document: str, unclosed: list[tuple[str, int, int]]
) -> None:
    from_message = drop_spans(text)
    assert from_message.text == message and from_message.unclosed == ()
    assert from_message.counts.total() >= 1
    from_document = drop_spans(text, document=True)
    assert from_document.text == document
    assert from_document.unclosed == tuple(Unclosed(*u) for u in unclosed)


@pytest.mark.parametrize(
    ("text", "message", "document", "counts"),
    [
        ("a </private> b", "a  b", "a </private> b", {"private": 1}),
        ("a <private>b</private> c </private> d", "a  c  d", "a  c </private> d", {"private": 2}),
    ],
)
def test_a_stray_closing_tag_is_dropped_from_a_message_and_kept_in_a_document(
    text: str, message: str, document: str, counts: dict[str, int]
) -> None:
    assert (drop_spans(text).text, dict(drop_spans(text).counts)) == (message, counts)
    kept = drop_spans(text, document=True)
    assert kept.text == document and kept.counts.total() == counts["private"] - 1


AS_CODE = [
    "write `<private>` around it",
    "write ``<private>`` around it, or `` `<private>` ``",
    "spans: `<private>…</private>`, then `</private>` alone",
    "a code span may wrap `<private>\nacross` a line",
    "```\n<private>\n```\nafter",
    "~~~markdown\n<memory-recall>\n~~~\nafter",
    "  ````text\n```\n<private>\n````\nafter",  # a shorter fence inside does not close it
]


@pytest.mark.parametrize("text", AS_CODE)
@pytest.mark.parametrize("document", [False, True])
def test_a_tag_written_as_code_is_not_a_tag(text: str, document: bool) -> None:
    done = drop_spans(text, document=document)
    assert (done.text, dict(done.counts), done.unclosed) == (text, {}, ())


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        # a lone backtick is a backtick: the tags after it are tags
        ("it's a ` then <private>x</private> y", "it's a ` then  y"),
        # a code span does not cross a blank line
        ("a `b\n\n<private>x</private> c`", "a `b\n\n c`"),
        # runs of different lengths do not close each other
        ("a `` <private>x</private> ` b", "a ``  ` b"),
        # a closed fence ends its block
        ("```\n`\n```\n<private>x</private>", "```\n`\n```\n"),
        # a backtick fence's info string holds no backtick: this is inline code, not a fence
        ("``` a ` b\n<private>x</private>", "``` a ` b\n"),
        # a fence never closed hides nothing (a message that opens one, a chunk cut in one)
        ("text\n```\n<private> rest", "text\n```\n"),
        ("end of a block\n```\n<private>x</private> y", "end of a block\n```\n y"),
        ("~~~~\n~~~\n<private>x</private>", "~~~~\n~~~\n"),
    ],
)
def test_what_only_looks_like_code_leaves_the_tags_tags(text: str, kept: str) -> None:
    assert drop_spans(text).text == kept


@pytest.mark.parametrize(
    ("text", "spans"),
    [
        ("a `b` c", [(2, 5)]),
        ("a ``b ` c`` d `", [(2, 11)]),
        ("x\n```py\ny\n```\nz", [(2, 13)]),
        ("x\n~~~\ny", []),
        ("x\n~~~\n```\ny\n```", [(6, 15)]),
        ("`a`\n\n`b", [(0, 3)]),
    ],
)
def test_code_spans_are_found(text: str, spans: list[tuple[int, int]]) -> None:
    assert code_spans(text) == spans


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "unit", ["`", "`<private>", "<private>`", "```\n", "` `` ```", "a\n\n`", "````\n```\n"]
)
def test_code_and_tags_are_read_in_linear_time(unit: str) -> None:
    """Runs of backticks and fences that would cost a quadratic reader minutes here."""
    text = unit * (400_000 // len(unit)) + "<private>"
    drop_spans(text)
    drop_spans(text, document=True)
