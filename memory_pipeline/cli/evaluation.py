"""``memory-pipeline eval``: golden sets against one's memory, or a BEIR set in a throw-away one.

Wired into ``memory_pipeline.cli.commands`` by :func:`register`; this module only parses,
builds the objects for the BEIR case, and prints.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from memory_pipeline.cli.flags import non_negative_float, setting, shown
from memory_pipeline.config import Settings, variable
from memory_pipeline.errors import InvalidInputError
from memory_pipeline.locations import cache_dir

if TYPE_CHECKING:
    from memory_pipeline.embedding.base import Embedder
    from memory_pipeline.evaluation.results import EvalRun
    from memory_pipeline.system import MemorySystem

MakeSystem = Callable[[argparse.Namespace], "MemorySystem"]

DEFAULT_GOLDEN = Path("eval/golden_queries.yaml")
DEFAULT_REPORTS = Path("eval/reports")
DEFAULT_K_VALUES = (1, 3, 5, 10)


def _k_values(text: str) -> list[int]:
    try:
        values = sorted({int(p) for p in text.split(",") if p.strip()})
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"k values must be integers like 1,3,5,10: {text}"
        ) from exc
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError(f"k values must be positive: {text}")
    return values


def _configs(text: str) -> list[str]:
    from memory_pipeline.evaluation.variants import DEFAULT_VARIANTS, VARIANTS

    names = [p.strip() for p in text.split(",") if p.strip()]
    if names == ["all"]:
        return list(DEFAULT_VARIANTS)
    unknown = [n for n in names if n not in VARIANTS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown variant(s) {', '.join(unknown) or '(none)'}; choose from "
            f"{', '.join(VARIANTS)} or 'all'"
        )
    return names


def _turn_context(text: str) -> tuple[int, int]:
    parts = text.split(",")
    try:
        before, after = (int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected BEFORE,AFTER as two whole numbers like 1,1: {text}"
        ) from None
    if not (0 <= before <= 8 and 0 <= after <= 8):
        raise argparse.ArgumentTypeError(f"each of BEFORE,AFTER must be 0 to 8: {text}")
    return before, after


def register(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    parents: list[argparse.ArgumentParser],
    make_system: MakeSystem,
) -> None:
    """Add the ``eval`` subcommand; ``make_system`` opens the user's configured memory."""
    p = sub.add_parser(
        "eval",
        parents=parents,
        help="measure retrieval quality (golden set or BEIR data set), ablations side by side",
        description="Evaluate retrieval: Precision/Recall/nDCG/Hit Rate at k, MRR, authority "
        "rank and noise rate, for several retrieval configurations in one run.",
    )
    defaults = Settings().ingest
    src = p.add_mutually_exclusive_group()
    src.add_argument("--golden", type=Path, help=f"golden set YAML (default: {DEFAULT_GOLDEN})")
    src.add_argument("--beir", type=Path, help="BEIR folder (corpus.jsonl, queries.jsonl, qrels/)")
    src.add_argument(
        "--locomo",
        type=Path,
        metavar="FILE",
        help="a LoCoMo-format JSON file: each conversation imported as a user's would be, "
        "questions judged by their evidence turns, per category",
    )
    p.add_argument(
        "--pooled",
        action="store_true",
        help="LoCoMo: all conversations in one memory, each question filtered to its own "
        "(default: a memory per conversation)",
    )
    p.add_argument(
        "--turn-context",
        type=_turn_context,
        metavar="BEFORE,AFTER",
        help="LoCoMo: neighbouring turns indexed with each turn (default: "
        f"{variable('turn_context_before')} and {variable('turn_context_after')}, else "
        f"{defaults.turn_context_before},{defaults.turn_context_after})",
    )
    p.add_argument(
        "--turn-dates",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"LoCoMo: index the dates that relative times mean (default: {setting('turn_dates')})",
    )
    p.add_argument(
        "--turn-vectors",
        choices=("blended", "joined"),
        help="LoCoMo: a turn's vector blended from its own and its neighbours' embeddings, or "
        f"the embedding of its whole index text (default: {setting('turn_vectors')})",
    )
    p.add_argument(
        "--question-now",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="LoCoMo: search each question as of its conversation's last session date, so "
        "a time it names (last year, two months ago) is read against the conversation "
        "(default: on; --no-question-now: today)",
    )
    p.add_argument(
        "--extra-corpus",
        action="append",
        default=[],
        help="more corpus JSONL joined to the BEIR corpus, e.g. distractors (repeatable; "
        "a bare file name is looked up in the BEIR folder)",
    )
    p.add_argument("--split", default="test", help="qrels split (default: %(default)s)")
    p.add_argument(
        "--max-docs", type=int, help="BEIR: keep the judged documents plus others up to N"
    )
    p.add_argument(
        "--max-queries", type=int, help="evaluate N queries (BEIR: picked evenly; golden: first N)"
    )
    p.add_argument(
        "--k-values",
        type=_k_values,
        default=list(DEFAULT_K_VALUES),
        help=f"default: {','.join(map(str, DEFAULT_K_VALUES))}",
    )
    p.add_argument(
        "--authority-window",
        type=int,
        default=10,
        help="rank window for authority documents (default %(default)s)",
    )
    p.add_argument(
        "--config",
        type=_configs,
        default=None,
        help="variants, comma-separated: bm25,dense,hybrid,hybrid-rrf,hybrid+rerank,"
        "hybrid+memory,hybrid+mmr, or 'all' (default: all); hybrid-rrf is hybrid with "
        "reciprocal rank fusion instead of the configured fusion",
    )
    p.add_argument(
        "--output-dir",
        type=Path,
        default=DEFAULT_REPORTS,
        help="report folder (default: %(default)s)",
    )
    p.add_argument("--compare", type=Path, help="an earlier JSON report to compare with")
    p.add_argument(
        "--max-drop",
        type=non_negative_float,
        help="with --compare: exit 1 if nDCG@10 or Recall@10 (or @max k without 10) "
        "dropped by more than this",
    )
    p.add_argument(
        "--cache-dir",
        type=Path,
        # evaluation.beir.default_eval_cache(), not imported to build the parser (it loads
        # the whole system); tests/cli/test_help_defaults.py holds the two together.
        help=f"BEIR and LoCoMo memories (default: {shown(cache_dir() / 'eval')})",
    )
    p.add_argument(
        "--embed-budget",
        type=non_negative_float,
        help="BEIR: stop embedding after this many minutes and evaluate the partial memory "
        "(judged documents first, then a random sample); a later run resumes. 0: embed nothing",
    )
    p.add_argument("--no-chart", action="store_true", help="skip the PNG chart")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    if not any("--model" in a.option_strings for parent in parents for a in parent._actions):
        p.add_argument("--model", help="embedding model; 'hashing' for the fast test embedder")
    p.set_defaults(func=lambda args: cmd_eval(args, make_system))


