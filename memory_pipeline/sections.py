"""The shape every section of the settings shares, so that a section can live beside
the code it configures (``index/settings.py``, ``embedding/settings.py``,
``ingest/settings.py``) and ``config.py`` (which reads the environment) composes them.

A field is read from its ``HYBRID_RAG_*`` variable (``var``); a value outside its range
is refused with ``Refused``, which names the field, and ``config.py`` turns that into
the error that names the variable.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo

from memory_pipeline import locations


def var(name: str, default: Any = None, **kw: Any) -> Any:
    """A field read from the variable ``HYBRID_RAG_<name>``, with its default."""
    if "default_factory" not in kw:
        kw["default"] = default
    return Field(validation_alias=f"HYBRID_RAG_{name}", **kw)


class Section(BaseModel):
    model_config = ConfigDict(
        frozen=True, extra="forbid", validate_by_name=True, validate_by_alias=True
    )


class Refused(ValueError):
    """A value outside its range: ``field`` names it, the message says what it must be."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def one_of(field: str, value: Any, names: tuple[str, ...]) -> str:
    """``value`` as one of ``names`` (case and spaces ignored), or refused by ``field``."""
    name = str(value).strip().lower()
    if name not in names:
        raise Refused(field, f"must be one of {', '.join(names)}, got {value!r}")
    return name


def no_placeholder(value: Any, info: ValidationInfo) -> Any:
    """A path (or URL) holding an unexpanded ``${…}`` is refused before anything is made
    (a ``mode="before"`` field validator of the sections that hold paths)."""
    if value is not None and locations.unexpanded(value):
        name = str(info.field_name)
        secret = name == "database_url"  # may hold a password
        shown = "" if secret else f" is {str(value)!r},"
        raise Refused(name, f"{name}{shown} {locations.PLACEHOLDER_HELP}")
    return value
