"""``python -m serving``: the composition root of the MCP server.

Reads the environment and flags, builds the ``MemorySystem`` and the server,
and serves over stdio (the default) or streamable HTTP. Everything it logs
goes to stderr: on stdio, stdout carries the protocol.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, redirect_stdout
from pathlib import Path

from memory_pipeline.config import Settings
from memory_pipeline.embedding.base import Embedder, HashingEmbedder
from memory_pipeline.errors import MemoryError_
from serving.loading import DEFAULT_POLICY, LOAD_ENV_VAR, LoadPolicy, start_background, warm_up
from serving.paths import HARD_LINKS_ENV_VAR, ROOTS_ENV_VAR, parse_roots

log = logging.getLogger("serving")

# Embedders chosen by name here; any other name goes to the library's default
# (sentence-transformers). "hashing" is fast and deterministic, for tests.
EMBEDDERS: dict[str, Callable[[], Embedder]] = {"hashing": HashingEmbedder}
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m serving",
        description="MCP server over the long-term memory (stdio unless --http).",
        epilog=f"Storage: HYBRID_RAG_DB_PATH / HYBRID_RAG_INDEX_PATH / HYBRID_RAG_DATABASE_URL. "
        f"Files ingest may read: {ROOTS_ENV_VAR} ({os.pathsep}-separated; default: the "
        "working directory); files with several hard links only with "
        f"{HARD_LINKS_ENV_VAR}=1.",
    )
    p.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    p.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="HTTP port (default 8000)")
    p.add_argument("--model", help="embedding model (overrides HYBRID_RAG_EMBEDDING_MODEL)")
    p.add_argument(
        "--model-load",
        choices=[p.value for p in LoadPolicy],
        default=os.environ.get(LOAD_ENV_VAR) or DEFAULT_POLICY.value,
        help=f"when to load models and index (default {DEFAULT_POLICY.value}; {LOAD_ENV_VAR})",
    )
    p.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    args = p.parse_args(argv)
    if args.model_load not in {p.value for p in LoadPolicy}:  # argparse checks flags, not env
        p.error(f"{LOAD_ENV_VAR}={args.model_load!r}; use lazy, eager or background")
    return args


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Anything printed meanwhile, from Python or native code, goes to stderr.

    Before the stdio transport starts, fd 1 is still the protocol stream: a library
    printing while it loads would corrupt it.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
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
    from memory_pipeline.system import MemorySystem
    from serving.server import build_server

    try:
        settings = Settings.from_env().with_overrides(model=args.model)
        cwd = Path.cwd()
        roots = parse_roots(os.environ.get(ROOTS_ENV_VAR), cwd)
        factory = EMBEDDERS.get(settings.model)
        policy = LoadPolicy(args.model_load)
        with stdout_to_stderr():
            system = MemorySystem(settings, embedder=factory() if factory else None)
            if policy is LoadPolicy.EAGER:
                warm_up(system)
    except MemoryError_ as exc:
        print(f"cannot start the memory server: {exc}", file=sys.stderr)
        return 2
    log.info("store %s, index %s, ingest roots %s", settings.url, settings.index_path, roots)
    # Started once serving: by then the transport has diverted stdout away from the protocol.
    on_start = (lambda: start_background(system)) if policy is LoadPolicy.BACKGROUND else None
    server = build_server(
        system,
        roots=roots,
        cwd=cwd,
        log_level=args.log_level,
        on_start=on_start,
        allow_hard_links=os.environ.get(HARD_LINKS_ENV_VAR, "").strip() == "1",
    )
    if args.http and args.host not in LOOPBACK:
        log.warning(
            "serving on %s without authentication: anyone who reaches it can read and "
            "change the memory",
            args.host,
        )
    try:
        if args.http:
            server.run("streamable-http", host=args.host, port=args.port)
        else:
            server.run()
    except KeyboardInterrupt:
        pass
    finally:
        system.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