def _embedder(model: str | None, progress: bool) -> tuple[Embedder, Settings]:
    """The configured embedder, or the one ``--model`` names ('hashing': the test one)."""
    settings = Settings.from_env()
    if model:
        settings = settings.replace(model=model)
    from memory_pipeline.embedding.registry import embedder_for

    return embedder_for(settings.embedding, progress=progress), settings


def _beir_run(args: argparse.Namespace, progress: bool) -> EvalRun:
    from memory_pipeline.evaluation.beir import (
        embed_queries,
        load_beir,
        open_beir_memory,
        subset,
    )
    from memory_pipeline.evaluation.runner import EvalQuery, evaluate

    extras = [
        e if Path(e).exists() or Path(e).is_absolute() else args.beir / e for e in args.extra_corpus
    ]
    ds = load_beir(args.beir, split=args.split, extra_corpus=[Path(e) for e in extras])
    if args.max_docs or args.max_queries:
        ds = subset(ds, args.max_docs or len(ds.corpus), args.max_queries)
    embedder, settings = _embedder(getattr(args, "model", None), progress)
    print(f"{ds.name}: {len(ds.corpus)} documents, {len(ds.queries)} judged queries")
    budget = None if args.embed_budget is None else args.embed_budget * 60
    built = open_beir_memory(
        ds, embedder, settings, cache_root=args.cache_dir, progress=progress, embed_budget=budget
    )
    how = (
        "reused"
        if built.reused
        else f"built ({built.embedded} chunks embedded, {built.chunks - built.embedded} reused)"
    )
    if built.partial:
        how = f"PARTIAL ({built.documents} of {len(ds.corpus)} documents)"
    print(f"memory {how} in {built.seconds:.1f}s: {built.path}")
    qids = list(ds.queries)
    started = time.perf_counter()
    vectors = embed_queries(embedder, [ds.queries[q] for q in qids])
    print(f"{len(qids)} queries embedded in {time.perf_counter() - started:.1f}s")
    queries = [EvalQuery(q, ds.queries[q], ds.qrels[q]) for q in qids]
    run = evaluate(
        built.system,
        queries,
        dataset=ds.name,
        k_values=args.k_values,
        authority_window=args.authority_window,
        variants=args.config or None,
        query_vectors=vectors,
        progress=progress,
    )
    run.notes.extend(built.notes)
    run.settings["memory_path"] = str(built.path)
    return run


