"""A loaded document through the redaction step, before it is chunked (docs/hygiene.md).

Its text, each turn (one message at a time, so an unclosed ``<private>`` ends at the end of
its message), its title and its source name all pass the ``Redactor``. Its ``raw`` bytes are
kept only to name it: ``doc_id`` and ``content_hash`` are digests of the whole document, as
a file's git id is, so re-reading an unchanged file still finds it stored; no stored field
holds a secret, a part of one or a digest of one alone.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.hygiene.redactor import Redactor
from memory_pipeline.hygiene.secrets import find_secrets
from memory_pipeline.ingest.loaders import LoadedDocument
from memory_pipeline.metadata import ChunkMetadata


def redact_document(
    loaded: LoadedDocument, redactor: Redactor
) -> tuple[LoadedDocument, Counter[str]]:
    """``loaded`` with its secrets and private spans taken out, and what was taken, by kind.

    The counts are of the text that is chunked: a conversation's turns, any other
    document's text (a conversation's rendered text holds the same turns again).
    """
    if not redactor.enabled:
        return loaded, Counter()
    body = redactor.redact(loaded.text)
    counts = body.counts
    turns = loaded.turns
    if turns:
        counts = Counter()
        kept = []
        for turn in turns:
            done = redactor.redact(turn.text)
            counts += done.counts
            kept.append(replace(turn, text=done.text) if done.changed else turn)
        turns = tuple(kept)
    title = redactor.redact(loaded.title).text
    source = redactor.redact(loaded.source).text
    if not (body.changed or counts or title != loaded.title or source != loaded.source):
        return loaded, counts
    return replace(loaded, text=body.text, turns=turns, title=title, source=source), counts


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
