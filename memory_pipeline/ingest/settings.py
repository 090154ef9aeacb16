"""The ``ingest`` section of the settings: what the ``Ingestor`` is handed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

import annotated_types
from pydantic import model_validator

from memory_pipeline.ingest.chunking import (
    DEFAULT_CHUNK_OVERLAP,
    DEFAULT_MAX_CHUNK_SIZE,
    MIN_CHUNK_SIZE,
)
from memory_pipeline.ingest.lines import DEFAULT_MAX_LINE_BYTES, ReadLimits
from memory_pipeline.ingest.loaders import DEFAULT_MAX_BYTES
from memory_pipeline.ingest.turns import DEFAULT_TURN_INDEXING, NEIGHBOUR_BLEND, TurnIndexing
from memory_pipeline.sections import Refused, Section, var

if TYPE_CHECKING:
    from memory_pipeline.hygiene.redactor import Redactor


class IngestSettings(Section):
    max_chunk_size: Annotated[int, annotated_types.Ge(MIN_CHUNK_SIZE)] = var(
        "MAX_CHUNK_SIZE", DEFAULT_MAX_CHUNK_SIZE
    )
    chunk_overlap: Annotated[int, annotated_types.Ge(0)] = var(
        "CHUNK_OVERLAP", DEFAULT_CHUNK_OVERLAP
    )
    max_file_bytes: Annotated[int, annotated_types.Ge(1)] = var("MAX_FILE_BYTES", DEFAULT_MAX_BYTES)
    # Session logs only grow, so they are streamed whatever their size; one line is parsed
    # whole, so a line has a bound of its own (ingest/lines.py).
    max_session_line_bytes: Annotated[int, annotated_types.Ge(1)] = var(
        "MAX_SESSION_LINE_BYTES", DEFAULT_MAX_LINE_BYTES
    )
    # Conversation turns are indexed with the turns around them (docs/conversations.md).
    turn_context_before: Annotated[int, annotated_types.Ge(0), annotated_types.Le(8)] = var(
        "TURN_CONTEXT_BEFORE", DEFAULT_TURN_INDEXING.before
    )
    turn_context_after: Annotated[int, annotated_types.Ge(0), annotated_types.Le(8)] = var(
        "TURN_CONTEXT_AFTER", DEFAULT_TURN_INDEXING.after
    )
    # ... and with the absolute dates their relative ones ("yesterday") mean.
    turn_dates: bool = var("TURN_DATES", DEFAULT_TURN_INDEXING.dates)
    # A turn's vector: its own lines' embedding blended with its neighbours' (each turn
    # embedded once), or the embedding of its whole index text ("joined").
    turn_vectors: Literal["blended", "joined"] = var("TURN_VECTORS", "blended")
    # Secrets and <private> spans are taken out of every text before it is kept
    # (docs/hygiene.md); "off" only for a memory that holds no captured text.
    redact: Literal["on", "off"] = var("REDACT", "on")
    # Values that look like secrets but are not (a test key everyone knows), comma-separated.
    redact_allow: str = var("REDACT_ALLOW", "")

    def redactor(self) -> Redactor:
        from memory_pipeline.hygiene.redactor import Redactor

        return Redactor.from_setting(self.redact, self.redact_allow)

    def read_limits(self) -> ReadLimits:
        return ReadLimits(self.max_file_bytes, self.max_session_line_bytes)

    def turn_indexing(self) -> TurnIndexing:
        return TurnIndexing(
            self.turn_context_before,
            self.turn_context_after,
            self.turn_dates,
            blend=NEIGHBOUR_BLEND if self.turn_vectors == "blended" else None,
        )

    @model_validator(mode="after")
    def _overlap_leaves_room(self) -> IngestSettings:
        if self.chunk_overlap >= self.max_chunk_size / 2:
            raise Refused(
                "chunk_overlap",
                f"must be below half of the chunk size (HYBRID_RAG_MAX_CHUNK_SIZE="
                f"{self.max_chunk_size}), got {self.chunk_overlap!r}",
            )
        return self
