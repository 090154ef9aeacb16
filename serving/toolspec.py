"""What kind of tool each tool is, declared beside it with ``@tool``.

A tool is a public method of ``ReadTools`` or ``WriteTools``; ``@tool`` gives it
its title and kind (read, write or destructive; idempotent or not), from which
come its MCP annotations. ``tool_specs`` refuses a public method that declares
none, so a tool cannot be added without saying what it does to the memory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from mcp.types import ToolAnnotations

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

    def annotations(self) -> ToolAnnotations:
        """Only what differs from the spec's defaults; the title is the tool's own ``title``."""
        if self.kind == "read":
            return ToolAnnotations(read_only_hint=True, open_world_hint=False)
        return ToolAnnotations(
            destructive_hint=self.kind == "destructive",
            idempotent_hint=self.idempotent or None,
            open_world_hint=False,
        )


def tool(title: str, kind: Kind, *, idempotent: bool = False) -> Callable[[F], F]:
    """Declare a method an MCP tool of this title and kind, named as the method."""

    def declare(fn: F) -> F:
        setattr(fn, _SPEC, ToolSpec(fn.__name__, title, kind, idempotent))
        return fn

    return declare


def tool_specs(cls: type) -> tuple[ToolSpec, ...]:
    """The tools ``cls`` defines: by kind (``KINDS``), then in the order of the class body."""
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
        specs.append(spec)
    return tuple(sorted(specs, key=lambda s: KINDS.index(s.kind)))
