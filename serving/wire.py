"""What goes on the wire: compact results and compact schemas.

An agent pays for ``tools/list`` on every turn and for each result once, so
neither should carry what says nothing: a result is dumped once, without the
fields that hold their schema default (absent means the default), and sent as
``structuredContent`` plus the same JSON, compact, as text (for clients that
read only text). Schemas lose pydantic's generated ``title`` keywords and the
``null`` arm of optional fields (an optional field is one that is not
required). ``python -m serving.wire_size`` measures the result.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any, ParamSpec

import numpy as np
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel

P = ParamSpec("P")

SIGNIFICANT_DIGITS = 4
_NULL = {"type": "null"}
# Keys whose value maps names to schemas, not keywords to values.
_NAME_MAPS = ("properties", "$defs", "patternProperties")


# ----------------------------------------------------------------------------- results
def round_sig(value: float) -> float:
    """``value`` to 4 significant digits: scores and timings, whose further digits are noise."""
    if value == 0 or not math.isfinite(value):
        return value
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


def float32_list(vector: np.ndarray) -> list[float]:
    """A float32 vector as the shortest decimals that read back to the same float32 values.

    ``tolist()`` would print each as a float64 (0.12456822395324707 for 0.124568224):
    twice the characters, and the extra digits are not in the vector.
    """
    return [float(s) for s in np.asarray(vector, dtype=np.float32).astype(str)]


def compact_json(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def to_result(model: BaseModel) -> CallToolResult:
    """A tool's return value as the client receives it: structured, and the same JSON as text."""
    data = model.model_dump(mode="json", exclude_defaults=True)
    return CallToolResult(content=[TextContent(text=compact_json(data))], structured_content=data)


def as_result(fn: Callable[P, BaseModel]) -> Callable[P, CallToolResult]:
    """Wrap a tool so its model is sent by ``to_result``.

    The wrapper keeps ``fn``'s signature (``__wrapped__``), so the SDK still derives
    the output schema from ``fn``'s return type and validates the structured content
    against it.
    """

    def wrapper(*args: P.args, **kwargs: P.kwargs) -> CallToolResult:
        return to_result(fn(*args, **kwargs))

    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    wrapper.__name__ = getattr(fn, "__name__", "tool")
    wrapper.__doc__ = fn.__doc__
    return wrapper


# ----------------------------------------------------------------------------- schemas
def compact_schema(
    schema: Mapping[str, Any], *, closed: bool = False, descriptions: bool = True
) -> dict[str, Any]:
    """``schema`` without what its types already say; ``closed`` adds additionalProperties: false.

    * ``title`` keywords pydantic generates from field and class names go;
    * an optional field's ``anyOf: [X, null]`` with ``default: null`` becomes ``X``
      (the field is optional because it is not required; results leave it out);
    * integer is folded into number in an ``anyOf`` of bare types, and an ``anyOf`` left
      with one type becomes that ``type`` (several stay an ``anyOf``: a ``type`` list is
      valid JSON Schema, but strict clients warn on it);
    * an enum's class docstring goes (its values are the documentation; the fields
      that use it keep their own descriptions);
    * a ``$defs`` entry used once is written where it is used: ``$defs`` are for shapes
      a schema repeats;
    * without ``descriptions``, every description goes: for output schemas, which
      clients use to validate results and which the usual tool formats never show a
      model (what a model must know of a result, its tool's description says).
    """
    out = _compact(dict(schema), drop=("title",) if descriptions else ("title", "description"))
    out = _inline_single_use(out)
    if closed:
        out["additionalProperties"] = False
    return out


def _compact(node: Any, drop: tuple[str, ...], names: bool = False) -> Any:
    if isinstance(node, list):
        return [_compact(item, drop) for item in node]
    if not isinstance(node, dict):
        return node
    if names:
        return {name: _compact(value, drop) for name, value in node.items()}
    out = {
        key: _compact(value, drop, names=key in _NAME_MAPS)
        for key, value in node.items()
        if key not in drop
    }
    if "enum" in out:
        out.pop("description", None)
    return _simplify(out)


_REF = "#/$defs/"


def _refs(node: Any, counts: dict[str, int]) -> dict[str, int]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_REF):
            counts[ref.removeprefix(_REF)] = counts.get(ref.removeprefix(_REF), 0) + 1
        for value in node.values():
            _refs(value, counts)
    elif isinstance(node, list):
        for item in node:
            _refs(item, counts)
    return counts


def _inline_single_use(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with each ``$defs`` entry referenced once put in place of its ``$ref``."""
    defs = dict(schema.get("$defs", {}))
    while True:
        counts = _refs({k: v for k, v in schema.items() if k != "$defs"} | {"$defs": defs}, {})
        # (a shape that refers to itself is never written in place: it has no end)
        once = {n for n, d in defs.items() if counts.get(n) == 1 and not _refs(d, {}).get(n)}
        if not once:
            break
        chosen = {name: defs[name] for name in once}
        schema = {k: _put(v, chosen) for k, v in schema.items() if k != "$defs"}
        defs = {name: _put(d, chosen) for name, d in defs.items() if name not in once}
    if defs:
        schema["$defs"] = defs
    else:
        schema.pop("$defs", None)
    return schema


def _put(node: Any, defs: dict[str, Any]) -> Any:
    """``node`` with every ``$ref`` to one of ``defs`` replaced by the shape, its siblings kept."""
    if isinstance(node, list):
        return [_put(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.removeprefix(_REF) in defs:
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        return _put({**defs[ref.removeprefix(_REF)], **siblings}, defs)
    return {k: _put(v, defs) for k, v in node.items()}


def _simplify(node: dict[str, Any]) -> dict[str, Any]:
    arms = node.get("anyOf")
    if not isinstance(arms, list):
        return node
    if _NULL in arms and "default" in node and node["default"] is None:
        arms = [a for a in arms if a != _NULL]
        node = {k: v for k, v in node.items() if k not in ("anyOf", "default")}
        if len(arms) == 1:
            return _simplify({**arms[0], **node})
        node["anyOf"] = arms
    if all(isinstance(a, dict) and set(a) == {"type"} for a in arms):
        types = [a["type"] for a in arms]
        if "number" in types and "integer" in types:
            types.remove("integer")
        rest = {k: v for k, v in node.items() if k != "anyOf"}
        if len(types) == 1:
            return {"type": types[0], **rest}
        # Several types stay an anyOf of one type each: strict clients refuse a type list.
        return {"anyOf": [{"type": t} for t in types], **rest}
    return node
