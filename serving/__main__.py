"""``python -m serving`` (also ``memory-pipeline serve``): the MCP server's composition root.

Reads the environment and flags, builds the ``MemorySystem`` and the server,
and serves over stdio (the default) or streamable HTTP. Everything it logs
goes to stderr: on stdio, stdout carries the protocol.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from contextlib import suppress
from io import TextIOWrapper
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, NoReturn, cast

from memory_pipeline.config import TOOL_SETS, Settings
from memory_pipeline.errors import MemoryPipelineError
from serving.http import TOKEN_ENV_VAR, Terminated, is_loopback, serve_http, stop_on_sigterm
from serving.loading import (
    DEFAULT_POLICY,
    LOAD_ENV_VAR,
    LoadPolicy,
    start_background,
    start_preparing,
    warm_up,
)
from serving.paths import HARD_LINKS_ENV_VAR, ROOTS_ENV_VAR, parse_roots

if TYPE_CHECKING:  # the MCP SDK loads after the models start loading; see serve()
    from mcp.server.mcpserver import MCPServer

log = logging.getLogger("serving")


DESCRIPTION = "MCP server over the long-term memory (stdio unless --http)."
EPILOG = (
    "Storage: HYBRID_RAG_DB_PATH / HYBRID_RAG_INDEX_PATH / HYBRID_RAG_DATABASE_URL. "
    f"Files ingest may read: {ROOTS_ENV_VAR} ({os.pathsep}-separated; default: the "
    "working directory); files with several hard links only with "
    f"{HARD_LINKS_ENV_VAR}=1. HTTP clients must send 'Authorization: Bearer <token>' "
    f"when {TOKEN_ENV_VAR} is set."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The server's options, on ``python -m serving``'s parser and ``memory-pipeline serve``'s."""
    p.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help=f"HTTP bind address (default 127.0.0.1; any other needs {TOKEN_ENV_VAR})",
    )
    p.add_argument("--port", type=int, default=8000, help="HTTP port (default 8000)")
    p.add_argument("--model", help="embedding model (overrides HYBRID_RAG_EMBEDDING_MODEL)")
    p.add_argument(
        "--space",
        help="the memory space every tool writes to and searches (overrides HYBRID_RAG_SPACE; "
        "no tool argument can change it)",
    )
    p.add_argument(
        "--read-space",
        action="append",
        metavar="SPACE",
        help="another space the tools may read, e.g. shared (repeatable; overrides "
        "HYBRID_RAG_READ_SPACES)",
    )
    p.add_argument(
        "--model-load",
        choices=[p.value for p in LoadPolicy],
        default=os.environ.get(LOAD_ENV_VAR) or DEFAULT_POLICY.value,
        help=f"when to load models and index (default {DEFAULT_POLICY.value}; {LOAD_ENV_VAR})",
    )
    p.add_argument(
        "--tools",
        choices=TOOL_SETS,
        help="the tools to list: core (search, read, remember, forget; the default) or all "
        "(maintenance too: file ingest, tags, index, audits, forgetting); overrides "
        "HYBRID_RAG_TOOLS",
    )
    p.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"])


def check_arguments(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """What argparse leaves unchecked: a default taken from the environment."""
    if args.model_load not in {p.value for p in LoadPolicy}:  # argparse checks flags, not env
        p.error(f"{LOAD_ENV_VAR}={args.model_load!r}; use lazy, eager or background")


def parse_args(
    argv: Sequence[str] | None = None, *, prog: str = "python -m serving"
) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=prog, description=DESCRIPTION, epilog=EPILOG)
    add_arguments(p)
    args = p.parse_args(argv)
    check_arguments(p, args)
    return args


def claim_stdout() -> BinaryIO:
    """The protocol stream, taken off fd 1 for the rest of the process; fd 1 then writes to stderr.

    From here on, nothing printed, by Python or by native code on any thread, can reach
    the client: only what the transport writes to the returned stream does. That lets
    the models load on a thread while the server starts and answers the handshake.
    """
    sys.stdout.flush()
    wire = os.dup(1)  # not inherited by child processes
    os.dup2(2, 1)
    return os.fdopen(wire, "wb")


