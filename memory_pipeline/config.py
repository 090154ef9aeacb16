"""Settings: one model, read from the environment only at an entry point (CLI, server, Dagster).

Every setting is a field of one section (search, memory axis, forgetting, index, …)
whose alias is its ``HYBRID_RAG_*`` variable; its default is taken from the module
that uses it, so it is written once. The sections handed to the layers below (``index``,
``embedding``, ``ingest``) live beside the code they configure (``index/settings.py``, …;
``memory_pipeline/sections.py`` is their common shape) and are composed here. ``Settings()`` never reads the environment:
``Settings.from_env(env)`` does, and refuses a bad value with the variable's name.

``PipelineSettings`` is the Dagster pipeline's section (sources file, checks, golden
set, alerts), built the same way from ``MEMORY_PIPELINE_*`` variables. It is read
beside ``Settings`` by the Dagster composition root, and kept out of ``Settings``'
fields: those are the memory's, carried to every run as ``HYBRID_RAG_*`` variables.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import annotated_types
from pydantic import (
    BaseModel,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from memory_pipeline import locations
from memory_pipeline.embedding.settings import EmbeddingSettings as EmbeddingSettings
from memory_pipeline.embedding.settings import default_cache_dir as default_cache_dir
from memory_pipeline.errors import InvalidInputError, SettingError
from memory_pipeline.index.settings import IndexSettings as IndexSettings
from memory_pipeline.ingest.settings import IngestSettings as IngestSettings
from memory_pipeline.memory.prompt_recall import DEFAULT_BM25_FLOOR as PROMPT_BM25_FLOOR
from memory_pipeline.memory.prompt_recall import DEFAULT_BUDGET as PROMPT_BUDGET
from memory_pipeline.memory.prompt_recall import DEFAULT_FLOOR as PROMPT_FLOOR
from memory_pipeline.memory.prompt_recall import IDLE_SECONDS as PROMPT_IDLE
from memory_pipeline.memory.recall import DEFAULT_BUDGET
from memory_pipeline.memory.scoring import (
    DEFAULT_GRACE_DAYS,
    DEFAULT_MAX_FRACTION,
    DEFAULT_SCORE_THRESHOLD,
    MemoryParams,
)
from memory_pipeline.metadata import KnowledgeType
from memory_pipeline.search.fusion import parse_fusion
from memory_pipeline.search.params import (
    MAX_GUARANTEED,
    MAX_SPEAKER_BOOST,
    MAX_TOP_N,
    SearchRequest,
)
from memory_pipeline.sections import Refused, Section
from memory_pipeline.sections import no_placeholder as _no_placeholder
from memory_pipeline.sections import var as _var
from memory_pipeline.spaces import DEFAULT_SPACE, Spaces, check_space
from memory_pipeline.store.urls import sqlite_url

_SEARCH = SearchRequest()
#: The MCP server's tool sets (``serving/toolspec.py`` says which tool is in which).
ToolSet = Literal["core", "all"]
TOOL_SETS: tuple[ToolSet, ...] = ("core", "all")
_MEMORY = MemoryParams()
Unit = Annotated[float, annotated_types.Ge(0.0), annotated_types.Le(1.0)]


class SearchSettings(Section):
    top_n: Annotated[int, annotated_types.Ge(1), annotated_types.Le(MAX_TOP_N)] = _var(
        "TOP_N", _SEARCH.top_n
    )
    fusion: str = _var("FUSION", _SEARCH.fusion)  # see memory_pipeline/search/fusion.py
    rrf_k: Annotated[int, annotated_types.Ge(0)] = _var("RRF_K", _SEARCH.rrf_k)
    guaranteed_types: tuple[str, ...] = _var("GUARANTEED_TYPES", _SEARCH.guaranteed_types)
    guaranteed_importance_threshold: Unit = _var(
        "GUARANTEED_IMPORTANCE", _SEARCH.guaranteed_importance_threshold
    )
    guaranteed_candidates_limit: Annotated[
        int, annotated_types.Ge(0), annotated_types.Le(MAX_GUARANTEED)
    ] = _var("GUARANTEED_LIMIT", _SEARCH.guaranteed_candidates_limit)
    speaker_boost: Annotated[
        float, annotated_types.Ge(0.0), annotated_types.Le(MAX_SPEAKER_BOOST)
    ] = _var("SPEAKER_BOOST", _SEARCH.speaker_boost)

    @field_validator("fusion", mode="before")
    @classmethod
    def _fusion(cls, value: Any) -> Any:
        return parse_fusion(value, "HYBRID_RAG_FUSION").value if isinstance(value, str) else value

    @field_validator("guaranteed_types", mode="before")
    @classmethod
    def _types(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = tuple(t.strip() for t in value.split(",") if t.strip())
        unknown = sorted(set(value) - {k.value for k in KnowledgeType})
        if unknown:
            raise Refused(
                "guaranteed_types",
                f"names unknown knowledge types {unknown}; "
                f"use some of: {', '.join(k.value for k in KnowledgeType)}",
            )
        return value


class MemorySettings(Section):
    """The memory axis; ``MemoryParams`` checks the ranges (and that the weights leave room)."""

    time_weight: float = _var("TIME_WEIGHT", _MEMORY.time_weight)
    freq_weight: float = _var("FREQ_WEIGHT", _MEMORY.freq_weight)
    importance_threshold: float = _var("IMPORTANCE_THRESHOLD", _MEMORY.importance_threshold)
    # knowledge_type -> half-life in days (None: never decays); ``news=14,paper=none``
    half_lives: tuple[tuple[str, float | None], ...] = _var("HALF_LIVES", ())
    # the size in tokens of the block ``memory-pipeline recall`` prints (memory/recall.py)
    recall_budget: Annotated[int, annotated_types.Ge(1)] = _var("RECALL_BUDGET", DEFAULT_BUDGET)
    # memories handed over with each prompt (``recall --prompt``, memory/prompt_recall.py)
    prompt_recall: bool = _var("PROMPT_RECALL", True)
    prompt_recall_budget: Annotated[int, annotated_types.Ge(1)] = _var(
        "PROMPT_RECALL_BUDGET", PROMPT_BUDGET
    )
    prompt_recall_floor: Annotated[float, annotated_types.Ge(-1), annotated_types.Le(1)] = _var(
        "PROMPT_RECALL_FLOOR", PROMPT_FLOOR
    )
    prompt_recall_bm25_floor: Annotated[float, annotated_types.Ge(0)] = _var(
        "PROMPT_RECALL_BM25_FLOOR", PROMPT_BM25_FLOOR
    )
    prompt_recall_helper: bool = _var("PROMPT_RECALL_HELPER", True)
    prompt_recall_idle: Annotated[float, annotated_types.Gt(0)] = _var(
        "PROMPT_RECALL_IDLE", PROMPT_IDLE
    )

    @field_validator("half_lives", mode="before")
    @classmethod
    def _half_lives(cls, value: Any) -> Any:
        if isinstance(value, str):
            return _parse_half_lives(value)
        return tuple(value.items()) if isinstance(value, Mapping) else value

    @model_validator(mode="after")
    def _axis(self) -> MemorySettings:
        try:
            self.params()
        except InvalidInputError as exc:
            # MemoryParams names its parameter first ("importance_threshold must be …").
            name = str(exc).split(" ", 1)[0]
            if name in type(self).model_fields:
                raise Refused(name, str(exc)) from None
            raise Refused("half_lives", f"half_lives: {exc}") from None
        return self

    def params(self) -> MemoryParams:
        return MemoryParams(
            time_weight=self.time_weight,
            freq_weight=self.freq_weight,
            importance_threshold=self.importance_threshold,
            half_life_overrides=dict(self.half_lives),
        )


class ForgettingSettings(Section):
    score_threshold: Unit = _var("FORGET_SCORE_THRESHOLD", DEFAULT_SCORE_THRESHOLD)
    # Days after ingest or the last access in which no chunk is forgotten for its age
    # (memory_pipeline/memory/scoring.py); search ranking ignores it.
    grace_days: Annotated[float, annotated_types.Ge(0.0)] = _var(
        "FORGET_GRACE_DAYS", DEFAULT_GRACE_DAYS
    )
    max_fraction: Unit = _var("FORGET_MAX_FRACTION", DEFAULT_MAX_FRACTION)

    def limits(
        self,
        score_threshold: float | None = None,
        max_fraction: float | None = None,
        grace_days: float | None = None,
    ) -> dict[str, Any]:
        """The limits of one forgetting run: those given (not None), the configured rest."""
        given = {
            "score_threshold": score_threshold,
            "max_fraction": max_fraction,
            "grace_days": grace_days,
        }
        return {k: getattr(self, k) if v is None else v for k, v in given.items()}


class ServingSettings(Section):
    """What the MCP server may touch; read by ``serving``, which owns the rules."""

    # os.pathsep-separated folders ingest may read (None: the server's working directory)
    allowed_roots: str | None = _var("ALLOWED_ROOTS")
    _roots = field_validator("allowed_roots", mode="before")(_no_placeholder)
    allow_hard_links: bool = _var("ALLOW_HARD_LINKS", False)
    http_token: str | None = _var("HTTP_TOKEN", repr=False)
    # the tools the server lists: core (search, read, remember, forget) or all (maintenance too)
    tools: ToolSet = _var("TOOLS", "core")


class Settings(BaseSettings):
    """Every setting with its default, in sections; see the README for the variables."""

    model_config = SettingsConfigDict(
        frozen=True, extra="forbid", validate_by_name=True, validate_by_alias=True
    )

    # One memory per user: its data folder unless set (memory_pipeline/locations.py).
    db_path: Path = _var("DB_PATH", default_factory=lambda: locations.Layout.default().db)
    database_url: str | None = _var("DATABASE_URL", repr=False)  # may hold a password
    index_path: Path = _var("INDEX_PATH", default_factory=lambda: locations.Layout.default().index)
    archive_path: Path = _var(
        "ARCHIVE_PATH", default_factory=lambda: locations.Layout.default().archive
    )
    _paths = field_validator(
        "db_path", "database_url", "index_path", "archive_path", mode="before"
    )(_no_placeholder)
    # The memory space this process writes to, and the others it may also read
    # (memory_pipeline/spaces.py); bound at the entry point, never widened by a caller.
    space: str = _var("SPACE", DEFAULT_SPACE)
    read_spaces: tuple[str, ...] = _var("READ_SPACES", ())
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    index: IndexSettings = Field(default_factory=IndexSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    forgetting: ForgettingSettings = Field(default_factory=ForgettingSettings)
    serving: ServingSettings = Field(default_factory=ServingSettings)

    SECTIONS: ClassVar[tuple[str, ...]] = (
        "embedding",
        "ingest",
        "index",
        "search",
        "memory",
        "forgetting",
        "serving",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Only what the caller passes: the environment is read by from_env, at entry points.
        return (init_settings,)

    @model_validator(mode="before")
    @classmethod
    def _route(cls, data: Any) -> Any:
        """A section's field may be given by its own name: ``Settings(top_n=20)``."""
        if not isinstance(data, dict):
            return data
        out: dict[str, Any] = {}
        for key, value in data.items():
            where = _SECTION_OF.get(key)
            if where is None or key in cls.model_fields:
                out[key] = value
            else:
                section = out.setdefault(where, {})
                if isinstance(section, BaseModel):
                    section = out[where] = section.model_dump()
                section[key] = value
        return out

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise _invalid(exc) from None

    @field_validator("space", mode="before")
    @classmethod
    def _space(cls, value: Any) -> Any:
        return _checked_space("space", value)

    @field_validator("read_spaces", mode="before")
    @classmethod
    def _read_spaces(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [s.strip() for s in value.split(",") if s.strip()]
        return tuple(_checked_space("read_spaces", s) for s in value)

    def spaces(self) -> Spaces:
        """The binding these settings give a memory: write ``space``, read it and
        ``read_spaces``."""
        return Spaces.bound(self.space, self.read_spaces)

    def settled(self, cwd: Path | None = None) -> tuple[Settings, str | None]:
        """These settings with the memory's place settled (``locations.settle``: the
        default folder, made, or a memory the old defaults left in ``cwd``), and the
        notice an entry point prints on stderr (None: nothing to say)."""
        if self.database_url:
            return self, None
        configured = locations.Layout(self.db_path, self.index_path, self.archive_path)
        settled = locations.settle(configured, Path.cwd() if cwd is None else cwd)
        if settled.layout == configured:
            return self, settled.notice
        layout = settled.layout
        moved = self.replace(
            db_path=layout.db, index_path=layout.index, archive_path=layout.archive
        )
        return moved, settled.notice

    @property
    def capture_dir(self) -> Path:
        """Where captured sessions wait to be stored (``locations.capture_dir``: the hook,
        which never loads these settings, finds the same folder)."""
        return locations.capture_dir(self.db_path)

    @property
    def url(self) -> str:
        return self.database_url or sqlite_url(self.db_path.resolve())

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes`` (section fields by their own name), checked again."""
        data = self.model_dump()
        for key, value in changes.items():
            where = None if key in type(self).model_fields else _SECTION_OF.get(key)
            if where is None:
                data[key] = value
            else:
                data[where][key] = value
        return type(self)(**data)

    def with_flags(self, flags: Mapping[str, tuple[str, Any]]) -> Settings:
        """``replace`` with command-line values, ``{field: (flag, value)}`` (None: not given).

        A refused value is named by its flag (``--space: space name …``), not by the
        variable it overrides; one the flags did not set keeps its variable's name."""
        given = {field: value for field, (_, value) in flags.items() if value is not None}
        try:
            return self.replace(**given)
        except SettingError as exc:
            if exc.field not in given:
                raise
            detail = exc.detail.removeprefix(f"{exc.field}: ")
            raise SettingError(flags[exc.field][0], exc.field, detail) from None

    def search_request(self, *, memory: MemoryParams | None = None, **chosen: Any) -> SearchRequest:
        """One search as configured, with what the caller ``chosen`` (top_k, enable_mmr, …);
        ``memory`` is the memory axis (default: ``memory_params()``). Checked when it runs."""
        configured = {**self.search.model_dump(), "memory": memory or self.memory_params()}
        return SearchRequest(**{**configured, **chosen})

    def memory_params(
        self,
        *,
        time_weight: float | None = None,
        freq_weight: float | None = None,
        importance_threshold: float | None = None,
    ) -> MemoryParams:
        """The memory axis as configured; a weight given (not None) replaces its setting."""
        given = {
            "time_weight": time_weight,
            "freq_weight": freq_weight,
            "importance_threshold": importance_threshold,
        }
        chosen: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
        return dataclasses.replace(self.memory.params(), **chosen)

    def to_env(self) -> dict[str, str]:
        """The settings that differ from their defaults, as ``HYBRID_RAG_*`` variables
        (``from_env`` reads them back to equal settings). The database URL and the HTTP
        token are left out: they may be secrets, and travel on their own."""
        default = Settings()
        out: dict[str, str] = {}
        for var, (section, name) in ENV_VARS.items():
            if var in SECRET_VARS:
                continue
            value = _get(self, section, name)
            if value != _get(default, section, name) and value is not None:
                out[var] = _render(value)
        return out

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Settings from HYBRID_RAG_* variables (the names of the original system).

        An empty variable means unset (the default). A malformed or out-of-range value
        is refused here, at the entry point, with the variable's name.
        """
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for var, (section, name) in ENV_VARS.items():
            raw = env.get(var, "")
            if raw != "":
                target = values.setdefault(section, {}) if section else values
                target[var] = (raw.strip() or raw) if _stripped(name) else raw
        return cls(**values)


def _fields() -> dict[str, tuple[str, FieldInfo]]:
    out: dict[str, tuple[str, FieldInfo]] = {}
    for name, info in Settings.model_fields.items():
        if name not in Settings.SECTIONS:
            out[name] = ("", info)
    for section in Settings.SECTIONS:
        model: type[BaseModel] = Settings.model_fields[section].annotation  # type: ignore[assignment]
        for name, info in model.model_fields.items():
            out[name] = (section, info)
    return out


_FIELDS = _fields()
_SECTION_OF = {name: section for name, (section, _) in _FIELDS.items() if section}
#: Variable -> (section, field); '' is the top level.
ENV_VARS: dict[str, tuple[str, str]] = {
    str(info.validation_alias): (section, name) for name, (section, info) in _FIELDS.items()
}
_VAR_OF = {name: var for var, (_, name) in ENV_VARS.items()}
SECRET_VARS = frozenset(
    {"HYBRID_RAG_DATABASE_URL", "HYBRID_RAG_HTTP_TOKEN", "HYBRID_RAG_QDRANT_API_KEY"}
)


def variable(field: str) -> str:
    """The ``HYBRID_RAG_*`` variable that sets ``field`` (e.g. ``allowed_roots``)."""
    return _VAR_OF[field]


def _get(settings: Settings, section: str, name: str) -> Any:
    return getattr(getattr(settings, section) if section else settings, name)


def _stripped(name: str) -> bool:
    """Numbers and switches are read with surrounding blanks removed (not paths or names)."""
    annotation = _FIELDS[name][1].annotation
    return annotation in (int, float, bool) or name in {
        "fusion",
        "guaranteed_types",
        "space",
        "read_spaces",
    }


def _render(value: Any) -> str:
    if isinstance(value, tuple) and value and isinstance(value[0], tuple):
        return ",".join(f"{k}={'none' if v is None else repr(v)}" for k, v in value)
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def _checked_space(field: str, value: Any) -> Any:
    try:
        return check_space(value)
    except InvalidInputError as exc:
        raise Refused(field, f"{field}: {exc}") from None


def _parse_half_lives(raw: str) -> tuple[tuple[str, float | None], ...]:
    """``news=14,paper=180,experiment=none``: days per knowledge type (none: never decays)."""
    out: list[tuple[str, float | None]] = []
    for item in (i.strip() for i in raw.split(",") if i.strip()):
        kind, sep, days = item.partition("=")
        try:
            if not sep:
                raise ValueError
            value = None if days.strip().lower() == "none" else float(days)
        except ValueError:
            raise Refused(
                "half_lives",
                f"{item!r} is not <knowledge_type>=<days> (or =none); e.g. news=14,paper=180",
            ) from None
        out.append((kind.strip(), value))
    return tuple(out)


def _expected(name: str) -> str:
    """What a field's value must be, in words, from the limits declared on it."""
    info = _FIELDS[name][1]
    low = next((m.ge for m in info.metadata if isinstance(m, annotated_types.Ge)), None)
    high = next((m.le for m in info.metadata if isinstance(m, annotated_types.Le)), None)
    if (low, high) == (0.0, 1.0) and info.annotation is float:
        return "a number in [0, 1]"
    if low is not None and high is not None:
        return f"between {low} and {high}"
    if name == "max_chunk_size":
        return f"at least {low} tokens"
    return f"at least {low}" if low is not None else "valid"


def _invalid(exc: ValidationError) -> InvalidInputError:
    """The first error, phrased with the variable that holds the wrong value."""
    err = exc.errors()[0]
    cause = err.get("ctx", {}).get("error")
    name = cause.field if isinstance(cause, Refused) else str(err["loc"][-1])
    field = next((f for f, v in _VAR_OF.items() if v == name), name)
    var = _VAR_OF.get(field, name)
    got = err.get("input")
    if isinstance(cause, Refused):
        text = str(cause)
        message = text if text.startswith(field) else f"{field} {text}"
    elif isinstance(cause, InvalidInputError):  # a parser that names the variable itself
        return cause
    elif err["type"] in {"int_parsing", "int_from_float", "int_type"}:
        message = f"{field} must be an integer, got {got!r}"
    elif err["type"] in {"float_parsing", "float_type"}:
        message = f"{field} must be a number, got {got!r}"
    elif err["type"] in {"bool_parsing", "bool_type"}:
        message = f"{field} must be true or false (1/0, yes/no), got {got!r}"
    elif err["type"] == "extra_forbidden":
        return InvalidInputError(f"unknown setting {name!r}")
    elif err["type"].startswith(("greater", "less")):
        message = f"{field} must be {_expected(field)}, got {got!r}"
    else:
        message = f"{field}: {err['msg']}, got {got!r}"
    return SettingError(var, field, message)


# The Dagster pipeline's section. Its defaults live here, the lowest layer that knows
# them: the Dagster modules (layer 4) that use them import them from this one place.
DEFAULT_TAG_COVERAGE_FLOOR = 0.5  # share of chunks with a tag below which the check warns
DEFAULT_INDEX_DEBOUNCE_SECONDS = 20  # quiet period of the index queue before update_index
DEFAULT_EVAL_MARGIN = 0.02  # absolute drop in nDCG@10 / Recall@10 that fails the gate
DEFAULT_UI_URL = "http://127.0.0.1:3000"  # links in alerts point into this Dagster UI
_TRUE = frozenset({"1", "true", "yes", "on"})
#: field -> (lowest, highest or None) of the pipeline's numbers
_PIPELINE_BOUNDS: dict[str, tuple[float, float | None]] = {
    "tag_coverage_floor": (0.0, 1.0),
    "index_debounce_seconds": (0.0, None),
    "eval_margin": (0.0, 1.0),
}


def _pipeline_var(name: str, default: Any = None, **kw: Any) -> Any:
    """A field read from the variable ``MEMORY_PIPELINE_<name>``, with its default."""
    return Field(default=default, validation_alias=f"MEMORY_PIPELINE_{name}", **kw)


class PipelineSettings(Section):
    """The Dagster pipeline's settings (``MEMORY_PIPELINE_*``; see docs/dagster.md)."""

    sources_file: str | None = _pipeline_var("SOURCES")
    tag_coverage_floor: float = _pipeline_var("TAG_COVERAGE_FLOOR", DEFAULT_TAG_COVERAGE_FLOOR)
    index_debounce_seconds: float = _pipeline_var(
        "INDEX_DEBOUNCE_SECONDS", DEFAULT_INDEX_DEBOUNCE_SECONDS
    )
    # The weekly schedule archives (opt-in), not only reports.
    forgetting_archive: bool = _pipeline_var("FORGETTING_ARCHIVE", False)
    golden_file: str | None = _pipeline_var("GOLDEN")
    # Evaluation runs and the baseline (default: beside the golden set).
    eval_dir: str | None = _pipeline_var("EVAL_DIR")
    eval_margin: float = _pipeline_var("EVAL_MARGIN", DEFAULT_EVAL_MARGIN)
    # Alerts (memory_pipeline/alerts.py). The webhook URL usually holds a secret token:
    # kept out of repr, and never shown in the Dagster UI.
    alert_webhook: str | None = _pipeline_var("ALERT_WEBHOOK", repr=False)
    alert_log: str | None = _pipeline_var("ALERT_LOG")  # default: beside the index folder
    ui_url: str = _pipeline_var("UI_URL", DEFAULT_UI_URL)

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise _invalid(exc) from None

    @field_validator(*_PIPELINE_BOUNDS, mode="before")
    @classmethod
    def _number(cls, value: Any, info: ValidationInfo) -> Any:
        name = str(info.field_name)
        var = pipeline_variable(name)
        if isinstance(value, str):
            raw = value.strip()
            if not raw:  # blank: the default
                return cls.model_fields[name].default
            try:
                value = float(raw)
            except ValueError:
                raise InvalidInputError(f"{var} must be a number, got {raw!r}") from None
        low, high = _PIPELINE_BOUNDS[name]
        if isinstance(value, int | float) and (value < low or (high is not None and value > high)):
            bound = f"[{low:g}, {high:g}]" if high is not None else f"≥ {low:g}"
            raise InvalidInputError(f"{var} must be {bound}, got {value:g}")
        return value

    @field_validator("forgetting_archive", mode="before")
    @classmethod
    def _switch(cls, value: Any) -> Any:
        """On for 1/true/yes/on; anything else leaves the archive off."""
        return value.strip().lower() in _TRUE if isinstance(value, str) else value

    @field_validator("alert_webhook", "ui_url", mode="before")
    @classmethod
    def _http_url(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, str):
            return value
        name = str(info.field_name)
        raw = value.strip()
        if not raw:
            return cls.model_fields[name].default
        if not raw.lower().startswith(("http://", "https://")):
            secret = cls.model_fields[name].repr is False  # a webhook URL may carry its token
            shown = "" if secret else f", got {raw!r}"
            var = pipeline_variable(name)
            raise InvalidInputError(f"{var} must be an http:// or https:// URL{shown}")
        return raw

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> PipelineSettings:
        """The pipeline's settings from ``MEMORY_PIPELINE_*`` variables; an empty one is
        unset (the default), a bad one refused with the variable's name."""
        env = os.environ if env is None else env
        values = {
            var: env[var]
            for var in (pipeline_variable(name) for name in cls.model_fields)
            if env.get(var, "") != ""
        }
        return cls(**values)


def pipeline_variable(field: str) -> str:
    """The ``MEMORY_PIPELINE_*`` variable that sets ``field`` (e.g. ``alert_log``)."""
    return str(PipelineSettings.model_fields[field].validation_alias)
