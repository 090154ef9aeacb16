"""``ingest`` reads only under the allowed roots: the pure checks, then through the real server."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mcp import Client

from memory_pipeline.errors import InvalidInputError
from serving.harness import StoreLayout, error_text, snapshot, stdio_params, structured
from serving.paths import PathNotAllowedError, parse_roots, resolve_all, resolve_allowed


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """root/ (allowed) with notes, a link in, links out; outside/ beside it."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (root / "note.md").write_text("# Note\n\ninside\n")
    (root / "sub" / "deep.md").write_text("# Deep\n\ninside too\n")
    (outside / "secret.md").write_text("# Secret\n\noutside\n")
    (root / "link-in.md").symlink_to(root / "sub" / "deep.md")
    (root / "link-out.md").symlink_to(outside / "secret.md")
    (root / "dir-out").symlink_to(outside, target_is_directory=True)
    return tmp_path


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("note.md", "root/note.md"),
        ("sub/deep.md", "root/sub/deep.md"),
        ("./sub/../note.md", "root/note.md"),
        ("link-in.md", "root/sub/deep.md"),  # a link inside the root is followed
        ("{root}/note.md", "root/note.md"),
        ("not-yet.md", "root/not-yet.md"),  # existence is the loader's business
    ],
)
def test_allowed_paths_resolve_to_their_real_location(tree: Path, raw: str, expected: str) -> None:
    root = tree / "root"
    got = resolve_allowed(raw.format(root=root), [root.resolve()], root)
    assert got == (tree / expected).resolve()


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("../outside/secret.md", "outside the allowed roots"),
        ("sub/../../outside/secret.md", "outside the allowed roots"),
        ("{outside}/secret.md", "outside the allowed roots"),
        ("/etc/passwd", "outside the allowed roots"),
        ("link-out.md", "through a symlink"),
        ("dir-out/secret.md", "through a symlink"),
        ("..", "outside the allowed roots"),
    ],
)
def test_escapes_are_refused(tree: Path, raw: str, why: str) -> None:
    root = tree / "root"
    with pytest.raises(PathNotAllowedError, match=why) as info:
        resolve_allowed(raw.format(outside=tree / "outside"), [root.resolve()], root)
    assert "HYBRID_RAG_ALLOWED_ROOTS" in str(info.value)


def test_one_refusal_refuses_the_whole_batch(tree: Path) -> None:
    root = tree / "root"
    with pytest.raises(PathNotAllowedError, match="secret"):
        resolve_all(["note.md", "link-out.md"], [root], root)


@pytest.mark.parametrize("raw", ["", "   ", "a\x00b.md"])
def test_malformed_paths_are_refused(tree: Path, raw: str) -> None:
    with pytest.raises(InvalidInputError, match="file_paths"):
        resolve_allowed(raw, [tree / "root"], tree / "root")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, ["cwd"]),
        ("", ["cwd"]),
        ("root", ["root"]),
        (f"root{os.pathsep}outside", ["root", "outside"]),
        (f"root{os.pathsep}root{os.pathsep}", ["root"]),
        ("root/dir-out", ["outside"]),  # roots are compared by their real location
    ],
)
def test_parse_roots(tree: Path, raw: str | None, expected: list[str]) -> None:
    (tree / "cwd").mkdir()
    cwd = tree if raw else tree / "cwd"
    assert parse_roots(raw, cwd) == tuple((tree / e).resolve() for e in expected)


def test_a_root_that_is_not_a_folder_is_an_error(tree: Path) -> None:
    with pytest.raises(InvalidInputError, match="not a folder"):
        parse_roots("root/note.md", tree)


# ------------------------------------------------------------ through the server
@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_server_refuses_escapes_and_changes_nothing(tmp_path: Path) -> None:
    layout = StoreLayout(tmp_path / "store")
    env = layout.env()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\nnever ingested\n")
    (layout.docs / "ok.md").write_text("# Fine\n\nallowed content\n")
    (layout.docs / "link-out.md").symlink_to(outside / "secret.md")
    (layout.docs / "dir-out").symlink_to(outside, target_is_directory=True)
    escapes = [
        "../../outside/secret.md",
        str(outside / "secret.md"),
        "link-out.md",
        "dir-out/secret.md",
        "/etc/hostname",
    ]
    async with Client(stdio_params(env, layout.docs)) as client:
        for raw in escapes:
            before = snapshot(layout)
            result = await client.call_tool("ingest", {"file_paths": ["ok.md", raw]})
            assert result.is_error, raw
            text = error_text(result)
            assert "outside the allowed roots" in text and "HYBRID_RAG_ALLOWED_ROOTS" in text
            assert snapshot(layout) == before, raw
        done = structured(await client.call_tool("ingest", {"file_paths": ["ok.md"]}))
        assert done["results"][0]["status"] == "ingested"
        found = structured(await client.call_tool("hybrid_search", {"query": "never ingested"}))
        assert all("never ingested" not in c["content"] for c in found["chunks"])


# ------------------------------------------------------------ hard links and loops
def test_a_hard_link_is_refused_unless_allowed(tree: Path) -> None:
    root = tree / "root"
    os.link(tree / "outside" / "secret.md", root / "hard.md")
    with pytest.raises(PathNotAllowedError, match="hard link") as info:
        resolve_allowed("hard.md", [root.resolve()], root)
    text = str(info.value)
    assert "outside the allowed roots" in text and "copy" in text.lower()
    assert "HYBRID_RAG_ALLOW_HARD_LINKS=1" in text
    allowed = resolve_allowed("hard.md", [root.resolve()], root, allow_hard_links=True)
    assert allowed == (root / "hard.md").resolve()
    # A file with one name is not affected, nor is a folder (folders always have several).
    assert resolve_allowed("note.md", [root.resolve()], root) == (root / "note.md").resolve()
    assert resolve_allowed("sub", [root.resolve()], root) == (root / "sub").resolve()


def test_a_symlink_loop_is_refused_with_a_reason(tree: Path) -> None:
    root = tree / "root"
    (root / "a").symlink_to(root / "b")
    (root / "b").symlink_to(root / "a")
    with pytest.raises(InvalidInputError, match="symlink loop") as info:
        resolve_allowed("a", [root.resolve()], root)
    assert "'a'" in str(info.value) and "remove" in str(info.value)


@pytest.mark.anyio
async def test_server_refuses_hard_links_and_loops(tmp_path: Path) -> None:
    layout = StoreLayout(tmp_path / "store")
    env = layout.env()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\nnever ingested\n")
    os.link(outside / "secret.md", layout.docs / "hard.md")
    (layout.docs / "a").symlink_to(layout.docs / "b")
    (layout.docs / "b").symlink_to(layout.docs / "a")
    async with Client(stdio_params(env, layout.docs)) as client:
        before = snapshot(layout)
        hard = await client.call_tool("ingest", {"file_paths": ["hard.md"]})
        assert hard.is_error and "hard link" in error_text(hard)
        loop = await client.call_tool("ingest", {"file_paths": ["a"]})
        assert loop.is_error and "symlink loop" in error_text(loop)
        assert snapshot(layout) == before
    async with Client(stdio_params({**env, "HYBRID_RAG_ALLOW_HARD_LINKS": "1"}, layout.docs)) as c:
        done = structured(await c.call_tool("ingest", {"file_paths": ["hard.md"]}))
        assert done["results"][0]["status"] == "ingested"