class _FirstAnswer:
    """The protocol stream as the SDK writes it; calls ``then`` once the first message is out."""

    def __init__(self, stream: Any, then: Callable[[], None] | None) -> None:
        self._stream = stream
        self._then = then

    async def write(self, text: str) -> int:
        return int(await self._stream.write(text))

    async def flush(self) -> None:
        await self._stream.flush()
        if self._then is not None:
            then, self._then = self._then, None
            then()


def serve_stdio(
    server: MCPServer, wire: BinaryIO, after_first_answer: Callable[[], None] | None = None
) -> None:
    """``server.run()`` over stdio, writing the protocol to ``wire`` (see :func:`claim_stdout`).

    ``after_first_answer`` runs once the server has answered its first message (the
    handshake, or a stateless client's first request): work started then cannot delay it.
    """
    import anyio
    from mcp.server.stdio import stdio_server

    async def run() -> None:
        out = _FirstAnswer(
            anyio.wrap_file(TextIOWrapper(wire, encoding="utf-8")), after_first_answer
        )
        async with stdio_server(stdout=cast("anyio.AsyncFile[str]", out)) as (read, write):
            # What MCPServer.run_stdio_async does, with the protocol's stream passed in.
            lowlevel = server._lowlevel_server
            await lowlevel.run(read, write, lowlevel.create_initialization_options())

    anyio.run(run)


def http_refusal(args: argparse.Namespace, token: str | None) -> str | None:
    """Why the server must not start as asked, or None."""
    if args.http and not is_loopback(args.host) and not token:
        return (
            f"refusing to serve HTTP on {args.host} without a token: anyone who can reach "
            "that address could read and change the memory. Set "
            f"{TOKEN_ENV_VAR}=<a long random secret> (clients then send 'Authorization: "
            "Bearer <secret>'), or bind to 127.0.0.1"
        )
    return None


def client_gone(exc: BaseException) -> bool:
    """Whether ``exc`` only says the stdio client closed its end (mid-call, say)."""
    if isinstance(exc, BaseExceptionGroup):
        return all(client_gone(e) for e in exc.exceptions)
    return isinstance(exc, BrokenPipeError | ConnectionResetError)


def end_now(code: int) -> NoReturn:
    """End the process at once, skipping the interpreter's finalisation.

    For a server whose background loader is still at work: finalising the interpreter
    under a thread that runs native code (ONNX Runtime, torch) makes the C++ runtime
    abort ("terminate called without an active exception", SIGABRT). Nothing is lost
    by not waiting: the loader only reads (its warm-up search records no access), and
    the model cache is built in a temporary folder renamed into place, so a build cut
    short is redone on the next start, as after a kill.
    """
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):  # a closed pipe or stream: nobody to tell
            stream.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    return serve(parse_args(argv))


def viewer_app(system: Any, *, host: str, port: int, token: str | None) -> Any:
    """The memory's pages at ``/ui`` (``memory-pipeline ui``'s), behind the server's token,
    or a fresh one when it has none; says on stderr where to open them. The overview lists
    the runs of the pipeline at ``$DAGSTER_HOME``, when set. Read-only: the server's
    writes are its tools' (``memory-pipeline ui`` is the page that changes the memory)."""
    import secrets

    from memory_pipeline.ui.app import address, build_app
    from memory_pipeline.ui.runs import home_from
    from serving.http import VIEWER_PATH

    if token:  # the server's own: named, never printed
        shown = address(host, port, f"<{TOKEN_ENV_VAR}>", VIEWER_PATH)
    else:
        token = secrets.token_urlsafe(24)
        shown = address(host, port, token, VIEWER_PATH)
    print(f"the memory's pages: {shown}", file=sys.stderr, flush=True)
    return build_app(
        system, token=token, host=host, port=port, dagster_home=home_from(None), read_only=True
    )


