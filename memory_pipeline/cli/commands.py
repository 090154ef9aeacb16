"""``memory-pipeline`` commands: the composition root for terminal use.

``cli/main.py`` is the entry point; it hands every command but ``capture`` to ``main``
here, which builds the parser of every module's ``register()``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shlex
import shutil
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from memory_pipeline.cli import alerts as alerts_cli
from memory_pipeline.cli import capture as capture_cli
from memory_pipeline.cli import evaluation as eval_cli
from memory_pipeline.cli import forgetting as forgetting_cli
from memory_pipeline.cli import history as history_cli
from memory_pipeline.cli import imports as import_cli
from memory_pipeline.cli import recall as recall_cli
from memory_pipeline.cli import reports as report_cli
from memory_pipeline.cli import scrub as scrub_cli
from memory_pipeline.cli import setup as setup_cli
from memory_pipeline.cli import sources as sources_cli
from memory_pipeline.cli import spaces as spaces_cli
from memory_pipeline.cli import ui as ui_cli
from memory_pipeline.cli.flags import given_storage, iso_day, setting, shown, storage_flags
from memory_pipeline.cli.output import VisibleControls, visible
from memory_pipeline.config import Settings
from memory_pipeline.errors import MemoryPipelineError
from memory_pipeline.locations import OLD_DB, OLD_INDEX, Layout, data_dir
from memory_pipeline.metadata import KnowledgeType
from memory_pipeline.search.params import DEFAULT_TOP_K, MAX_REWRITES, day_start
from memory_pipeline.spaces import Spaces
from memory_pipeline.store.failures import file_error
from memory_pipeline.types import IndexUpdateResult, SearchFilters

#: The exit code when stdout's reader left before all was written (``| head``): 128 + SIGPIPE,
#: what a shell reports for a command that SIGPIPE ended.
READER_GONE = 141
# Why a command stopped by a file it could not write lost nothing.
FILES_UNCHANGED = (
    "the database keeps whole transactions only, and the forgetting archive is written "
    "before any chunk leaves the memory"
)

#: The question the demo's closing hint asks (one the sample corpus answers).
DEMO_TRY = "what does reciprocal rank fusion do?"
SAMPLE_QUERIES = (
    "Why should old news fade from memory while principles stay?",
    "チャンクサイズの実験で何が分かった？",
)


def _settings(args: argparse.Namespace) -> Settings:
    # Only what the caller set on the command line; the rest is the environment's.
    settings, notice = Settings.from_env().with_flags(given_storage(args)).settled()
    if notice:
        print(notice, file=sys.stderr)
    return settings


def _opening(args: argparse.Namespace) -> str:
    """How the command opens the database (``store.opening.Opening``): reports and searches
    that record nothing never write it, so they work on a read-only file; a search
    that counts its hits as accessed, and the viewer, open read-only when they must (and
    say so)."""
    if getattr(args, "reads_only", False) or getattr(args, "no_access", False):
        return "read_only"
    return "prefer_writable" if args.command in ("search", "ui") else "writable"


def _system(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from memory_pipeline.system import MemorySystem, Opening

    settings = _settings(args)
    progress = not getattr(args, "no_progress", False)
    system = MemorySystem(settings, opening=Opening(_opening(args)), progress=progress)
    return system.bound(Spaces.everything()) if getattr(args, "all_spaces", False) else system


def cmd_ingest(args: argparse.Namespace) -> int:
    metadata: dict[str, object] = {}
    if args.knowledge_type:
        metadata["knowledge_type"] = args.knowledge_type
    if args.importance is not None:
        metadata["importance"] = args.importance
    if args.tag:
        metadata["tags"] = args.tag
    if args.source_date:
        metadata["source_date"] = args.source_date
    paths: list[Path] = []
    for raw in args.paths:
        p = Path(raw)
        if p.is_dir() and args.recursive:
            paths.extend(sorted(f for f in p.rglob("*") if f.suffix.lower() in _suffixes()))
        else:
            paths.append(p)
    system = _system(args)
    results = system.ingest(paths, metadata or None, update_index=not args.no_index, progress=True)
    for r in results:
        line = f"{r.status:9} {r.doc_id}  {r.chunks:4} chunks  {r.source}"
        if r.reused_vectors:
            line += f"  ({r.reused_vectors} vectors reused)"
        print(line if not r.message else f"{line}\n          {r.message}")
        for warning in r.warnings:
            print(f"warning: {warning}", file=sys.stderr)
    if args.no_index and system.index_due():
        from memory_pipeline.index.watcher import advice

        print(
            "the index has not taken in these changes yet (they are searchable already); "
            + advice(system.settings.index_path),
            file=sys.stderr,
        )
    return 0


def _suffixes() -> set[str]:
    from memory_pipeline.ingest.loaders import SUPPORTED_SUFFIXES

    return set(SUPPORTED_SUFFIXES)


def cmd_search(args: argparse.Namespace) -> int:
    system = _system(args)
    if system.store.read_only and not args.no_access:
        print(
            f"note: the database {system.settings.url.split('///')[-1]} cannot be written "
            "here, so this search is not counted as an access",
            file=sys.stderr,
        )
    filters = SearchFilters(
        tags=tuple(args.tag or ()),
        knowledge_types=tuple(args.knowledge_type or ()),
        doc_ids=tuple(args.doc_id or ()),
    )
    settings = system.settings
    request = settings.search_request(
        top_k=args.top_k,
        enable_mmr=args.mmr,
        record_access=not args.no_access,
        enable_memory_rerank=args.memory,
        now=None if args.now is None else day_start(args.now),
        memory=settings.memory_params(
            time_weight=args.time_weight,
            freq_weight=args.freq_weight,
            importance_threshold=args.importance_threshold,
        ),
    )
    result = system.query(args.query, request, filters=filters, rewrites=tuple(args.rewrite or ()))
    if args.json:
        payload = {"query": result.query, "hits": [h.to_dict() for h in result.hits]}
        if args.stats:
            payload["stats"] = result.stats.__dict__
        print(json.dumps(payload, ensure_ascii=False, indent=2))
        return 0
    if result.stats.unindexed_searched:
        from memory_pipeline.index.watcher import lag_note

        note = lag_note(result.stats.unindexed_searched, system.settings.index_path)
        print(f"note: {note}", file=sys.stderr)
    if not result.hits:
        print("no results")
    for rank, hit in enumerate(result.hits, 1):
        kind = hit.knowledge_type or "-"
        print(f"{rank:2}. [{hit.score:.4f}] {hit.doc_id}#{hit.chunk_index} ({kind})")
        print("    " + " ".join(hit.content.split())[:240])
    if args.stats:
        print(json.dumps(result.stats.__dict__, indent=2))
    return 0


def cmd_backfill(args: argparse.Namespace) -> int:
    plan = _system(args).backfill_source_date(apply=args.apply)
    for doc_id, source, day, rule in plan:
        print(f"{doc_id}  {day}  ({rule})  {source}")
    verb = "updated" if args.apply else "would update (dry run; pass --apply to write)"
    print(f"{len(plan)} documents {verb}")
    return 0


def cmd_update(args: argparse.Namespace) -> int:
    system = _system(args)
    _print_index_result(system.update_index(), system.backend.name)
    return 0


def cmd_rebuild(args: argparse.Namespace) -> int:
    system = _system(args)
    _print_index_result(system.rebuild_index(), system.backend.name, rebuilt=True)
    return 0


def _print_index_result(r: IndexUpdateResult, backend: str, *, rebuilt: bool = False) -> None:
    """The line update-index and rebuild-index print; a rebuild's names no adds or removes."""
    change = "(rebuild):" if rebuilt else f"({r.kind}): +{r.added} -{r.removed},"
    print(
        f"index version {r.version} {change} {r.n_dense} vectors, {r.n_sparse} BM25 docs, "
        f"{r.seconds:.2f}s ({backend})"
    )


