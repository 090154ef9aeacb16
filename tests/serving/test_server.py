"""The server's own pieces, in process: schemas against the library, error handling, wiring."""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

from memory_pipeline.config import Settings
from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.embedding.registry import embedder_for
from memory_pipeline.errors import NotFoundError
from memory_pipeline.system import MemorySystem
from serving import schemas
from serving.__main__ import parse_args
from serving.errors import WriteLock, tool_errors
from serving.harness import REPO, StoreLayout, error_text, snapshot, structured
from serving.loading import DEFAULT_POLICY, LoadPolicy
from serving.read_tools import ReadTools
from serving.server import CORE_TOOLS, INSTRUCTIONS, TOOLS, build_server
from serving.toolspec import tool, tool_specs
from serving.wire import compact_schema
from serving.write_tools import WriteTools

#: What an agent needs on every turn: search, read around a hit, remember, forget.
CORE = {"hybrid_search", "get_document_chunks", "ingest_text", "delete_document"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def unknown_keys(model: type[BaseModel], data: Any, where: str = "") -> list[str]:
    """Keys of a library to_dict() that the output model would drop, at any depth."""
    if isinstance(data, list):
        return [k for item in data for k in unknown_keys(model, item, where)]
    if not isinstance(data, dict):
        return []
    missing = [f"{where}{k}" for k in data if k not in model.model_fields]
    for name, info in model.model_fields.items():
        if name not in data:
            continue
        inner = info.annotation
        for arg in getattr(inner, "__args__", ()) or (inner,):
            sub = getattr(arg, "__args__", ()) or (arg,)
            for candidate in sub:
                if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                    missing += unknown_keys(candidate, data[name], f"{where}{name}.")
    return missing


def test_report_models_keep_every_key_the_library_reports(system: MemorySystem) -> None:
    system.ingest_text(
        "Old news about rank fusion.",
        "news",
        {"knowledge_type": "news", "source_date": "2001-01-01", "tags": ["t"]},
    )
    system.update_index()
    forgotten = system.run_forgetting_batch(dry_run=False, max_fraction=1.0, grace_days=0)
    restored = system.restore_archived(run_id=forgotten.run_id)
    reports: list[tuple[type[BaseModel], dict[str, Any]]] = [
        (schemas.ForgettingReportOut, forgotten.to_dict()),
        (schemas.RestoreReportOut, restored.to_dict()),
        (schemas.HealthReportOut, system.index_health().to_dict()),
        (schemas.SystemStatsOut, system.system_stats().to_dict()),
    ]
    for model, data in reports:
        assert unknown_keys(model, data) == [], model.__name__
        model.model_validate(data)
    assert forgotten.examples, "the check must see a nested candidate"


@pytest.mark.anyio
async def test_unknown_arguments_are_named(system: MemorySystem, tmp_path: Path) -> None:
    async with Client(
        build_server(system, roots=[tmp_path], cwd=tmp_path, tool_set="all")
    ) as client:
        result = await client.call_tool("find_by_tag", {"tag": "x", "tags": ["y"], "lmit": 3})
        assert result.is_error
        assert "unknown argument(s) lmit, tags" in error_text(result)
        assert "limit, tag" in error_text(result)
        fine = await client.call_tool("find_by_tag", {"tag": "x"})
        assert structured(fine)["total"] == 0


@pytest.mark.anyio
async def test_hybrid_search_fuses_the_rewrites_an_agent_wrote(
    system: MemorySystem, tmp_path: Path
) -> None:
    system.ingest_text("Car maintenance: change the engine oil every ten thousand km.", "car")
    system.ingest_text("The automobile was invented in 1886.", "automobile")
    system.ingest_text("Bob prefers jazz records on long evenings.", "jazz")
    system.update_index()
    query = {"query": "automobile upkeep on evenings", "top_k": 2, "include_stats": True}
    async with Client(build_server(system, roots=[tmp_path], cwd=tmp_path)) as client:
        alone = structured(await client.call_tool("hybrid_search", query))
        fused = structured(
            await client.call_tool("hybrid_search", {**query, "rewrites": ["car engine oil"]})
        )
        too_many = await client.call_tool("hybrid_search", {**query, "rewrites": ["a"] * 9})
        control = await client.call_tool("hybrid_search", {**query, "rewrites": ["oil\x07"]})
    assert "car" not in [h["title"] for h in alone["chunks"]] and "phrasings" not in alone["stats"]
    assert "car" in [h["title"] for h in fused["chunks"]] and fused["stats"]["phrasings"] == 2
    assert too_many.is_error and "rewrites" in error_text(too_many)
    assert control.is_error
    assert "rewrites[0]: control character U+0007 at index 3" in error_text(control)


@pytest.mark.anyio
async def test_hybrid_search_reads_a_time_in_the_query_against_now(
    system: MemorySystem, tmp_path: Path
) -> None:
    # The same words in another order: their scores tie, the older note was stored first.
    system.ingest_text("Dinner with Sam at the harbour.", "march", {"source_date": "2023-03-10"})
    system.ingest_text("At the harbour, dinner with Sam.", "may", {"source_date": "2023-05-09"})
    system.update_index()
    query = {"query": "dinner with Sam at the harbour yesterday", "top_k": 2}
    async with Client(build_server(system, roots=[tmp_path], cwd=tmp_path)) as client:
        may = structured(await client.call_tool("hybrid_search", {**query, "now": "2023-05-10"}))
        march = structured(await client.call_tool("hybrid_search", {**query, "now": "2023-03-11"}))
        bad = await client.call_tool("hybrid_search", {**query, "now": "10/05/2023"})
    assert [h["title"] for h in may["chunks"]] == ["may", "march"]
    assert [h["title"] for h in march["chunks"]] == ["march", "may"]
    assert bad.is_error and "now" in error_text(bad)


@pytest.mark.anyio
async def test_a_conversation_hit_carries_its_turns_over_the_wire(
    system: MemorySystem, tmp_path: Path
) -> None:
    from dataclasses import replace

    from memory_pipeline.ingest.loaders import load_text
    from memory_pipeline.ingest.turns import TurnText

    said = dt.datetime(2023, 5, 8, 13, 56, tzinfo=dt.UTC)
    turns = (
        TurnText("D1:1", "Ana", said, "Did you book the ferry to Hydra?"),
        TurnText("D1:2", "Sam", said, "Yes, yesterday."),
    )
    system.ingest_text("Ferries are not a topic of this note.", "other")
    [result] = system.ingest_loaded([replace(load_text("talk", "talk"), turns=turns)])
    async with Client(build_server(system, roots=[tmp_path], cwd=tmp_path)) as client:
        found = structured(await client.call_tool("hybrid_search", {"query": "Hydra", "top_k": 1}))
        window = structured(
            await client.call_tool(
                "get_document_chunks",
                {"doc_id": result.doc_id, "chunk_index": 0, "window": 1},
            )
        )
    [hit] = found["chunks"]
    assert hit["content"] == "Did you book the ferry to Hydra?"
    assert hit["turns"] == [
        {"turn_id": "D1:1", "speaker": "Ana", "said_at": "2023-05-08T13:56:00Z"}
    ]
    assert [c["turns"][0]["turn_id"] for c in window["chunks"]] == ["D1:1", "D1:2"]


@pytest.mark.anyio
async def test_a_failed_index_update_after_a_write_is_reported_not_raised(
    system: MemorySystem, tmp_path: Path
) -> None:
    system.ingest_text("First note.", "first")
    system.update_index()
    (system.settings.index_path / "CURRENT").write_text("{not json")
    async with Client(build_server(system, roots=[tmp_path], cwd=tmp_path)) as client:
        out = structured(
            await client.call_tool(
                "ingest_text", {"text": "Second note.", "title": "second", "rebuild_index": True}
            )
        )
    assert out["results"][0]["status"] == "ingested" and "index" not in out  # None: left out
    assert "cannot read" in out["index_error"] and "call update_index later" in out["index_error"]
    assert system.store.counts()["documents"] == 2


@pytest.mark.anyio
async def test_an_unchanged_ingest_brings_a_lagging_index_up(
    system: MemorySystem, tmp_path: Path
) -> None:
    """An earlier ingest stored its file but its index update was lost (killed)."""
    note = tmp_path / "note.md"
    note.write_text("# Note\n\nlanterns in the harbour", encoding="utf-8")
    system.ingest([note], update_index=False)
    async with Client(
        build_server(system, roots=[tmp_path], cwd=tmp_path, tool_set="all")
    ) as client:
        out = structured(await client.call_tool("ingest", {"file_paths": ["note.md"]}))
    assert out["results"][0]["status"] == "unchanged"
    assert out["index"]["added"] == 1
    assert not system.index_due()


class _Tools:
    """Tools declared out of the order of ``tools/list``, and one public helper."""

    @tool("Forget", "destructive")
    def forget(self) -> None: ...

    @tool("Read", "read", core=True)
    def read(self) -> None: ...

    @tool("Write", "write", idempotent=True)
    def write(self) -> None: ...

    def _helper(self) -> None: ...


class _Undeclared(_Tools):
    def sneaky(self) -> None: ...


def test_each_tool_declares_its_kind_beside_it_and_is_listed_by_kind() -> None:
    assert [(s.name, s.kind, s.idempotent) for s in tool_specs(_Tools)] == [
        ("read", "read", False),
        ("write", "write", True),
        ("forget", "destructive", False),
    ]
    assert [s.name for s in tool_specs(_Tools, "core")] == ["read"]
    assert [s.name for s in tool_specs(_Tools, "all")] == ["read", "write", "forget"]
    with pytest.raises(TypeError, match=r"_Undeclared\.sneaky is public but declares no tool"):
        tool_specs(_Undeclared)


@pytest.mark.anyio
async def test_a_server_lists_the_core_tools_unless_built_with_all(
    system: MemorySystem, tmp_path: Path
) -> None:
    async with Client(build_server(system, roots=[tmp_path], cwd=tmp_path)) as client:
        core = {t.name for t in (await client.list_tools()).tools}
        missing = await client.call_tool("update_index", {})
    async with Client(build_server(system, roots=[tmp_path], cwd=tmp_path, tool_set="all")) as c:
        every = {t.name for t in (await c.list_tools()).tools}
    assert core == {s.name for s in CORE_TOOLS} == CORE
    assert every == {s.name for s in TOOLS} and len(every) == 15
    mentioned = {name for name in every if re.search(rf"\b{name}\b", INSTRUCTIONS["core"])}
    assert mentioned <= core and {n for n in every if n in INSTRUCTIONS["all"]} >= {"ingest"}
    assert missing.is_error
    assert "update_index is a maintenance tool" in error_text(missing)
    assert "HYBRID_RAG_TOOLS=all" in error_text(missing)


def test_a_bad_tool_set_stops_the_server_with_its_name(tmp_path: Path) -> None:
    assert parse_args([]).tools is None and parse_args(["--tools", "all"]).tools == "all"
    with pytest.raises(SystemExit):
        parse_args(["--tools", "most"])
    env = StoreLayout(tmp_path).env(HYBRID_RAG_TOOLS="most")
    done = subprocess.run(
        [sys.executable, "-m", "serving"],
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert "HYBRID_RAG_TOOLS" in done.stderr and "'core' or 'all'" in done.stderr


def test_read_tools_only_read_and_write_tools_do_not_claim_to() -> None:
    assert {s.kind for s in tool_specs(ReadTools)} == {"read"}
    assert {s.kind for s in tool_specs(WriteTools)} == {"write", "destructive"}


def test_library_and_storage_errors_become_tool_errors() -> None:
    def missing() -> None:
        raise NotFoundError("no document with doc_id 'x'; find ids with search")

    def disk() -> None:
        raise OSError(28, "No space left on device")

    def bug() -> None:
        raise KeyError("internal")

    with pytest.raises(ToolError, match="no document with doc_id 'x'; find ids"):
        tool_errors(missing)()
    with pytest.raises(ToolError, match=r"disk is full \(No space left on device\); nothing was"):
        tool_errors(disk)()
    # A bug is named, not hidden behind the SDK's bare "Error executing tool X".
    with pytest.raises(ToolError, match=r"unexpected error .*KeyError: 'internal'.*only reads"):
        tool_errors(bug, read_only=True)()
    with pytest.raises(ToolError, match=r"KeyError: 'internal'.*rolls back.*Retry once"):
        tool_errors(bug)()


@pytest.mark.anyio
async def test_a_bug_reaches_the_client_named_and_its_traceback_the_log(
    system: MemorySystem, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    def broken(tag: str) -> list[Any]:
        raise ZeroDivisionError("division by zero in find_by_tag")

    monkeypatch.setattr(system, "find_by_tag", broken)
    async with Client(
        build_server(system, roots=[tmp_path], cwd=tmp_path, tool_set="all")
    ) as client:
        result = await client.call_tool("find_by_tag", {"tag": "x"})
    assert result.is_error
    assert error_text(result) == (
        "Error executing tool find_by_tag: unexpected error in the server: ZeroDivisionError: "
        "division by zero in find_by_tag. This tool only reads: the memory is unchanged. "
        "Retry once; if it fails the same way, report this message to whoever runs the "
        "server (its log has the details)"
    )
    logged = [r for r in caplog.records if r.name == "serving.errors"]
    assert logged and logged[0].exc_info and logged[0].exc_info[0] is ZeroDivisionError


def test_a_write_waiting_too_long_is_told_to_retry() -> None:
    lock = WriteLock(timeout_s=0.05)
    with lock.held(), pytest.raises(ToolError, match="try again"), lock.held():
        pass


def test_composition_root_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(embedder_for(Settings(model="hashing").embedding), HashingEmbedder)
    args = parse_args([])
    assert (args.http, args.host, args.model_load) == (False, "127.0.0.1", DEFAULT_POLICY.value)
    args = parse_args(["--http", "--port", "9000", "--model-load", "lazy"])
    assert (args.http, args.port, LoadPolicy(args.model_load)) == (True, 9000, LoadPolicy.LAZY)
    monkeypatch.setenv("HYBRID_RAG_MODEL_LOAD", "eager")
    assert parse_args([]).model_load == "eager"
    monkeypatch.setenv("HYBRID_RAG_MODEL_LOAD", "soon")
    with pytest.raises(SystemExit):
        parse_args([])


def test_naive_datetimes_are_taken_as_utc() -> None:
    f = schemas.SearchFiltersIn.model_validate({"created_after": "2026-01-02T03:04:05"})
    assert f.created_after == dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def test_a_bad_store_path_stops_the_server_with_a_message(tmp_path: Path) -> None:
    env = StoreLayout(tmp_path).env(HYBRID_RAG_DB_PATH=str(tmp_path / "no" / "such" / "m.db"))
    done = subprocess.run(
        [sys.executable, "-m", "serving"],
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert "cannot start the memory server" in done.stderr and "does not exist" in done.stderr


def expand(value: str, env: dict[str, str]) -> str:
    """Claude Code's ``${VAR}`` / ``${VAR:-default}`` expansion in .mcp.json."""

    def one(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(3)
        return env.get(name) or (default if default is not None else match.group(0))

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}", one, value)


@pytest.mark.anyio
async def test_the_checked_in_mcp_json_starts_the_server(tmp_path: Path) -> None:
    config = json.loads((REPO / ".mcp.json").read_text())
    entry = config["mcpServers"]["hybrid-rag"]
    layout = StoreLayout(tmp_path)
    outer = layout.env()  # the user's shell: points the store at tmp_path
    env = {**outer, **{k: expand(v, outer) for k, v in entry["env"].items()}}
    assert env["HYBRID_RAG_DB_PATH"] == str(layout.db)
    params = StdioServerParameters(
        command=str(REPO / entry["command"]), args=entry["args"], env=env, cwd=REPO
    )
    async with Client(params) as client:
        names = {t.name for t in (await client.list_tools()).tools}
    assert {"hybrid_search", "ingest", "ingest_text", "update_index"} <= names
    assert layout.db.exists()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("run_forgetting_batch", {"dry_run": "no", "max_fraction": 1.0}),
        ("run_forgetting_batch", {"dry_run": "false", "max_fraction": 1.0}),
        ("run_forgetting_batch", {"dry_run": 0, "max_fraction": 1.0}),
        ("ingest_text", {"text": "New text.", "title": "news", "rebuild_index": "yes"}),
        ("ingest_text", {"text": "New text.", "title": "news", "rebuild_index": 1}),
        ("delete_document", {"doc_id": "{doc}", "rebuild_index": "no"}),
        ("ingest", {"file_paths": ["new.md"], "rebuild_index": "true"}),
    ],
)
async def test_switches_that_change_what_is_written_take_only_json_booleans(
    system: MemorySystem, tmp_path: Path, tool: str, args: dict[str, Any]
) -> None:
    old = system.ingest_text(
        "Old news about rank fusion.",
        "news",
        {"knowledge_type": "news", "source_date": "2001-01-01"},
    )
    system.update_index()
    (tmp_path / "new.md").write_text("# New\n\nA new note.\n")
    args = {k: v.format(doc=old.doc_id) if k == "doc_id" else v for k, v in args.items()}
    before = snapshot(StoreLayout(tmp_path))
    async with Client(
        build_server(system, roots=[tmp_path], cwd=tmp_path, tool_set="all")
    ) as client:
        result = await client.call_tool(tool, args)
        switch = next(k for k in args if k in ("dry_run", "rebuild_index"))
        assert result.is_error and switch in error_text(result)
        assert "valid boolean" in error_text(result)
        assert snapshot(StoreLayout(tmp_path)) == before
        schema = next(t for t in (await client.list_tools()).tools if t.name == tool).input_schema
        assert schema["properties"][switch]["type"] == "boolean"


@pytest.mark.anyio
async def test_the_shipped_mcp_json_creates_its_data_folder(tmp_path: Path) -> None:
    """With the defaults of .mcp.json, a checkout without data/ gets one (docs/mcp.md says so)."""
    entry = json.loads((REPO / ".mcp.json").read_text())["mcpServers"]["hybrid-rag"]
    outer = {k: v for k, v in StoreLayout(tmp_path).env().items() if not k.startswith("HYBRID")}
    env = {**outer, **{k: expand(v, outer) for k, v in entry["env"].items()}}
    env["HYBRID_RAG_EMBEDDING_MODEL"] = "hashing"
    assert env["HYBRID_RAG_DB_PATH"] == "data/memory.db" and not (tmp_path / "data").exists()
    params = StdioServerParameters(
        command=str(REPO / entry["command"]), args=entry["args"], env=env, cwd=tmp_path
    )
    async with Client(params) as client:
        assert (await client.list_tools()).tools
    assert (tmp_path / "data" / "memory.db").exists() and (tmp_path / "data" / "indices").is_dir()


_ONCE = {"$ref": "#/$defs/Once", "description": "the field's"}
_TWICE = {"$ref": "#/$defs/Twice"}
_LOOP = {"$ref": "#/$defs/Loop"}


@pytest.mark.parametrize(
    ("schema", "descriptions", "expected"),
    [
        # a shape used once is written in place, the field's own keywords kept
        (
            {"properties": {"a": _ONCE}, "$defs": {"Once": {"type": "object", "title": "Once"}}},
            True,
            {"properties": {"a": {"type": "object", "description": "the field's"}}},
        ),
        # one used twice stays a $defs entry; one used once inside another goes in place too
        (
            {
                "properties": {"a": _TWICE, "b": _TWICE, "c": {"$ref": "#/$defs/Outer"}},
                "$defs": {
                    "Twice": {"type": "string"},
                    "Outer": {"properties": {"x": {"$ref": "#/$defs/Inner"}}},
                    "Inner": {"type": "integer"},
                },
            },
            True,
            {
                "properties": {
                    "a": _TWICE,
                    "b": _TWICE,
                    "c": {"properties": {"x": {"type": "integer"}}},
                },
                "$defs": {"Twice": {"type": "string"}},
            },
        ),
        # a shape that refers to itself has no end: it stays
        (
            {"properties": {"a": _LOOP}, "$defs": {"Loop": {"items": _LOOP, "type": "array"}}},
            True,
            {"properties": {"a": _LOOP}, "$defs": {"Loop": {"items": _LOOP, "type": "array"}}},
        ),
        # an output schema loses its descriptions, not a property named "description"
        (
            {
                "description": "x",
                "properties": {"description": {"type": "string", "description": "y"}},
            },
            False,
            {"properties": {"description": {"type": "string"}}},
        ),
    ],
)
def test_compact_schema(
    schema: dict[str, Any], descriptions: bool, expected: dict[str, Any]
) -> None:
    assert compact_schema(schema, descriptions=descriptions) == expected
