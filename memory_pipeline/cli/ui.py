"""``memory-pipeline ui``: serve the viewer (``memory_pipeline/ui``) over the bound memory."""

from __future__ import annotations

import argparse
import secrets
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memory_pipeline.cli.flags import positive_int
from memory_pipeline.errors import InvalidInputError

DEFAULT_PORT = 8765
DEFAULT_HOST = "127.0.0.1"

MakeSystem = Callable[[argparse.Namespace], Any]


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
    make_system: MakeSystem,
) -> None:
    """Add ``ui``."""

    def cmd_ui(args: argparse.Namespace) -> int:
        from memory_pipeline.listening import is_loopback
        from memory_pipeline.ui.runs import home_from

        if args.port > 65535:
            raise InvalidInputError(f"--port must be at most 65535, got {args.port}")
        if not is_loopback(args.host) and not args.allow_remote:
            raise InvalidInputError(
                f"--host {args.host} would serve the memory beyond this machine; add "
                "--allow-remote to do that on purpose (the address's token still guards it)"
            )
        args.reads_only = args.read_only  # else writable if it can be (cli/commands.py)
        system = make_system(args)
        if system.store.read_only and not args.read_only:
            print(
                "memory-pipeline ui: the database opened read-only, so the pages change nothing",
                file=sys.stderr,
            )
        token = secrets.token_urlsafe(24)
        home = home_from(args.dagster_home)
        return serve(
            system,
            host=args.host,
            port=args.port,
            token=token,
            dagster_home=home,
            read_only=args.read_only,
        )

    p = sub.add_parser(
        "ui",
        parents=parents,
        help="a web page that shows what the memory holds and why a search ranks what it does",
        description="Serve a web page over the memory this command is bound to (its space "
        "and the spaces it reads): an overview, a timeline of documents and sessions, each "
        "document with its chunks, and search with, for every hit, the scores of each stage "
        "that ranked it; a chunk's importance, knowledge type and tags can be changed "
        "there, and a document deleted (each change recorded as the page's: "
        "memory-pipeline history). It prints the address to open, with a fresh token in it; "
        "other users of the machine cannot read the memory through the port without it. "
        "Ctrl-C stops it.",
    )
    p.add_argument(
        "--port", type=positive_int, default=DEFAULT_PORT, help=f"default: {DEFAULT_PORT}"
    )
    p.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"the address to listen on (default: {DEFAULT_HOST}, this machine only)",
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a --host other machines can reach (still behind the token)",
    )
    p.add_argument(
        "--read-only",
        action="store_true",
        help="pages without forms, every change refused; opens the database read-only "
        "(for showing the memory to someone)",
    )
    p.add_argument(
        "--dagster-home",
        metavar="DIR",
        help="the pipeline's Dagster home, whose last runs the overview lists "
        "(default: $DAGSTER_HOME; make ui passes make run's)",
    )
    p.set_defaults(func=cmd_ui)


def serve(
    system: Any,
    *,
    host: str,
    port: int,
    token: str,
    dagster_home: Path | None = None,
    read_only: bool = False,
) -> int:
    """Serve the viewer until Ctrl-C or SIGTERM; prints the address first."""
    import anyio
    import uvicorn

    from memory_pipeline.listening import Terminated, stop_on_sigterm
    from memory_pipeline.ui.app import address, build_app

    app = build_app(
        system, token=token, host=host, port=port, dagster_home=dagster_home, read_only=read_only
    )
    stop_on_sigterm()
    print(f"memory-pipeline ui: open {address(host, port, token)}", flush=True)
    print("(the token in the address is this run's; Ctrl-C stops the viewer)", file=sys.stderr)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning")
    try:
        anyio.run(uvicorn.Server(config).serve)
    except (KeyboardInterrupt, Terminated):
        pass
    finally:
        system.close()
    return 0