def cmd_demo(args: argparse.Namespace) -> int:
    """Ingest the bundled sample corpus and answer a sample query."""
    corpus = resources.files("memory_pipeline") / "sample_corpus"
    files = sorted(Path(str(corpus)).glob("*.md"))
    files = [f for f in files if f.name.lower() != "readme.md"]
    system = _system(args)
    print(f"ingesting {len(files)} sample documents with model {system.settings.embedding.model} …")
    for r in system.ingest(files, progress=True):
        print(f"  {r.status:9} {r.chunks:3} chunks  {Path(r.source).name}")
    for query in [args.query] if args.query else SAMPLE_QUERIES:
        print(f"\nquery: {query}")
        request = system.settings.search_request(top_k=3, record_access=False)
        for rank, hit in enumerate(system.query(query, request).hits, 1):
            print(f"{rank}. ({hit.knowledge_type}) {' '.join(hit.content.split())[:160]}")
    settings = system.settings
    print(
        f"\nstored in {settings.url.split('///')[-1]}, index in {settings.index_path}; "
        f"try: {_search_hint(settings, DEMO_TRY)}"
    )
    return 0


def _search_hint(settings: Settings, query: str) -> str:
    """A search command that works as printed in this shell: the program as it was
    started (``memory-pipeline`` when that is the one on PATH), with the memory's paths
    when they are not the default ones (``make demo`` sets them for its own run only)."""
    words = [*_program(), "search"]
    default = Layout.default()
    if settings.database_url is None and settings.db_path != default.db:
        words += ["--db", str(settings.db_path), "--index", str(settings.index_path)]
    return shlex.join([*words, query])


