"""Settings.from_env refuses malformed HYBRID_RAG_* values by name.

A bad value must fail where the environment is read (the composition root), with the
variable's name, not later inside a chunker, a search or a Dagster run. Cases the code
accepts today are expected failures, each naming what it lets through.
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


def accepted(why: str) -> pytest.MarkDecorator:
    """from_env takes this value without complaint (pytest's DID NOT RAISE)."""
    return pytest.mark.xfail(strict=True, raises=pytest.fail.Exception, reason=why)


REFUSED = [
    *[(name, value) for name in INTEGERS for value in ("abc", "1.5", "12abc", "   ", "0x10")],
    ("HYBRID_RAG_FUSION", "borda"),
    ("HYBRID_RAG_FUSION", "convex rrf"),
]
ACCEPTED_TODAY = [
    *[
        pytest.param(
            name,
            "-1",
            marks=accepted(f"a negative {name} is taken as {field} = -1 (no bound is checked)"),
        )
        for name, field in INTEGERS.items()
    ],
    *[
        pytest.param(name, "0", marks=accepted(f"{name}=0 is taken as {field} = 0"))
        for name, field in INTEGERS.items()
        if name != "HYBRID_RAG_CHUNK_OVERLAP"  # an overlap of 0 is valid
    ],
    pytest.param(
        "HYBRID_RAG_MAX_CHUNK_SIZE",
        "8",
        marks=accepted(
            "max_chunk_size 8 is accepted; the chunker refuses it (at least 16) only at ingest"
        ),
    ),
    pytest.param(
        "HYBRID_RAG_TOP_N",
        "20000",
        marks=accepted(
            "top_n 20000 is accepted; SearchParams refuses it (at most 10000) only at search"
        ),
    ),
]


@pytest.mark.parametrize(("name", "value"), REFUSED)
def test_a_malformed_value_is_refused_by_name(name: str, value: str) -> None:
    with pytest.raises(InvalidInputError, match=re.escape(name)) as info:
        Settings.from_env({name: value})
    assert repr(value) in str(info.value)


@pytest.mark.parametrize(("name", "value"), ACCEPTED_TODAY)
def test_an_out_of_range_value_is_refused_by_name(name: str, value: str) -> None:
    with pytest.raises(InvalidInputError, match=re.escape(name)):
        Settings.from_env({name: value})


@accepted(
    "HYBRID_RAG_CHUNK_OVERLAP=32 with HYBRID_RAG_MAX_CHUNK_SIZE=64 is accepted; the chunker "
    "refuses an overlap of max_chunk_size/2 or more only at ingest"
)
def test_the_chunk_overlap_must_leave_room_for_new_text() -> None:
    env = {"HYBRID_RAG_MAX_CHUNK_SIZE": "64", "HYBRID_RAG_CHUNK_OVERLAP": "32"}
    with pytest.raises(InvalidInputError, match="HYBRID_RAG_CHUNK_OVERLAP"):
        Settings.from_env(env)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(
            name,
            marks=pytest.mark.xfail(
                strict=True,
                raises=AssertionError,
                reason=f"an empty {name} is read as {field} = Path('') (the current folder), "
                "neither the default nor refused",
            ),
        )
        for name, field in PATHS.items()
    ],
)
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
