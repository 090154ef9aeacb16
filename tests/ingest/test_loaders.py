"""Loaders on real files in tmp_path: every format, every rejection and its message."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.ingest import (
    DEFAULT_MAX_BYTES,
    SUPPORTED_SUFFIXES,
    load_file,
    load_text,
    normalized_content_hash,
)


def make_pdf(pages: list[str], title: str | None = None) -> bytes:
    """A minimal valid PDF (Helvetica text, one content stream per page, exact xref offsets).

    pypdf cannot author text, so the file is written by hand from the classic tiny template.
    """
    n = len(pages)
    font_id, info_id = 3 + 2 * n, 4 + 2 * n
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids ["
        + b" ".join(f"{3 + 2 * i} 0 R".encode() for i in range(n))
        + f"] /Count {n} >>".encode(),
    ]
    for i, text in enumerate(pages):
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode("latin-1") if text else b""
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R "
            f"/Resources << /Font << /F1 {font_id} 0 R >> >> >>".encode()
        )
        objects.append(f"<< /Length {len(stream)} >>\nstream\n".encode() + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    objects.append(f"<< /Title ({title}) >>".encode() if title else b"<< >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{off:010d} 00000 n \n".encode() for off in offsets)
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R /Info {info_id} 0 R >>\n"
        f"startxref\n{xref}\n%%EOF\n"
    ).encode()
    return bytes(out)


def write(tmp_path: Path, name: str, data: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def test_markdown_front_matter_is_parsed_and_removed(tmp_path: Path) -> None:
    body = "# Heading\n\nBody text.\n"
    data = "---\ntitle: From Front Matter\ndate: 2024-05-01\ntags: [a, b]\n---\n" + body
    path = write(tmp_path, "note.md", data)
    doc = load_file(path)
    assert doc.title == "From Front Matter"
    assert doc.front_matter == {
        "title": "From Front Matter",
        "date": dt.date(2024, 5, 1),
        "tags": ["a", "b"],
    }
    assert doc.text == body
    assert doc.fmt == "markdown"
    assert doc.raw == data.encode()
    assert doc.source == str(path.resolve())
    assert doc.modified_at is not None and doc.modified_at.tzinfo == dt.UTC


@pytest.mark.parametrize(
    ("name", "content", "title"),
    [
        ("a.md", "```\n# not a heading\n```\n\n## Real Heading\n\ntext", "Real Heading"),
        ("b.md", "no heading at all", "b"),
        ("c.markdown", "---\ntags: [x]\n---\n# H1 Title\n", "H1 Title"),
        ("d.txt", "# looks like a heading\nbut this is text", "d"),
        ("e.MD", "# Upper Suffix", "Upper Suffix"),
    ],
)
def test_title_fallbacks(tmp_path: Path, name: str, content: str, title: str) -> None:
    assert load_file(write(tmp_path, name, content)).title == title


@pytest.mark.parametrize(("suffix", "fmt"), sorted(SUPPORTED_SUFFIXES.items()))
def test_every_supported_suffix_loads(tmp_path: Path, suffix: str, fmt: str) -> None:
    data = make_pdf(["Hello"]) if fmt == "pdf" else "<p>Hello</p>" if fmt == "html" else "Hello"
    doc = load_file(write(tmp_path, "doc" + suffix, data))
    assert doc.fmt == fmt
    assert "Hello" in doc.text


def test_bom_and_crlf_are_normalised(tmp_path: Path) -> None:
    doc = load_file(write(tmp_path, "w.txt", b"\xef\xbb\xbfline one\r\nline two\r\n"))
    assert doc.text == "line one\nline two\n"
    assert doc.raw.startswith(b"\xef\xbb\xbf")  # raw stays exact: doc_id hashes these bytes


def test_html_is_converted_to_markdownish_text(tmp_path: Path) -> None:
    html = """<!DOCTYPE html><html><head><title>Page  Title</title>
    <style>p { color: red }</style><script>var secret = 1;</script></head>
    <body><nav><a href="/">Home</a></nav><h1>Main <em>Heading</em></h1>
    <p>First paragraph
       wraps here.</p><!-- a comment --><script>alert("x")</script>
    <h2>Sub</h2><ul><li>one</li><li>two</li></ul><pre>code  line</pre></body></html>"""
    doc = load_file(write(tmp_path, "page.html", html))
    assert doc.title == "Page Title"
    assert doc.text == (
        "Home\n\n# Main Heading\n\nFirst paragraph wraps here.\n\n## Sub\n\n- one\n\n- two"
        "\n\n```\ncode  line\n```"
    )
    for gone in ("secret", "alert", "color", "comment"):
        assert gone not in doc.text


def test_html_title_falls_back_to_first_heading(tmp_path: Path) -> None:
    doc = load_file(write(tmp_path, "x.htm", "<body><h2>Only H2</h2><p>text</p></body>"))
    assert doc.title == "Only H2"


def test_pdf_text_and_metadata_title(tmp_path: Path) -> None:
    path = write(
        tmp_path, "paper.pdf", make_pdf(["First page text", "Second page (2)"], "PDF Title")
    )
    doc = load_file(path)
    assert doc.fmt == "pdf"
    assert doc.title == "PDF Title"
    assert doc.text == "First page text\n\nSecond page (2)"
    assert doc.front_matter == {}


def test_pdf_without_title_uses_stem(tmp_path: Path) -> None:
    assert load_file(write(tmp_path, "report.pdf", make_pdf(["Some text"]))).title == "report"


def _directory(tmp_path: Path) -> Path:
    path = tmp_path / "folder"
    path.mkdir()
    return path


def _fifo(tmp_path: Path) -> Path:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no mkfifo on this platform")
    path = tmp_path / "pipe.txt"
    os.mkfifo(path)
    return path


BAD_INPUTS: list[tuple[str, Callable[[Path], Path], list[str]]] = [
    ("missing", lambda d: d / "nope.md", ["nope.md", "no such file", "check the path"]),
    (
        "directory",
        _directory,
        ["folder", "is a directory", "pass the files inside", "ingest the folder"],
    ),
    (
        "unsupported",
        lambda d: write(d, "doc.docx", "x"),
        ["doc.docx", "'.docx'", "supported: .htm, .html, .markdown, .md, .pdf, .txt"],
    ),
    ("no suffix", lambda d: write(d, "README", "x"), ["README", "(no suffix)"]),
    ("empty", lambda d: write(d, "empty.md", b""), ["empty.md", "empty or whitespace only"]),
    ("whitespace", lambda d: write(d, "ws.txt", " \n\t\n"), ["ws.txt", "empty or whitespace only"]),
    ("unicode blank", lambda d: write(d, "u.txt", "\u3000\u00a0"), ["u.txt", "no text content"]),
    (
        "front matter only",
        lambda d: write(d, "fm.md", "---\ntitle: x\n---\n\n"),
        ["fm.md", "only front matter"],
    ),
    (
        "bad yaml",
        lambda d: write(d, "y.md", "---\ntitle: [unclosed\n---\nbody"),
        ["y.md", "front matter is not valid YAML", "line"],
    ),
    (
        "binary",
        lambda d: write(d, "bin.md", b"abc\x00def"),
        ["bin.md", "NUL bytes", "byte offset 3", "binary"],
    ),
    ("binary html", lambda d: write(d, "b.html", b"<p>\x00</p>"), ["b.html", "NUL bytes"]),
    (
        "bad utf-8",
        lambda d: write(d, "latin.txt", "caf\u00e9 ok".encode("latin-1")),
        ["latin.txt", "not valid UTF-8", "0xe9", "byte offset 3", "re-save it as UTF-8"],
    ),
    (
        "script-only html",
        lambda d: write(d, "s.html", "<script>x()</script>"),
        ["s.html", "no text content"],
    ),
    (
        "garbage pdf",
        lambda d: write(d, "bad.pdf", b"this is not a pdf at all"),
        ["bad.pdf", "cannot be parsed as a PDF", "corrupted"],
    ),
    (
        "truncated pdf",
        lambda d: write(d, "cut.pdf", make_pdf(["text"])[:60]),
        ["cut.pdf", "cannot be parsed as a PDF"],
    ),
    (
        "textless pdf",
        lambda d: write(d, "scan.pdf", make_pdf([""])),
        ["scan.pdf", "no extractable text", "OCR"],
    ),
    ("fifo", _fifo, ["pipe.txt", "not a regular file"]),
]


@pytest.mark.parametrize(("case", "make", "expected"), BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_bad_inputs_are_rejected_with_a_helpful_message(
    tmp_path: Path, case: str, make: Callable[[Path], Path], expected: list[str]
) -> None:
    path = make(tmp_path)
    with pytest.raises(InvalidInputError) as info:
        load_file(path)
    for fragment in expected:
        assert fragment in str(info.value), (case, str(info.value))


def test_too_large_is_rejected_from_stat_without_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, "big.txt", "x" * 101)

    def no_open(*args: object, **kwargs: object) -> None:
        raise AssertionError("file was opened although stat() already showed it is too large")

    monkeypatch.setattr(Path, "open", no_open)
    with pytest.raises(
        InvalidInputError, match=r"big\.txt is 0\.0 MB \(101 bytes\), over the 0\.0 MB limit"
    ):
        load_file(path, max_bytes=100)


def test_file_at_exactly_max_bytes_loads(tmp_path: Path) -> None:
    assert load_file(write(tmp_path, "ok.txt", "y" * 100), max_bytes=100).text == "y" * 100
    assert DEFAULT_MAX_BYTES == 20 * 1024 * 1024


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_max_bytes_is_validated(tmp_path: Path, bad: object) -> None:
    with pytest.raises(InvalidInputError, match="max_bytes"):
        load_file(write(tmp_path, "a.txt", "a"), max_bytes=bad)  # type: ignore[arg-type]


def test_load_text() -> None:
    doc = load_text("Remember: the user prefers tea.\r\n", "  prefs ")
    assert (doc.source, doc.title, doc.fmt) == ("text:prefs", "prefs", "markdown")
    assert doc.text == "Remember: the user prefers tea.\n"
    assert doc.raw == b"Remember: the user prefers tea.\r\n"
    assert doc.front_matter == {} and doc.modified_at is None


@pytest.mark.parametrize(
    ("text", "title", "message"),
    [
        (b"bytes", "t", "text must be a str"),
        (None, "t", "text must be a str"),
        ("", "t", "empty or whitespace only"),
        ("  \n ", "t", "empty or whitespace only"),
        ("ok", "", "title must be a non-empty str"),
        ("ok", 3, "title must be a non-empty str"),
        ("bad \ud800 surrogate", "t", "unencodable character at index 4"),
    ],
)
def test_load_text_rejects(text: object, title: object, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        load_text(text, title)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("Hello   World\n", "hello world", True),
        ("ＡＢＣ　１２３", "abc 123", True),  # NFKC folds full-width forms
        ("Straße", "STRASSE", True),  # casefold, not lower
        ("hello world", "hello  there", False),
    ],
)
def test_normalized_content_hash(a: str, b: str, same: bool) -> None:
    ha, hb = normalized_content_hash(a), normalized_content_hash(b)
    assert len(ha) == 64 and int(ha, 16) >= 0
    assert (ha == hb) is same


SAMPLE_CORPUS = Path(__file__).resolve().parents[2] / "memory_pipeline" / "sample_corpus"
SAMPLE_FILES = sorted(p for p in SAMPLE_CORPUS.glob("*.md") if p.name != "README.md")


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=[p.name for p in SAMPLE_FILES])
def test_sample_corpus_documents_load_with_front_matter(path: Path) -> None:
    doc = load_file(path)
    assert {"title", "knowledge_type", "date", "tags"} <= set(doc.front_matter)
    assert doc.title == doc.front_matter["title"]
    assert isinstance(doc.front_matter["date"], dt.date)
    assert not doc.text.startswith("---")


def test_sample_corpus_covers_every_kind_and_both_languages() -> None:
    docs = [load_file(p) for p in SAMPLE_FILES]
    assert 4 <= len(docs) <= 6
    assert {d.front_matter["knowledge_type"] for d in docs} == {
        "principle",
        "paper",
        "news",
        "experiment",
    }
    japanese = [d for d in docs if any("\u3040" <= ch <= "\u30ff" for ch in d.text)]
    assert 0 < len(japanese) < len(docs)
    assert len((SAMPLE_CORPUS / "README.md").read_text(encoding="utf-8").splitlines()) == 2


def test_a_too_long_name_says_to_shorten_it(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="shorten the path"):
        load_file(tmp_path / ("x" * 300 + ".md"))
