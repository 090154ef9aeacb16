"""Settings.from_env refuses malformed HYBRID_RAG_* values by name.

A bad value must fail where the environment is read (the composition root), with the
variable's name, not later inside a chunker, a search or a Dagster run.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memory_pipeline.config import ENV_VARS, Settings
from memory_pipeline.errors import InvalidInputError

INTEGERS = {
    "HYBRID_RAG_EMBED_BATCH_SIZE": "embed_batch_size",
    "HYBRID_RAG_MAX_CHUNK_SIZE": "max_chunk_size",
    "HYBRID_RAG_CHUNK_OVERLAP": "chunk_overlap",
    "HYBRID_RAG_TOP_N": "top_n",
    "HYBRID_RAG_MAX_FILE_BYTES": "max_file_bytes",
    "HYBRID_RAG_MAX_SESSION_LINE_BYTES": "max_session_line_bytes",
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
    section, field = ENV_VARS[name]
    assert getattr(getattr(Settings.from_env({name: value}), section), field) == expected


def test_every_setting_can_be_set_from_the_environment() -> None:
    env = {
        "HYBRID_RAG_RRF_K": "10",
        "HYBRID_RAG_IVF_THRESHOLD": "5000",
        "HYBRID_RAG_TIME_WEIGHT": "0.3",
        "HYBRID_RAG_FREQ_WEIGHT": "0.2",
        "HYBRID_RAG_IMPORTANCE_THRESHOLD": "0.4",
        "HYBRID_RAG_HALF_LIVES": "news=7, paper=none",
        "HYBRID_RAG_GUARANTEED_TYPES": "principle,paper",
        "HYBRID_RAG_GUARANTEED_IMPORTANCE": "0.9",
        "HYBRID_RAG_GUARANTEED_LIMIT": "5",
    }
    s = Settings.from_env(env)
    assert (s.search.rrf_k, s.index.ivf_threshold) == (10, 5000)
    assert (s.memory.time_weight, s.memory.freq_weight, s.memory.importance_threshold) == (
        0.3,
        0.2,
        0.4,
    )
    assert s.memory.half_lives == (("news", 7.0), ("paper", None))
    assert s.search.guaranteed_types == ("principle", "paper")
    assert (s.search.guaranteed_importance_threshold, s.search.guaranteed_candidates_limit) == (
        0.9,
        5,
    )
    assert s.memory_params().importance_threshold == 0.4


def _every_field() -> list[tuple[str, str]]:
    """(section, field) of every setting; '' is the top level."""
    top = [("", n) for n in Settings.model_fields if n not in Settings.SECTIONS]
    nested = [
        (section, name)
        for section in Settings.SECTIONS
        for name in type(getattr(Settings(), section)).model_fields
    ]
    return top + nested


def test_every_field_has_its_variable() -> None:
    """A new setting is settable from the environment (its alias is its variable)."""
    assert sorted(ENV_VARS.values()) == sorted(_every_field())
    assert all(var.startswith("HYBRID_RAG_") for var in ENV_VARS)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("HYBRID_RAG_TIME_WEIGHT", "heavy", "must be a number"),
        ("HYBRID_RAG_TIME_WEIGHT", "1.5", "in [0, 1]"),
        ("HYBRID_RAG_IMPORTANCE_THRESHOLD", "-0.1", "in [0, 1]"),
        ("HYBRID_RAG_HALF_LIVES", "news", "<knowledge_type>=<days>"),
        ("HYBRID_RAG_HALF_LIVES", "blog=3", "unknown knowledge_type"),
        ("HYBRID_RAG_HALF_LIVES", "news=-2", "> 0 days"),
        ("HYBRID_RAG_GUARANTEED_TYPES", "principle,blog", "unknown knowledge types"),
        ("HYBRID_RAG_GUARANTEED_LIMIT", "5000", "between 0 and 1000"),
        ("HYBRID_RAG_RRF_K", "-1", "at least 0"),
        ("HYBRID_RAG_SPEAKER_BOOST", "2", "in [0, 1]"),
        ("HYBRID_RAG_FORGET_MAX_FRACTION", "2", "in [0, 1]"),
        ("HYBRID_RAG_ALLOW_HARD_LINKS", "maybe", "true or false"),
    ],
)
def test_memory_and_search_variables_are_checked(name: str, value: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=re.escape(message)) as info:
        Settings.from_env({name: value})
    assert name in str(info.value)


def test_weights_that_leave_no_room_for_relevance_are_refused() -> None:
    with pytest.raises(InvalidInputError, match="time_weight \\+ freq_weight"):
        Settings.from_env({"HYBRID_RAG_TIME_WEIGHT": "0.7", "HYBRID_RAG_FREQ_WEIGHT": "0.5"})


def test_the_readme_lists_every_variable() -> None:
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert [name for name in ENV_VARS if f"`{name}`" not in readme] == []


def test_settings_never_read_the_environment_themselves(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only ``from_env`` (at an entry point) reads it; ``Settings()`` is the defaults."""
    monkeypatch.setenv("HYBRID_RAG_TOP_N", "7")
    monkeypatch.setenv("HYBRID_RAG_DB_PATH", "/elsewhere.db")
    assert Settings().search.top_n != 7 and str(Settings().db_path) != "/elsewhere.db"
    assert Settings.from_env().search.top_n == 7


