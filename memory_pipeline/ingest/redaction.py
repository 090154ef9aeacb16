"""A loaded document through the redaction step, before it is chunked (docs/hygiene.md).

Its text, each turn, its title and its source name all pass the ``Redactor``. A turn is one
message, so an unclosed ``<private>`` ends at the end of its message; any other document's
text is passed as a document, kept whole after a tag it never closes, and each such tag is a
warning naming the document and the line (``RedactedDocument.warnings``). Its ``raw`` bytes are
kept only to name it: ``doc_id`` and ``content_hash`` are digests of the whole document, as
a file's git id is, so re-reading an unchanged file still finds it stored; no stored field
holds a secret, a part of one or a digest of one alone.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import NamedTuple

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.hygiene.private import Unclosed
from memory_pipeline.hygiene.redactor import Redactor
from memory_pipeline.hygiene.secrets import find_secrets
from memory_pipeline.ingest.loaders import LoadedDocument
from memory_pipeline.metadata import ChunkMetadata


class RedactedDocument(NamedTuple):
    loaded: LoadedDocument
    counts: Counter[str]  # what was taken, by kind
    warnings: tuple[str, ...]  # "source:line: …" for each opening tag kept unclosed


def unclosed_warning(source: str, line: int, tag: Unclosed) -> str:
    """What the user is told about a document kept whole after ``tag``, at ``line``."""
    return (
        f"{source}:{line}: <{tag.kind}> is never closed; "
        "the document is kept whole, nothing after the tag was dropped"
    )


def redact_document(loaded: LoadedDocument, redactor: Redactor) -> RedactedDocument:
    """``loaded`` with its secrets and private spans taken out, what was taken, by kind,
    and a warning for each opening tag its text never closes (kept, with what follows it).

    The counts are of the text that is chunked: a conversation's turns, any other
    document's text (a conversation's rendered text holds the same turns again, and is
    read as one message, as they are).
    """
    if not redactor.enabled:
        return RedactedDocument(loaded, Counter(), ())
    body = redactor.redact(loaded.text, document=not loaded.turns)
    counts = body.counts
    turns = loaded.turns
    if turns:
        counts = Counter()
        each = []
        for turn in turns:
            done = redactor.redact(turn.text)
            counts += done.counts
            each.append(replace(turn, text=done.text) if done.changed else turn)
        turns = tuple(each)
    title = redactor.redact(loaded.title).text
    source = redactor.redact(loaded.source).text
    warnings = tuple(
        unclosed_warning(source, loaded.first_line - 1 + tag.line, tag) for tag in body.unclosed
    )
    if not (body.changed or counts or title != loaded.title or source != loaded.source):
        return RedactedDocument(loaded, counts, warnings)
    kept = replace(loaded, text=body.text, turns=turns, title=title, source=source)
    return RedactedDocument(kept, counts, warnings)


def redact_metadata(meta: ChunkMetadata, redactor: Redactor, where: str) -> ChunkMetadata:
    """A title with its secrets taken out; a tag that holds one is refused (tags are
    looked up as written, so a marker in one would make it another tag)."""
    if not redactor.enabled:
        return meta
    for n, tag in enumerate(meta.tags, 1):
        found = find_secrets(tag, redactor.allow)
        if found:
            # not a character of it is repeated: an error is shown, logged and kept too
            raise InvalidInputError(
                f"{where}: tag {n} of {len(meta.tags)} looks like a secret "
                f"({found[0].kind}); tags are stored as written: remove the secret from it"
            )
    if meta.title:
        title = redactor.redact(meta.title).text
        if title != meta.title:
            return meta.model_copy(update={"title": title})
    return meta
