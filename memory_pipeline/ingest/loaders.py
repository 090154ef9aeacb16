"""Read one source (file or in-memory text) into a LoadedDocument, or say exactly why not.

Every rejection is an InvalidInputError naming the path and the next step, because the
callers are batch ingest jobs and agents: a vague "bad file" costs a human a debugging
session, a precise message does not.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import re
import stat
import unicodedata
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import yaml

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.ingest.turns import TurnText
from memory_pipeline.metadata import MAX_TITLE_CHARS, check_text, strip_controls

SUPPORTED_SUFFIXES: dict[str, str] = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".pdf": "pdf",
    ".html": "html",
    ".htm": "html",
}
DEFAULT_MAX_BYTES = 20 * 1024 * 1024

_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?\n)?(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)


@dataclass(frozen=True)
class LoadedDocument:
    source: str
    title: str
    text: str
    fmt: str
    raw: bytes = field(repr=False)
    front_matter: dict[str, object]
    modified_at: datetime | None  # a file's mtime; None for text handed over in memory
    # The id its source gives it (a BEIR corpus id); None: the id is the content hash.
    doc_id: str | None = None
    # A conversation's turns: chunked by turn (ingest/turns.py) instead of by structure.
    turns: tuple[TurnText, ...] = ()
    # The line of the file ``text`` begins at (after a markdown file's front matter).
    first_line: int = 1

    @property
    def from_file(self) -> bool:
        """Loaded from a file (files always carry their mtime), so its name may date it."""
        return self.modified_at is not None


def load_file(
    path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES
) -> LoadedDocument:
    """Load a .md/.markdown/.txt/.pdf/.html/.htm file of at most ``max_bytes`` bytes."""
    path = Path(path)
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes <= 0:
        raise InvalidInputError(f"max_bytes must be a positive integer, got {max_bytes!r}")
    try:
        st = path.stat()
    except FileNotFoundError:
        raise InvalidInputError(
            f"{path}: no such file; check the path (relative paths resolve against {Path.cwd()})"
        ) from None
    except OSError as exc:
        raise InvalidInputError(
            f"{path}: cannot be accessed ({exc.strerror}); {_fix(exc)}"
        ) from exc
    if stat.S_ISDIR(st.st_mode):
        raise InvalidInputError(
            f"{path} is a directory, not a file; pass the files inside, "
            "or ingest the folder with the directory (batch) ingest entry point"
        )
    if not stat.S_ISREG(st.st_mode):
        # FIFOs and devices could block forever or never end; refuse before opening.
        raise InvalidInputError(f"{path} is not a regular file; copy its content to a file first")
    suffix = path.suffix.lower()
    fmt = SUPPORTED_SUFFIXES.get(suffix)
    if fmt is None:
        supported = ", ".join(sorted(SUPPORTED_SUFFIXES))
        raise InvalidInputError(
            f"{path}: unsupported file type {suffix or '(no suffix)'!r}; supported: {supported}. "
            "Convert the file to one of these (or rename it if its content already is one)"
        )
    # Size is checked from stat before any byte is read, so a huge file costs nothing.
    if st.st_size > max_bytes:
        raise InvalidInputError(_too_large(path, st.st_size, max_bytes))
    raw = _read_at_most(path, max_bytes)
    if not raw.strip():
        raise InvalidInputError(
            f"{path} is empty or whitespace only; add content or skip this file"
        )
    modified_at = datetime.fromtimestamp(st.st_mtime, tz=UTC)
    source = str(path.resolve())

    if fmt == "pdf":
        pdf_title, pdf_text = _extract_pdf(path, raw)
        return LoadedDocument(
            source,
            strip_controls(pdf_title or path.stem),
            strip_controls(pdf_text),
            fmt,
            raw,
            {},
            modified_at,
        )

    decoded = _decode_text(path, raw, fmt)
    front_matter: dict[str, object] = {}
    title: str | None = None
    first_line = 1
    if fmt == "markdown":
        front_matter, text = _split_front_matter(path, decoded)
        first_line += decoded.count("\n", 0, len(decoded) - len(text))
        fm_title = front_matter.get("title")
        title = str(fm_title).strip() if fm_title is not None and str(fm_title).strip() else None
        title = title or _first_heading(text)
    elif fmt == "html":
        title, text = _html_to_text(decoded)
    else:
        text = decoded
    # A file's text is cleaned, not refused (as ``load_text`` refuses an argument): the
    # caller cannot fix a file as easily, and terminal escapes in a log are not content.
    text = strip_controls(text)
    if not text.strip():
        what = "only front matter and no body" if front_matter else "no text content"
        raise InvalidInputError(f"{path} has {what}; add content or skip this file")
    return LoadedDocument(
        source,
        strip_controls(title or path.stem),
        text,
        fmt,
        raw,
        front_matter,
        modified_at,
        first_line=first_line,
    )


def load_text(
    text: str, title: str, *, source: str | None = None, doc_id: str | None = None
) -> LoadedDocument:
    """Wrap in-memory text (e.g. an agent's note) as a markdown document.

    Front matter is not parsed here: callers pass metadata explicitly, and agent text that
    happens to start with '---' must not be silently cut. ``source`` (default
    ``text:<title>``) and ``doc_id`` are for records a corpus names itself (``beir:<id>``).
    """
    if not isinstance(text, str):
        raise InvalidInputError(
            f"text must be a str, got {type(text).__name__}; decode bytes first"
        )
    if not isinstance(title, str) or not title.strip():
        raise InvalidInputError(f"title must be a non-empty str, got {title!r}")
    if not text.strip():
        raise InvalidInputError(
            f"text for {title!r} is empty or whitespace only; nothing to ingest"
        )
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        # Lone surrogates (e.g. from a bad JSON decode) cannot be stored or hashed stably.
        raise InvalidInputError(
            f"text for {title!r} has an unencodable character at index {exc.start} "
            "(a lone surrogate?); clean the text before ingesting"
        ) from exc
    title = check_text("title", title.strip())
    if len(title) > MAX_TITLE_CHARS:
        raise InvalidInputError(f"title is {len(title)} characters; at most {MAX_TITLE_CHARS}")
    check_text("text", text, multiline=True)
    body = text.replace("\r\n", "\n").replace("\r", "\n")
    return LoadedDocument(
        source or f"text:{title}", title, body, "markdown", raw, {}, None, doc_id=doc_id
    )


def normalized_content_hash(text: str) -> str:
    """sha256 hex of NFKC + casefold + collapsed whitespace: equal for trivial variants."""
    normalized = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest()


def _fix(exc: OSError) -> str:
    """What to do about an OS error on a path, by its errno."""
    fixes = {
        errno.EACCES: "check its permissions",
        errno.EPERM: "check its permissions",
        errno.ENAMETOOLONG: "shorten the path (a name or the whole path is too long)",
        errno.ELOOP: "a symlink on the way loops; fix or remove it",
        errno.ENOTDIR: "a part of the path is a file, not a folder; check the path",
    }
    return fixes.get(exc.errno or 0, "check the path and its permissions")


def _too_large(path: Path, size: int, max_bytes: int) -> str:
    return (
        f"{path} is {size / 2**20:.1f} MB ({size} bytes), over the {max_bytes / 2**20:.1f} MB "
        "limit; split it into smaller files or raise the limit (HYBRID_RAG_MAX_FILE_BYTES)"
    )


def read_capped(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """A file's bytes, refused before reading when over ``max_bytes``: the one size cap
    (``HYBRID_RAG_MAX_FILE_BYTES``) for plain files and conversation exports alike."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise InvalidInputError(
            f"{path}: cannot be accessed ({exc.strerror}); {_fix(exc)}"
        ) from exc
    if size > max_bytes:
        raise InvalidInputError(_too_large(path, size, max_bytes))
    return _read_at_most(path, max_bytes)