def test_the_forgetting_defaults_are_the_configured_ones(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from memory_pipeline.embedding.base import HashingEmbedder
    from memory_pipeline.system import MemorySystem

    settings = Settings(
        db_path=tmp_path / "m.db",
        index_path=tmp_path / "i",
        archive_path=tmp_path / "a",
        score_threshold=1.0,
        max_fraction=1.0,
        grace_days=0,
    )
    system = MemorySystem(settings, embedder=HashingEmbedder())
    try:
        system.ingest_text("a note that will be scored", "note")
        report = system.run_forgetting_batch(dry_run=True)
        # A threshold of 1.0 makes every chunk a candidate; the default 0.05 would not.
        assert report.candidates == report.live_chunks == 1
        assert report.params["grace_days"] == 0  # the default 30 would shield the new note
    finally:
        system.close()


# The Dagster pipeline's section: MEMORY_PIPELINE_* variables, read by the same model.
PIPELINE_REFUSED = [
    ("MEMORY_PIPELINE_TAG_COVERAGE_FLOOR", "1.5", "must be [0, 1], got 1.5"),
    ("MEMORY_PIPELINE_TAG_COVERAGE_FLOOR", "abc", "must be a number, got 'abc'"),
    ("MEMORY_PIPELINE_INDEX_DEBOUNCE_SECONDS", "x", "must be a number, got 'x'"),
    ("MEMORY_PIPELINE_INDEX_DEBOUNCE_SECONDS", "-1", "must be ≥ 0, got -1"),
    ("MEMORY_PIPELINE_EVAL_MARGIN", "2", "must be [0, 1], got 2"),
    ("MEMORY_PIPELINE_EVAL_MARGIN", "-0.5", "must be [0, 1], got -0.5"),
    ("MEMORY_PIPELINE_UI_URL", "localhost:3000", "must be an http:// or https:// URL, got "),
    # A webhook URL may carry its token: the message does not repeat it.
    ("MEMORY_PIPELINE_ALERT_WEBHOOK", "ftp://x/secret", "must be an http:// or https:// URL"),
]


@pytest.mark.parametrize(("name", "value", "message"), PIPELINE_REFUSED)
def test_a_bad_pipeline_setting_is_refused_by_name(name: str, value: str, message: str) -> None:
    from memory_pipeline.config import PipelineSettings

    with pytest.raises(InvalidInputError) as info:
        PipelineSettings.from_env({name: value})
    shown = f"{name} {message}" + (repr(value) if message.endswith("got ") else "")
    assert str(info.value) == shown


@pytest.mark.parametrize(
    ("env", "field", "expected"),
    [
        ({}, "sources_file", None),
        ({"MEMORY_PIPELINE_SOURCES": ""}, "sources_file", None),
        ({"MEMORY_PIPELINE_SOURCES": "s.yaml"}, "sources_file", "s.yaml"),
        ({}, "tag_coverage_floor", 0.5),
        ({"MEMORY_PIPELINE_TAG_COVERAGE_FLOOR": "  "}, "tag_coverage_floor", 0.5),
        ({"MEMORY_PIPELINE_TAG_COVERAGE_FLOOR": " 0.25 "}, "tag_coverage_floor", 0.25),
        ({}, "index_debounce_seconds", 20),
        ({"MEMORY_PIPELINE_INDEX_DEBOUNCE_SECONDS": "0"}, "index_debounce_seconds", 0),
        ({}, "forgetting_archive", False),
        ({"MEMORY_PIPELINE_FORGETTING_ARCHIVE": " YES "}, "forgetting_archive", True),
        ({"MEMORY_PIPELINE_FORGETTING_ARCHIVE": "1"}, "forgetting_archive", True),
        ({"MEMORY_PIPELINE_FORGETTING_ARCHIVE": "maybe"}, "forgetting_archive", False),
        ({"MEMORY_PIPELINE_GOLDEN": "g.yaml"}, "golden_file", "g.yaml"),
        ({"MEMORY_PIPELINE_EVAL_DIR": "e"}, "eval_dir", "e"),
        ({}, "eval_margin", 0.02),
        ({"MEMORY_PIPELINE_EVAL_MARGIN": "0.1"}, "eval_margin", 0.1),
        ({}, "alert_webhook", None),
        ({"MEMORY_PIPELINE_ALERT_WEBHOOK": " https://h/x "}, "alert_webhook", "https://h/x"),
        ({"MEMORY_PIPELINE_ALERT_LOG": "a.jsonl"}, "alert_log", "a.jsonl"),
        ({}, "ui_url", "http://127.0.0.1:3000"),
        ({"MEMORY_PIPELINE_UI_URL": ""}, "ui_url", "http://127.0.0.1:3000"),
        ({"MEMORY_PIPELINE_UI_URL": "HTTP://h:1"}, "ui_url", "HTTP://h:1"),
    ],
)
def test_pipeline_settings_are_read_with_their_defaults(
    env: dict[str, str], field: str, expected: object
) -> None:
    from memory_pipeline.config import PipelineSettings

    assert getattr(PipelineSettings.from_env(env), field) == expected


def test_the_webhook_url_is_kept_out_of_the_repr() -> None:
    from memory_pipeline.config import PipelineSettings

    settings = PipelineSettings.from_env({"MEMORY_PIPELINE_ALERT_WEBHOOK": "https://h/s3cret"})
    assert "s3cret" not in repr(settings)


CONFIGURED = {
    "HYBRID_RAG_FUSION": "rrf",
    "HYBRID_RAG_TOP_N": "80",
    "HYBRID_RAG_TIME_WEIGHT": "0.3",
    "HYBRID_RAG_FORGET_MAX_FRACTION": "0.4",
}


@pytest.mark.parametrize(
    ("chosen", "want"),
    [
        ({}, {"top_k": 5, "top_n": 80, "fusion": "rrf", "record_access": True}),
        ({"top_k": 9, "enable_mmr": True}, {"top_k": 9, "top_n": 80, "enable_mmr": True}),
        ({"top_n": 10, "fusion": "convex"}, {"top_n": 10, "fusion": "convex"}),
    ],
)
def test_a_search_request_is_the_settings_plus_what_the_caller_chose(
    chosen: dict[str, object], want: dict[str, object]
) -> None:
    request = Settings.from_env(CONFIGURED).search_request(**chosen)
    assert {name: getattr(request, name) for name in want} == want
    assert request.memory.time_weight == 0.3  # the configured memory axis


def test_memory_params_given_replace_the_configured_and_are_checked() -> None:
    s = Settings.from_env(CONFIGURED)
    weights = s.memory_params(freq_weight=0.0, importance_threshold=None)
    assert (weights.time_weight, weights.freq_weight, weights.importance_threshold) == (
        0.3,
        0.0,
        0.0,
    )
    assert s.search_request(memory=weights).memory == weights
    with pytest.raises(InvalidInputError, match="time_weight"):
        s.memory_params(time_weight=2.0)


def test_forgetting_limits_given_replace_the_configured() -> None:
    forgetting = Settings.from_env(CONFIGURED).forgetting
    assert forgetting.limits(score_threshold=0.1) == {
        "score_threshold": 0.1,
        "max_fraction": 0.4,
        "grace_days": forgetting.grace_days,
    }


# --- Where the memory lives when no setting says (memory_pipeline/locations.py) ---

PLACEHOLDER_VARS = [
    "HYBRID_RAG_DB_PATH",
    "HYBRID_RAG_INDEX_PATH",
    "HYBRID_RAG_ARCHIVE_PATH",
    "HYBRID_RAG_DATABASE_URL",
    "HYBRID_RAG_MODEL_CACHE",
    "HYBRID_RAG_QDRANT_PATH",
    "HYBRID_RAG_CHROMA_PATH",
    "HYBRID_RAG_ALLOWED_ROOTS",
]


@pytest.mark.parametrize("name", PLACEHOLDER_VARS)
def test_an_unexpanded_placeholder_in_a_path_is_refused(name: str) -> None:
    """What an MCP client other than Claude Code passes from .mcp.json: the text as written."""
    raw = "${" + name + ":-data/memory.db}"
    with pytest.raises(InvalidInputError) as info:
        Settings.from_env({name: raw})
    message = str(info.value)
    assert message.startswith(f"{name}: ")
    assert "Claude Code expands ${VAR:-default}" in message
    assert "MCP Inspector, Codex" in message and "absolute path" in message


def test_a_placeholder_given_by_a_flag_is_named_by_the_flag() -> None:
    flags = {"db_path": ("--db", Path("${HOME}/memory.db"))}
    with pytest.raises(InvalidInputError, match=r"^--db: .*absolute path"):
        Settings().with_flags(flags)


def test_the_default_memory_is_in_xdg_data_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    folder = tmp_path / "data" / "memory-pipeline"
    settings = Settings()
    assert (settings.db_path, settings.index_path, settings.archive_path) == (
        folder / "memory.db",
        folder / "indices",
        folder / "archive",
    )


@pytest.mark.parametrize("xdg", [None, "", "relative/data"])
def test_without_an_absolute_xdg_data_home_the_memory_is_in_local_share(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, xdg: str | None
) -> None:
    """The XDG spec: a relative XDG_DATA_HOME is invalid and ignored."""
    monkeypatch.setenv("HOME", str(tmp_path))
    if xdg is None:
        monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    else:
        monkeypatch.setenv("XDG_DATA_HOME", xdg)
    assert Settings().db_path == tmp_path / ".local" / "share" / "memory-pipeline" / "memory.db"


def test_variables_still_win_over_the_default_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    env = {
        "HYBRID_RAG_DB_PATH": str(tmp_path / "m.db"),
        "HYBRID_RAG_INDEX_PATH": str(tmp_path / "i"),
        "HYBRID_RAG_ARCHIVE_PATH": str(tmp_path / "a"),
    }
    settings, notice = Settings.from_env(env).settled(tmp_path)
    assert (settings.db_path, settings.index_path, settings.archive_path) == (
        tmp_path / "m.db",
        tmp_path / "i",
        tmp_path / "a",
    )
    assert notice is None and not (tmp_path / "data").exists()


def test_the_default_folder_is_made_when_it_is_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    settings, notice = Settings().settled(tmp_path / "elsewhere")
    assert notice is None and settings == Settings()
    assert (tmp_path / "data" / "memory-pipeline").is_dir()


def _old_memory(folder: Path, *parts: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "hybrid_rag.db").write_bytes(b"")
    for part in parts:
        (folder / part).mkdir()


def test_a_memory_under_the_old_defaults_is_used_and_the_move_is_shown(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    project = tmp_path / "project"
    _old_memory(project, "indices", "archive")
    settings, notice = Settings().settled(project)
    assert (settings.db_path, settings.index_path, settings.archive_path) == (
        project / "hybrid_rag.db",
        project / "indices",
        project / "archive",
    )
    new = tmp_path / "data" / "memory-pipeline"
    assert notice is not None and "\n" not in notice
    assert str(project / "hybrid_rag.db") in notice and str(new) in notice
    assert f"mv {project / 'hybrid_rag.db'} {new / 'memory.db'}" in notice
    assert f"mv {project / 'indices'} {new / 'indices'}" in notice
    assert f"mv {project / 'archive'} {new / 'archive'}" in notice
    assert not new.exists()  # nothing moved, nothing made
    # The settings carried to a Dagster run name the old memory too.
    assert Settings.from_env(settings.to_env()) == settings


def test_an_old_memory_beside_a_new_one_is_used_without_a_move_that_would_overwrite(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    project = tmp_path / "project"
    _old_memory(project, "indices")
    new = tmp_path / "data" / "memory-pipeline"
    new.mkdir(parents=True)
    (new / "memory.db").write_bytes(b"")
    settings, notice = Settings().settled(project)
    assert settings.db_path == project / "hybrid_rag.db"
    assert notice is not None and "\n" not in notice and "mv " not in notice
    assert str(new / "memory.db") in notice and "HYBRID_RAG_DB_PATH" in notice


@pytest.mark.parametrize(
    "env",
    [{"HYBRID_RAG_DB_PATH": "chosen.db"}, {"HYBRID_RAG_DATABASE_URL": "postgresql:///memory"}],
)
def test_a_configured_store_ignores_an_old_memory_in_the_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: dict[str, str]
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    _old_memory(tmp_path, "indices")
    configured = Settings.from_env(env)
    assert configured.settled(tmp_path) == (configured, None)


@pytest.mark.parametrize(("xdg", "under_home"), [("/abs/cache", False), ("rel/cache", True)])
def test_the_model_cache_follows_an_absolute_xdg_cache_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, xdg: str, under_home: bool
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", xdg)
    base = tmp_path / ".cache" if under_home else Path(xdg)
    assert Settings().embedding.model_cache == base / "memory-pipeline" / "models"


def test_a_default_folder_that_cannot_be_made_is_refused_with_what_to_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "file"))
    with pytest.raises(InvalidInputError, match="HYBRID_RAG_DB_PATH"):
        Settings().settled(tmp_path)
