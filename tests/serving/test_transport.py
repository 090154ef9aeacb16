"""How the server process starts, stops and locks its HTTP endpoint: real processes, real clients.

SIGTERM ends an HTTP server with exit code 0; a stdio client that disappears
mid-call leaves no traceback; with ``HYBRID_RAG_HTTP_TOKEN`` set, only requests
carrying the token are served; a non-loopback bind without a token never starts.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from serving.__main__ import http_refusal, parse_args
from serving.harness import REPO, StoreLayout, free_port, http_process, structured
from serving.http import BearerToken, is_loopback

pytestmark = pytest.mark.anyio
TOKEN = "s3cret-token-for-tests-0123456789"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def log_text(log: object) -> str:
    log.seek(0)  # type: ignore[attr-defined]
    return log.read().decode(errors="replace")  # type: ignore[attr-defined]


# ------------------------------------------------------------------------ stopping
async def test_sigterm_ends_the_http_server_with_exit_code_0(tmp_path: Path) -> None:
    layout = StoreLayout(tmp_path)
    with http_process(layout.env(), layout.docs, free_port()) as (url, proc, log):
        async with Client(url) as client:
            structured(await client.call_tool("get_system_stats", {}))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log_text(log)
        assert "Traceback" not in log_text(log)


def rpc(proc: subprocess.Popen[bytes], message: dict[str, object]) -> None:
    assert proc.stdin is not None
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


def test_a_stdio_client_that_drops_mid_call_leaves_no_traceback(tmp_path: Path) -> None:
    layout = StoreLayout(tmp_path)
    err = tmp_path / "stderr.txt"
    with err.open("wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "serving", "--model-load", "lazy"],
            env=layout.env(),
            cwd=layout.docs,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
        assert proc.stdin is not None and proc.stdout is not None
        init = {"protocolVersion": "2025-06-18", "capabilities": {}}
        client_info = {"clientInfo": {"name": "dropper", "version": "0"}}
        rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init | client_info})
        assert b'"id":1' in proc.stdout.readline()
        rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        call = {"name": "ingest_text", "arguments": {"text": "word " * 20_000, "title": "t"}}
        rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
        proc.stdout.close()  # the client is gone before the answer comes
        time.sleep(3)  # the call finishes and its answer meets the closed pipe
        proc.stdin.close()
        code = proc.wait(timeout=60)
    text = err.read_text()
    assert code == 0, text
    assert "Traceback" not in text and "ExceptionGroup" not in text, text


# ------------------------------------------------------------------------ the token
async def test_with_a_token_only_requests_carrying_it_are_served(tmp_path: Path) -> None:
    layout = StoreLayout(tmp_path)
    env = layout.env(HYBRID_RAG_HTTP_TOKEN=TOKEN)
    hello = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"Accept": "application/json, text/event-stream"}
    with http_process(env, layout.docs, free_port()) as (url, _proc, _log):
        async with httpx2.AsyncClient() as raw:
            for auth in (None, "Bearer wrong-token", f"Basic {TOKEN}", TOKEN):
                sent = headers | ({"Authorization": auth} if auth else {})
                refused = await raw.post(url, json=hello, headers=sent)
                assert refused.status_code == 401, auth
                assert refused.headers["www-authenticate"].startswith("Bearer")
                assert "HYBRID_RAG_HTTP_TOKEN" in refused.json()["error_description"]
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        http = create_mcp_http_client(headers=bearer)
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert "hybrid_search" in names
            structured(await client.call_tool("get_system_stats", {}))
        with pytest.raises(Exception):  # noqa: B017 - the SDK wraps the 401 in its own error
            async with Client(url) as client:
                await client.list_tools()


def test_a_non_loopback_bind_without_a_token_does_not_start(tmp_path: Path) -> None:
    env = StoreLayout(tmp_path).env()
    port = free_port()
    done = subprocess.run(
        [sys.executable, "-m", "serving", "--http", "--host", "0.0.0.0", "--port", str(port)],
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "refusing to serve HTTP on 0.0.0.0 without a token" in done.stderr
    assert "HYBRID_RAG_HTTP_TOKEN" in done.stderr and "127.0.0.1" in done.stderr
    assert not (tmp_path / "memory.db").exists(), "refused before opening the store"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.5", False),
        ("myhost.example", False),
    ],
)
def test_which_binds_are_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
    args = parse_args(["--http", "--host", host])
    assert (http_refusal(args, None) is None) is loopback
    assert http_refusal(args, TOKEN) is None


@pytest.mark.parametrize(
    ("header", "allowed"),
    [
        (f"Bearer {TOKEN}".encode(), True),
        (f"bearer {TOKEN}".encode(), True),
        (f"Bearer {TOKEN}x".encode(), False),
        (f"Bearer {TOKEN[:-1]}".encode(), False),
        (b"Bearer ", False),
        (TOKEN.encode(), False),
        (b"", False),
    ],
)
def test_bearer_token_check(header: bytes, allowed: bool) -> None:
    guard = BearerToken(app=None, token=TOKEN)  # type: ignore[arg-type]
    headers = [(b"authorization", header)] if header else []
    assert guard.allows(headers) is allowed


def test_once_the_server_claims_stdout_only_the_protocol_reaches_it() -> None:
    """What a library prints while the models load, from Python or native code on any
    thread, goes to stderr: the stdio server claims the protocol stream before loading."""
    script = (
        "import os, threading\n"
        "from serving.__main__ import claim_stdout\n"
        "wire = claim_stdout()\n"
        "print('from python')\n"
        "loader = threading.Thread(target=os.write, args=(1, b'from native code\\n'))\n"
        "loader.start(); loader.join()\n"
        'wire.write(b\'{"jsonrpc": "2.0"}\\n\'); wire.flush()\n'
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == '{"jsonrpc": "2.0"}\n'
    assert "from python" in done.stderr and "from native code" in done.stderr


async def test_the_rest_of_the_load_starts_once_the_first_answer_is_out() -> None:
    from serving.__main__ import _FirstAnswer

    written: list[str] = []
    started: list[int] = []

    class Stream:
        async def write(self, text: str) -> int:
            written.append(text)
            return len(text)

        async def flush(self) -> None:
            written.append("<flush>")

    out = _FirstAnswer(Stream(), lambda: started.append(len(written)))
    await out.write('{"id": 1}\n')
    assert started == []  # written, not yet sent
    await out.flush()
    await out.write('{"id": 2}\n')
    await out.flush()
    assert started == [2]  # once, right after the first answer went out