def _program() -> list[str]:
    """How to start this command line again from the same folder."""
    started = sys.argv[0]
    if Path(started).name == "memory-pipeline":
        on_path = shutil.which("memory-pipeline")
        if on_path and Path(on_path).resolve() == Path(started).resolve():
            return ["memory-pipeline"]
        return [started]
    return [sys.executable, "-m", "memory_pipeline.cli"]


def cmd_serve(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Run the MCP server, as ``python -m serving`` with the same arguments would."""
    # Deferred: the library never imports the server at module level; the command line
    # only hands over to its entry point (docs/architecture.md).
    from serving.__main__ import check_arguments, serve

    check_arguments(parser, args)
    return serve(args)


def _add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``serve``: the server's own arguments, defined once in ``serving.__main__``."""
    from serving.__main__ import DESCRIPTION, EPILOG, add_arguments

    p = sub.add_parser(
        "serve",
        help="run the MCP server (stdio unless --http), as python -m serving does",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    add_arguments(p)
    p.set_defaults(func=None)  # not an ordinary command: _run hands the process over


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memory-pipeline",
        description="Long-term memory for AI agents: ingest documents, search them hybrid "
        "(dense + BM25), keep the index fresh.",
        epilog="Storage comes from HYBRID_RAG_DB_PATH / HYBRID_RAG_INDEX_PATH / "
        "HYBRID_RAG_DATABASE_URL unless given as flags, else from the user's data folder "
        f"({shown(data_dir())}); a memory the old defaults left in the current folder "
        f"({OLD_DB}, {OLD_INDEX}/) is still used, with a notice.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    common = storage_flags(
        space_also={"setup": setup_cli.SPACE_DEFAULT, "capture": capture_cli.SPACE_DEFAULT},
        read_spaces_also={"setup": setup_cli.READ_SPACES_DEFAULT},
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("ingest", parents=[common], help="ingest files (md, txt, pdf, html)")
    p.add_argument("paths", nargs="+", help="files, or folders with --recursive")
    p.add_argument(
        "-r", "--recursive", action="store_true", help="ingest supported files in folders"
    )
    p.add_argument("--knowledge-type", choices=[k.value for k in KnowledgeType])
    p.add_argument("--importance", type=float, help="0..1")
    p.add_argument("--tag", action="append", help="tag every chunk (repeatable)")
    p.add_argument("--source-date", help="ISO date the knowledge was written")
    p.add_argument("--no-index", action="store_true", help="store only; run update-index later")
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("search", parents=[common], help="hybrid search")
    p.add_argument("query")
    p.add_argument(
        "--rewrite",
        action="append",
        metavar="TEXT",
        help="another phrasing of the same question (repeatable, at most "
        f"{MAX_REWRITES}): synonyms, the words the notes may use; each is searched and all "
        "are fused into one ranking, the query weighing as much as all rewrites together",
    )
    p.add_argument(
        "-k",
        "--top-k",
        type=int,
        default=DEFAULT_TOP_K,
        help="chunks to return (default %(default)s)",
    )
    p.add_argument("--tag", action="append", help="only chunks with this tag (repeatable: all)")
    p.add_argument("--knowledge-type", action="append", choices=[k.value for k in KnowledgeType])
    p.add_argument("--doc-id", action="append")
    p.add_argument("--mmr", action="store_true", help="diversify results (MMR)")
    p.add_argument(
        "--now",
        type=iso_day,
        metavar="YYYY-MM-DD",
        help="the day the search happens: a time the query names (yesterday, in May 2023, "
        "先月) is read against it, and the memory axis ages chunks to it (default: today)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--stats", action="store_true", help="timings and consistency counters")
    p.add_argument("--no-access", action="store_true", help="do not count this as an access")
    p.add_argument(
        "--memory",
        action="store_true",
        help="apply the memory axis (importance cut, decay by knowledge_type, access boost) "
        "and consider guaranteed principles",
    )
    p.add_argument(
        "--time-weight",
        type=float,
        help=f"memory axis: weight of freshness (default: {setting('time_weight')})",
    )
    p.add_argument(
        "--freq-weight",
        type=float,
        help=f"memory axis: weight of access count (default: {setting('freq_weight')})",
    )
    p.add_argument(
        "--importance-threshold",
        type=float,
        help=f"memory axis: importance cutoff (default: {setting('importance_threshold')})",
    )
    p.set_defaults(func=cmd_search)

    p = sub.add_parser(
        "backfill-source-date",
        parents=[common],
        help="fill missing source_date from file names or mtimes (dry run unless --apply)",
    )
    p.add_argument("--apply", action="store_true", help="write the dates (default: only show them)")
    p.set_defaults(func=cmd_backfill)

    p = sub.add_parser("update-index", parents=[common], help="add new / drop deleted chunks")
    p.set_defaults(func=cmd_update)
    p = sub.add_parser("rebuild-index", parents=[common], help="rebuild from stored vectors")
    p.set_defaults(func=cmd_rebuild)
    report_cli.register(sub, [common], _system)
    forgetting_cli.register(sub, [common], _system)
    scrub_cli.register(sub, [common], _system)
    history_cli.register(sub, [common], _system)
    history_cli.register_review(sub, [common], _system)
    sources_cli.register(sub, [common], _system)
    eval_cli.register(sub, [common], _system)
    alerts_cli.register(sub, [common])
    setup_cli.register(sub, [common])
    recall_cli.register(sub, [common], _settings)
    capture_cli.register(sub, [common], _system)
    import_cli.register(sub, [common], _system)
    spaces_cli.register(sub, [common], _settings, _system)
    ui_cli.register(sub, [common], _system)
    p = sub.add_parser("demo", parents=[common], help="ingest the sample corpus, run a query")
    p.add_argument("--query")
    p.set_defaults(func=cmd_demo)
    _add_serve(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit code. A reader that leaves early (``| head``) ends it quietly
    with ``READER_GONE``, as SIGPIPE ends other commands of a pipeline."""
    try:
        code = _run(argv)  # argparse's own messages (--help) ignore a closed pipe
        sys.stdout.flush()  # here, not at exit: a closed pipe then still ends quietly
    except BrokenPipeError:
        # Whatever is still buffered can go nowhere; point fd 1 at /dev/null so the
        # interpreter's last flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return READER_GONE
    return code


def _run(argv: Sequence[str] | None) -> int:
    # Idle OpenMP threads spinning after a torch call starve FAISS and SQLite on
    # small machines; set before any native library starts its thread pool.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "serve":  # the server's own logging, and stdout carries the protocol
        return cmd_serve(parser, args)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        with contextlib.redirect_stdout(VisibleControls(sys.stdout)):  # type: ignore[type-var]
            return int(args.func(args))
    except MemoryPipelineError as exc:
        print(f"error: {visible(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # what a command stopped half-way left is whole (DESIGN §1)
        print("interrupted (Ctrl-C)", file=sys.stderr)
        return import_cli.INTERRUPTED
    except OSError as exc:  # a file no layer below named: a full disk, a read-only folder
        error = file_error(exc, FILES_UNCHANGED)
        if error is None:
            raise
        print(f"error: {visible(str(error))}", file=sys.stderr)
        return 2
