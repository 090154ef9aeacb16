"""``python -m serving.bench``: what a client waits for, measured over stdio.

For each model-load policy (lazy, eager, background) a fresh server is spawned
against a store of the bundled sample corpus, and the script records the
spawn + handshake time, the first search right after the handshake, and the
total until that first result. Then steady-state call latencies. The numbers
behind the default policy are in docs/mcp.md.

``--server CMD`` (repeatable) instead times spawn → first result for each
command, with the default policy, in alternating rounds on one store: e.g. the
installed ``memory-pipeline serve`` beside the checkout's ``python -m serving``.
The commands run without the checkout on ``PYTHONPATH`` (an installed tool runs its
own code); give it explicitly where wanted: ``--server 'env PYTHONPATH=. python -m serving'``.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import statistics
import tempfile
import time
from importlib import resources
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from serving.harness import StoreLayout, stdio_params, structured
from serving.loading import DEFAULT_POLICY, LoadPolicy


async def _prepare(layout: StoreLayout, model: str) -> None:
    corpus = resources.files("memory_pipeline") / "sample_corpus"
    layout.docs.mkdir(parents=True, exist_ok=True)
    for item in corpus.iterdir():
        if item.name.endswith(".md") and item.name != "README.md":
            (layout.docs / item.name).write_text(item.read_text())
    names = sorted(p.name for p in layout.docs.glob("*.md"))
    env = layout.env(model=model, HYBRID_RAG_MAX_CHUNK_SIZE="256")
    async with Client(stdio_params(env, layout.docs, "--model-load", "lazy")) as client:
        structured(await client.call_tool("ingest", {"file_paths": names}))


async def _first_search(
    layout: StoreLayout, model: str, policy: LoadPolicy, idle: float, command: str = ""
) -> dict[str, float]:
    """Spawn, handshake, wait ``idle`` seconds (a person typing), then the first search.

    ``command``: the server to spawn (default ``python -m serving``).
    """
    env = layout.env(model=model, HYBRID_RAG_MAX_CHUNK_SIZE="256")
    params = stdio_params(env, layout.docs, "--model-load", policy.value)
    if command:
        # Without the checkout on PYTHONPATH, so an installed tool runs its own code.
        env.pop("PYTHONPATH")
        program, *args = shlex.split(command)
        params = StdioServerParameters(
            command=program, args=[*args, *params.args[2:]], env=env, cwd=params.cwd
        )
    started = time.perf_counter()
    async with Client(params) as client:
        ready = time.perf_counter()
        await anyio.sleep(idle)
        asked = time.perf_counter()
        structured(await client.call_tool("hybrid_search", {"query": "why does news decay?"}))
        done = time.perf_counter()
    return {"handshake": ready - started, "first_search": done - asked, "total": done - started}


async def _latencies(layout: StoreLayout, model: str, n: int) -> dict[str, float]:
    env = layout.env(model=model, HYBRID_RAG_MAX_CHUNK_SIZE="256")
    calls = {
        "hybrid_search": {"query": "reciprocal rank fusion"},
        "find_by_tag": {"tag": "none"},
        "get_system_stats": {},
    }
    out: dict[str, float] = {}
    async with Client(stdio_params(env, layout.docs, "--model-load", "eager")) as client:
        for tool, args in calls.items():
            times = []
            for _ in range(n):
                t = time.perf_counter()
                structured(await client.call_tool(tool, args))
                times.append(time.perf_counter() - t)
            out[tool] = statistics.median(times) * 1000
    return out


async def _side_by_side(layout: StoreLayout, model: str, commands: list[str], repeats: int) -> None:
    """Spawn → first result for each command, one spawn of each per round."""
    runs: dict[str, list[dict[str, float]]] = {c: [] for c in commands}
    for _ in range(repeats):
        for command in commands:
            runs[command].append(await _first_search(layout, model, DEFAULT_POLICY, 0, command))
    print(f"model {model}; policy {DEFAULT_POLICY.value}; {repeats} alternating rounds; seconds")
    print(f"{'server':<40}{'handshake':>11}{'1st search':>12}{'total':>9}{'min':>7}{'max':>7}")
    for command, rows in runs.items():
        totals = [r["total"] for r in rows]
        cells = "".join(
            f"{statistics.median(r[k] for r in rows):>{w}.2f}"
            for k, w in (("handshake", 11), ("first_search", 12), ("total", 9))
        )
        print(f"{command:<40}{cells}{min(totals):>7.2f}{max(totals):>7.2f}")


async def main(
    model: str, repeats: int, calls: int, idle: float, servers: list[str] | None = None
) -> None:
    root = Path(tempfile.mkdtemp(prefix="serving-bench-"))
    try:
        layout = StoreLayout(root)
        await _prepare(layout, model)
        if servers:
            await _side_by_side(layout, model, servers, repeats)
            return
        print(f"model {model}; median of {repeats} spawns per row; seconds")
        print(f"{'policy':<11}{'idle':>6}{'handshake':>11}{'1st search':>12}{'total':>9}")
        for policy in LoadPolicy:
            for wait in sorted({0.0, idle}):
                runs = [await _first_search(layout, model, policy, wait) for _ in range(repeats)]
                cells = "".join(
                    f"{statistics.median(r[k] for r in runs):>{w}.2f}"
                    for k, w in (("handshake", 11), ("first_search", 12), ("total", 9))
                )
                print(f"{policy.value:<11}{wait:>6.0f}{cells}")
        lat = await _latencies(layout, model, calls)
        print("median call latency, ms: " + ", ".join(f"{k} {v:.1f}" for k, v in lat.items()))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(prog="python -m serving.bench")
    p.add_argument("--model", default="multilingual-e5-small", help="or 'hashing'")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--calls", type=int, default=50)
    p.add_argument(
        "--idle", type=float, default=30.0, help="also time a first search this long after start"
    )
    p.add_argument(
        "--server",
        action="append",
        metavar="CMD",
        help="time spawn → first result of this server command instead, beside the other "
        "--server commands, e.g. --server 'memory-pipeline serve' --server "
        "'python -m serving' (repeatable)",
    )
    a = p.parse_args()
    anyio.run(main, a.model, a.repeats, a.calls, a.idle, a.server)
