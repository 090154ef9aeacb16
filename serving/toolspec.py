"""What kind of tool each tool is, declared beside it with ``@tool``.

A tool is a public method of ``ReadTools`` or ``WriteTools``; ``@tool`` gives it
its title and kind (read, write or destructive; idempotent or not), from which
come its MCP annotations, and whether it is in the ``core`` set. ``tool_specs``
refuses a public method that declares none, so a tool cannot be added without
saying what it does to the memory.

Tool sets: an agent pays for ``tools/list`` on every turn, so a server lists only
the ``core`` tools unless told ``all`` (``HYBRID_RAG_TOOLS``, ``--tools``). Core is
what an agent needs on any turn: search, read around a hit, remember a note,
forget a document. Maintenance (file ingest, tagging, index upkeep, audits,
forgetting runs, raw embeddings and re-ranking) is in ``all``, and in the CLI.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from mcp.types import ToolAnnotations

from memory_pipeline.config import TOOL_SETS as TOOL_SETS
from memory_pipeline.config import ToolSet as ToolSet

Kind = Literal["read", "write", "destructive"]
#: The order of ``tools/list``: reads first, then writes, then destructive tools.
KINDS: tuple[Kind, ...] = ("read", "write", "destructive")
_SPEC = "__tool_spec__"
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    kind: Kind
    idempotent: bool = False
    core: bool = False

    def listed_in(self, tool_set: ToolSet) -> bool:
        return tool_set == "all" or self.core

    def annotations(self) -> ToolAnnotations:
        """Only what differs from the spec's defaults; the title is the tool's own ``title``."""
        if self.kind == "read":
            return ToolAnnotations(read_only_hint=True, open_world_hint=False)
        return ToolAnnotations(
            destructive_hint=self.kind == "destructive",
            idempotent_hint=self.idempotent or None,
            open_world_hint=False,
        )


def tool(
    title: str, kind: Kind, *, idempotent: bool = False, core: bool = False
) -> Callable[[F], F]:
    """Declare a method an MCP tool of this title and kind, named as the method;
    ``core``: listed in the ``core`` tool set too, not only in ``all``."""

    def declare(fn: F) -> F:
        setattr(fn, _SPEC, ToolSpec(fn.__name__, title, kind, idempotent, core))
        return fn

    return declare


def tool_specs(cls: type, tool_set: ToolSet = "all") -> tuple[ToolSpec, ...]:
    """The tools ``cls`` defines in ``tool_set``: by kind (``KINDS``), then in the order of
    the class body."""
    specs = []
    for name, member in vars(cls).items():
        if name.startswith("_") or not callable(member):
            continue
        spec = getattr(member, _SPEC, None)
        if not isinstance(spec, ToolSpec):
            raise TypeError(
                f"{cls.__name__}.{name} is public but declares no tool: "
                "give it @tool(title, kind) or a name starting with '_'"
            )
        if spec.listed_in(tool_set):
            specs.append(spec)
    return tuple(sorted(specs, key=lambda s: KINDS.index(s.kind)))