def _locomo_run(args: argparse.Namespace, progress: bool) -> EvalRun:
    from memory_pipeline.evaluation.locomo import evaluate_locomo, load_locomo

    ds = load_locomo(args.locomo)
    embedder, settings = _embedder(getattr(args, "model", None), progress)
    if args.turn_context is not None:
        before, after = args.turn_context
        settings = settings.replace(turn_context_before=before, turn_context_after=after)
    if args.turn_dates is not None:
        settings = settings.replace(turn_dates=args.turn_dates)
    if args.turn_vectors is not None:
        settings = settings.replace(turn_vectors=args.turn_vectors)
    turns = sum(len(c.messages) for sessions in ds.sessions.values() for c in sessions)
    print(
        f"{ds.name}: {len(ds.sessions)} conversations, {turns} turns, "
        f"{ds.n_queries} judged questions"
    )
    run = evaluate_locomo(
        ds,
        embedder,
        settings,
        variants=args.config or None,
        k_values=args.k_values,
        pooled=args.pooled,
        cache_root=args.cache_dir,
        progress=progress,
        question_now=args.question_now,
    )
    print(
        f"{run.settings['memories']}: built in {run.settings['build_seconds']}s "
        f"({run.settings['embedded']} texts embedded)"
    )
    return run


def _golden_run(args: argparse.Namespace, make_system: MakeSystem, progress: bool) -> EvalRun:
    from memory_pipeline.evaluation.golden import load_golden
    from memory_pipeline.evaluation.runner import evaluate, golden_queries

    golden = load_golden(args.golden or DEFAULT_GOLDEN)
    queries = golden_queries(golden)[: args.max_queries]
    system = make_system(args)
    return evaluate(
        system,
        queries,
        dataset=golden.name,
        k_values=args.k_values,
        authority_window=args.authority_window,
        variants=args.config or None,
        progress=progress,
    )


def cmd_eval(
    args: argparse.Namespace, make_system: Callable[[argparse.Namespace], MemorySystem]
) -> int:
    from memory_pipeline.evaluation.compare import compare_runs, regression
    from memory_pipeline.evaluation.report import headline_table, write_report
    from memory_pipeline.evaluation.results import EvalRun
    from memory_pipeline.evaluation.variants import DEFAULT_VARIANTS

    if args.max_drop is not None and args.compare is None:
        raise InvalidInputError("--max-drop needs --compare OLD.json (the baseline)")
    if args.config is None:
        args.config = list(DEFAULT_VARIANTS)
    baseline = EvalRun.load(args.compare) if args.compare else None
    progress = not args.no_progress
    started = time.perf_counter()
    if args.pooled and not args.locomo:
        raise InvalidInputError("--pooled is for --locomo FILE")
    if args.locomo:
        run = _locomo_run(args, progress)
    elif args.beir:
        run = _beir_run(args, progress)
    else:
        run = _golden_run(args, make_system, progress)
    comparison = compare_runs(baseline, run) if baseline else None
    paths = write_report(run, args.output_dir, comparison=comparison, chart=not args.no_chart)
    print()
    print(headline_table(run))
    if args.locomo:
        from memory_pipeline.evaluation.locomo import category_table

        primary = run.variant()
        print(f"\nturn-level and session-level, by question category ({primary.name}):")
        ks: list[int] = [k for k in (5, 10) if k in run.k_values] or [run.headline_k]
        print(category_table(run, ks))
        for metric in [f"{level}recall@{k}" for level in ("", "session_") for k in ks]:
            print(f"{metric} {primary.summary.get(metric, float('nan')):.4f}")
    for note in run.notes:
        print(f"note: {note}")
    if comparison is not None:
        print()
        print(comparison.render())
    print(f"\nreport: {paths.markdown}\n        {paths.json}")
    if paths.chart:
        print(f"        {paths.chart}")
    print(f"total {time.perf_counter() - started:.1f}s")
    if baseline is not None and args.max_drop is not None:
        k = run.headline_k
        failures = regression(run, baseline, args.max_drop, metrics=(f"ndcg@{k}", f"recall@{k}"))
        for f in failures:
            print(f"REGRESSION: {f}", file=sys.stderr)
        return 1 if failures else 0
    return 0