def serve(args: argparse.Namespace) -> int:
    """Serve until the client leaves (stdio) or a signal stops it (HTTP); the exit code.

    ``args`` as :func:`add_arguments` defines them, checked by :func:`check_arguments`.
    """
    try:
        flags = {
            "model": ("--model", args.model or None),
            "space": ("--space", args.space or None),
            "read_spaces": ("--read-space", tuple(args.read_space) if args.read_space else None),
            "tools": ("--tools", args.tools),
        }
        settings, notice = Settings.from_env().with_flags(flags).settled()
    except MemoryPipelineError as exc:
        print(f"cannot start the memory server: {exc}", file=sys.stderr)
        return 2
    if notice:
        print(notice, file=sys.stderr)
    token = (settings.serving.http_token or "").strip() or None
    refusal = http_refusal(args, token)
    if refusal:
        print(refusal, file=sys.stderr)
        return 2
    # Before anything loads: a library printing while it loads must not corrupt the protocol.
    wire = None if args.http else claim_stdout()
    if args.http:
        stop_on_sigterm()
    # Configured before MCPServer's own basicConfig, which then leaves it alone.
    logging.basicConfig(
        stream=sys.stderr,
        level=args.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # Idle OpenMP workers (torch, faiss) sleep instead of spinning. Spinning workers left
    # by the warm-up thread made each later query 5-20x slower on a busy 2-CPU machine.
    # Read once, when the libraries load: hence before the import below.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from memory_pipeline.system import MemorySystem, Opening

    try:
        cwd = Path.cwd()
        roots = parse_roots(settings.serving.allowed_roots, cwd)
        policy = LoadPolicy(args.model_load)
        # A read-only database still answers searches: serve them, refuse writes.
        system = MemorySystem(settings, opening=Opening.PREFER_WRITABLE)
        if policy is LoadPolicy.EAGER:
            warm_up(system)
    except MemoryPipelineError as exc:
        print(f"cannot start the memory server: {exc}", file=sys.stderr)
        return 2
    # What loads without the GIL (the ONNX session) starts now, beside the imports below.
    loaders = [start_preparing(system)] if policy is LoadPolicy.BACKGROUND else []
    if system.store.read_only:
        log.warning(
            "the database %s cannot be written: serving reads only (searches are not "
            "counted as accesses; every write tool answers with an error saying why)",
            settings.url,
        )
    log.info(
        "store %s, index %s, ingest roots %s, %s",
        settings.url,
        settings.index_path,
        roots,
        system.spaces.describe(),
    )
    from serving.server import build_server

    # The rest loads once serving: on stdio, after the first answer (the query tokenizer
    # and the index hold the GIL while they load, which would otherwise delay the handshake).
    load_rest = (
        (lambda: loaders.append(start_background(system)))
        if policy is LoadPolicy.BACKGROUND
        else None
    )
    server = build_server(
        system,
        roots=roots,
        cwd=cwd,
        log_level=args.log_level,
        on_start=load_rest if wire is None else None,
        allow_hard_links=settings.serving.allow_hard_links,
        tool_set=settings.serving.tools,
    )
    try:
        if wire is None:
            serve_http(
                server,
                host=args.host,
                port=args.port,
                token=token,
                log_level=args.log_level,
                viewer=viewer_app(system, host=args.host, port=args.port, token=token),
            )
        else:
            serve_stdio(server, wire, after_first_answer=load_rest)
    except (KeyboardInterrupt, Terminated):
        pass
    except BaseException as exc:
        if not client_gone(exc):
            if any(t.is_alive() for t in loaders):
                log.exception("the server failed")
                end_now(1)
            system.close()
            raise
        # The client went away mid-call: nobody is left to answer.
        log.info("the client closed the connection; stopping")
    finally:
        if wire is not None:
            with suppress(OSError):  # what is still buffered for a client that left
                wire.close()
    if any(t.is_alive() for t in loaders):
        # The client left while the models still load: the loader uses the system, so
        # it stays open, and the process ends without finalising (see end_now).
        log.info("stopping while the models still load")
        end_now(0)
    system.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