def _read_at_most(path: Path, max_bytes: int) -> bytes:
    try:
        with path.open("rb") as fh:
            raw = fh.read(max_bytes)
            # The file may have grown since stat(); refuse rather than silently truncate.
            if os.fstat(fh.fileno()).st_size > max_bytes:
                raise InvalidInputError(_too_large(path, os.fstat(fh.fileno()).st_size, max_bytes))
    except OSError as exc:
        raise InvalidInputError(f"{path}: cannot be read ({exc.strerror}); {_fix(exc)}") from exc
    return raw


def _decode_text(path: Path, raw: bytes, fmt: str) -> str:
    nul = raw.find(b"\x00")
    if nul != -1:
        raise InvalidInputError(
            f"{path} contains NUL bytes (first at byte offset {nul}), so it looks binary, not "
            f"{fmt}; check it is really a {fmt} file, or convert it to UTF-8 text"
        )
    try:
        text = raw.decode("utf-8-sig")  # -sig: a leading BOM is not content
    except UnicodeDecodeError as exc:
        # utf-8-sig offsets are relative to the input including any BOM, i.e. file offsets.
        bad = raw[exc.start : exc.start + 1].hex()
        raise InvalidInputError(
            f"{path} is not valid UTF-8 (byte 0x{bad} at byte offset {exc.start}); "
            "re-save it as UTF-8, e.g. `iconv -f <its encoding> -t UTF-8`"
        ) from exc
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _split_front_matter(path: Path, text: str) -> tuple[dict[str, object], str]:
    match = _FRONT_MATTER.match(text)
    if match is None:
        return {}, text
    try:
        data = yaml.safe_load(match.group(1) or "")
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""  # +2: '---' and 1-based
        raise InvalidInputError(
            f"{path}: front matter is not valid YAML{where}; fix it or remove the '---' block"
        ) from exc
    if data is None:
        return {}, text[match.end() :]
    if not isinstance(data, dict):
        # A scalar between two rules is ordinary markdown (e.g. a setext heading), not metadata.
        return {}, text
    return {str(k): v for k, v in data.items()}, text[match.end() :]


