"""Settings.from_env refuses malformed HYBRID_RAG_* values by name.

A bad value must fail where the environment is read (the composition root), with the
variable's name, not later inside a chunker, a search or a Dagster run.
"""

from __future__ import annotations

import re

import pytest

from memory_pipeline.config import Settings
from memory_pipeline.errors import InvalidInputError

INTEGERS = {
    "HYBRID_RAG_EMBED_BATCH_SIZE": "embed_batch_size",
    "HYBRID_RAG_MAX_CHUNK_SIZE": "max_chunk_size",
    "HYBRID_RAG_CHUNK_OVERLAP": "chunk_overlap",
    "HYBRID_RAG_TOP_N": "top_n",
    "HYBRID_RAG_MAX_FILE_BYTES": "max_file_bytes",
}
PATHS = {
    "HYBRID_RAG_DB_PATH": "db_path",
    "HYBRID_RAG_INDEX_PATH": "index_path",
    "HYBRID_RAG_ARCHIVE_PATH": "archive_path",
}


REFUSED = [
    *[(name, value) for name in INTEGERS for value in ("abc", "1.5", "12abc", "   ", "0x10")],
    ("HYBRID_RAG_FUSION", "borda"),
    ("HYBRID_RAG_FUSION", "convex rrf"),
]
OUT_OF_RANGE = [
    *[(name, "-1") for name in INTEGERS],
    *[(name, "0") for name in INTEGERS if name != "HYBRID_RAG_CHUNK_OVERLAP"],  # 0 overlap is valid
    ("HYBRID_RAG_MAX_CHUNK_SIZE", "8"),  # the chunker needs at least 16 tokens
    ("HYBRID_RAG_TOP_N", "20000"),  # a search takes at most 10000 per retriever
]


@pytest.mark.parametrize(("name", "value"), REFUSED)
def test_a_malformed_value_is_refused_by_name(name: str, value: str) -> None:
    with pytest.raises(InvalidInputError, match=re.escape(name)) as info:
        Settings.from_env({name: value})
    assert repr(value) in str(info.value)


@pytest.mark.parametrize(("name", "value"), OUT_OF_RANGE)
def test_an_out_of_range_value_is_refused_by_name(name: str, value: str) -> None:
    with pytest.raises(InvalidInputError, match=re.escape(name)):
        Settings.from_env({name: value})


def test_the_chunk_overlap_must_leave_room_for_new_text() -> None:
    env = {"HYBRID_RAG_MAX_CHUNK_SIZE": "64", "HYBRID_RAG_CHUNK_OVERLAP": "32"}
    with pytest.raises(InvalidInputError, match="HYBRID_RAG_CHUNK_OVERLAP"):
        Settings.from_env(env)


@pytest.mark.parametrize("name", list(PATHS))
def test_an_empty_path_is_refused_or_unset(name: str) -> None:
    try:
        settings = Settings.from_env({name: ""})
    except InvalidInputError as exc:
        assert name in str(exc)
    else:
        assert getattr(settings, PATHS[name]) == getattr(Settings(), PATHS[name])


@pytest.mark.parametrize("name", [*INTEGERS, "HYBRID_RAG_FUSION", "HYBRID_RAG_DATABASE_URL"])
def test_an_empty_value_means_unset(name: str) -> None:
    """The convention of every HYBRID_RAG_* and MEMORY_PIPELINE_* number: '' takes the default."""
    assert Settings.from_env({name: ""}) == Settings()


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("HYBRID_RAG_TOP_N", " 20 ", 20),
        ("HYBRID_RAG_CHUNK_OVERLAP", "0", 0),
        ("HYBRID_RAG_FUSION", " RRF ", "rrf"),
    ],
)
def test_well_formed_values_are_read(name: str, value: str, expected: object) -> None:
    field = INTEGERS.get(name, "fusion")
    assert getattr(Settings.from_env({name: value}), field) == expected
