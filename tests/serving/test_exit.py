"""A stdio client that leaves ends the server quietly, with exit code 0, whatever the load policy.

The real default model (ONNX Runtime) runs in the server: with the ``background``
policy its loader is still inside native code when the client closes stdin right
after its first call, which once ended the process with SIGABRT ("terminate called
without an active exception").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import mcp.client.stdio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import stdio_client

from memory_pipeline.config import default_cache_dir
from memory_pipeline.embedding.onnx import OnnxEmbedder
from serving.harness import StoreLayout, recorded_stdio_params, structured
from serving.loading import LoadPolicy

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
MODEL = "multilingual-e5-small"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def model_built() -> None:
    """The default model unpacked and exported once, into the cache the server uses.

    Otherwise the first server would spend its life unpacking (Python code) rather
    than loading the model into ONNX Runtime."""
    cache = Path(os.environ.get("HYBRID_RAG_MODEL_CACHE") or default_cache_dir())
    OnnxEmbedder(cache_dir=cache, progress=False).folder()


@pytest.mark.parametrize("policy", list(LoadPolicy))
async def test_a_client_that_leaves_ends_the_server_with_exit_code_0(
    policy: LoadPolicy,
    tmp_path: Path,
    model_built: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The client's grace period between closing stdin and killing the server: room for a
    # busy machine, so that only the server's own way of ending decides the exit code.
    monkeypatch.setattr(mcp.client.stdio, "PROCESS_TERMINATION_TIMEOUT", 60.0)
    layout = StoreLayout(tmp_path)
    env = layout.env(model=MODEL, HYBRID_RAG_MODEL_LOAD=policy.value)
    exit_code = tmp_path / "exit_code"
    params = recorded_stdio_params(env, layout.docs, exit_code)
    with (tmp_path / "stderr.txt").open("w+") as err:
        async with (
            stdio_client(params, errlog=err) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            structured(await session.call_tool("get_system_stats", {}))
        err.seek(0)
        stderr = err.read()
    assert exit_code.read_text() == "0", stderr
    assert "terminate called" not in stderr
    assert "Traceback" not in stderr


def _line(message: dict[str, object]) -> bytes:
    return (json.dumps(message) + "\n").encode()


@pytest.mark.parametrize("policy", list(LoadPolicy))
def test_a_client_that_leaves_during_a_search_ends_the_server_with_exit_code_0(
    policy: LoadPolicy, tmp_path: Path, model_built: None
) -> None:
    """The first search loads the model (``lazy``) or waits for it: the client sends it
    and closes stdin before the answer, while the model is loading or searching."""
    layout = StoreLayout(tmp_path)
    env = layout.env(model=MODEL, HYBRID_RAG_MODEL_LOAD=policy.value)
    server = subprocess.Popen(
        [sys.executable, "-m", "serving"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=layout.docs,
    )
    assert server.stdin is not None and server.stdout is not None
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}}
    server.stdin.write(_line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}))
    server.stdin.flush()
    assert b'"id":1' in server.stdout.readline()
    search = {"name": "hybrid_search", "arguments": {"query": "where are the notes"}}
    server.stdin.write(_line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    server.stdin.write(_line({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": search}))
    server.stdin.close()
    server.stdin = None  # closed: communicate() must not flush it
    _, stderr = server.communicate(timeout=300)
    text = stderr.decode(errors="replace")
    assert server.returncode == 0, text
    assert "terminate called" not in text
    assert "Traceback" not in text