def _first_heading(text: str) -> str | None:
    in_fence = False
    for line in text.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and (m := _HEADING.match(line)):
            return m.group(1).strip()
    return None


def _extract_pdf(path: Path, raw: bytes) -> tuple[str | None, str]:
    from pypdf import PdfReader  # local: only PDF ingest pays the import

    try:
        reader = PdfReader(io.BytesIO(raw))
        if reader.is_encrypted and not reader.decrypt(""):
            raise InvalidInputError(f"{path} is a password-protected PDF; decrypt it first")
        pages = [(page.extract_text() or "").replace("\x00", "").strip() for page in reader.pages]
        meta_title = reader.metadata.title if reader.metadata is not None else None
    except InvalidInputError:
        raise
    except Exception as exc:  # pypdf raises many types for malformed input
        raise InvalidInputError(
            f"{path} cannot be parsed as a PDF ({type(exc).__name__}: {exc}); check it is "
            "not truncated or corrupted, or export it again"
        ) from exc
    text = "\n\n".join(p for p in pages if p)
    if not text:
        raise InvalidInputError(
            f"{path} has no extractable text (a scanned or image-only PDF?); run OCR on it first"
        )
    title = meta_title.strip() if isinstance(meta_title, str) and meta_title.strip() else None
    return title, text


# Tags whose content is never prose; <head> only matters for <title>, read separately.
_HTML_DROP = frozenset(
    ["script", "style", "noscript", "template", "head", "svg", "iframe", "object", "canvas"]
)
_HTML_BLOCKS = frozenset(  # elements that start a new paragraph
    {"p", "div", "section", "article", "main", "header", "footer", "aside", "nav", "ul", "ol"}
    | {"li", "table", "tr", "blockquote", "figure", "figcaption", "dl", "dt", "dd", "br", "hr"}
    | {"form", "fieldset", "address", "details", "summary", "body", "html"}
)
_FLUSH = object()  # stack marker: "end of a block element"


def _html_to_text(markup: str) -> tuple[str | None, str]:
    """HTML -> markdown-ish text: '#' heading lines, paragraphs split by blank lines.

    Walks the tree with an explicit stack because deeply nested (generated) HTML would
    overflow Python's recursion limit.
    """
    from bs4 import BeautifulSoup, NavigableString, Tag  # local: only HTML ingest pays

    soup = BeautifulSoup(markup, "html.parser")
    title_tag = soup.find("title")
    title = " ".join(title_tag.get_text().split()) if title_tag is not None else ""
    blocks: list[str] = []
    inline: list[str] = []

    def flush() -> None:
        line = " ".join("".join(inline).split())
        inline.clear()
        if line and line != "-":
            blocks.append(line)

    stack: list[object] = list(reversed(soup.contents))
    while stack:
        node = stack.pop()
        if node is _FLUSH:
            flush()
        elif isinstance(node, NavigableString):
            if type(node) is NavigableString:  # skips Comment, Doctype, CData...
                inline.append(str(node))
        elif isinstance(node, Tag):
            name = node.name.lower()
            if name in _HTML_DROP:
                continue
            if re.fullmatch(r"h[1-6]", name):
                flush()
                heading = " ".join(node.get_text(" ").split())
                if heading:
                    blocks.append("#" * int(name[1]) + " " + heading)
                    title = title or heading
            elif name == "pre":
                flush()
                code = node.get_text().strip("\n")
                if code.strip():
                    blocks.append("```\n" + code + "\n```")
            elif name in _HTML_BLOCKS:
                flush()
                if name == "li":
                    inline.append("- ")
                stack.append(_FLUSH)
                stack.extend(reversed(node.contents))
            else:
                if name in ("td", "th"):
                    inline.append(" ")  # keep table cells from gluing into one word
                stack.extend(reversed(node.contents))
    flush()
    return title or None, "\n\n".join(blocks)
