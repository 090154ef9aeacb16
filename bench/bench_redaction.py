"""Redaction on data sets that hold no secrets: what it changes (false positives) and its speed.

Run by hand: ``python bench/bench_redaction.py [--datasets scifact,jaquad,locomo]``.

The data sets are read where they are (``../shared/datasets``, never copied) and each text
goes through the ingestion path's own redaction step (``ingest.redaction.redact_document``
with the default ``Redactor``), built as the evaluation builds it:

* ``scifact``, ``jaquad`` (with its train paragraphs as distractors, as ``eval`` runs it):
  one document per corpus line (``evaluation.beir.as_loaded``: the title as a heading).
  A document changed is cut into chunks as ingestion cuts it (``chunk_document``, the
  default model's tokens and chunk size) beside its unredacted text, so "chunks changed"
  counts the chunks whose text the redaction alters;
* ``locomo``: LoCoMo's development conversations, each session one document whose turns
  are redacted one at a time and become one chunk each (``Conversation.to_loaded``).

None of these texts holds a secret, so every change counted is a false positive. For each
kind, up to ``--examples`` examples are printed as a few words either side of the marker
(the marker itself, never the text it replaced); a dropped ``<private>`` or
``<memory-recall>`` span is shown by the words before it.

Speed: the redaction step over every text of a set (``redact_document``: body, turns,
title and source), best of ``--repeat`` passes, in characters per second. The load
average is printed beside it: the machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memory_pipeline.hygiene.redactor import Redactor  # noqa: E402
from memory_pipeline.hygiene.secrets import MARKER  # noqa: E402
from memory_pipeline.ingest.loaders import LoadedDocument  # noqa: E402
from memory_pipeline.ingest.redaction import redact_document  # noqa: E402

DATASETS = ROOT.parent / "shared" / "datasets"
NAMES = ("scifact", "jaquad", "locomo")
_MARKER = re.compile(re.escape(MARKER).replace(r"\{kind\}", r"(?P<kind>[a-z0-9-]+)"))
_DROPPED = re.compile(r"<(?P<kind>private|memory-recall)\s*>", re.IGNORECASE)


@dataclass
class Result:
    name: str
    documents: int = 0
    documents_changed: int = 0
    unit: str = "chunks"  # what a document is cut into: chunks, or turns for a conversation
    units: int = 0  # units of the changed documents (BEIR) or of every document (turns)
    units_changed: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    chars: int = 0
    seconds: float = 0.0


# --------------------------------------------------------------------------- loading
def beir_documents(folder: Path, extra: Sequence[str] = ()) -> list[LoadedDocument]:
    from memory_pipeline.evaluation.beir import as_loaded, read_corpus

    docs = read_corpus(folder / "corpus.jsonl")
    for name in extra:
        docs += read_corpus(folder / name)
    return [loaded for d in docs if (loaded := as_loaded(d)[0]) is not None]


def locomo_documents(path: Path) -> list[LoadedDocument]:
    from memory_pipeline.sources.transcripts import locomo_conversations

    data = json.loads(path.read_text(encoding="utf-8"))
    return [conv.to_loaded() for conv in locomo_conversations(data, str(path))]


def load(name: str, root: Path) -> list[LoadedDocument]:
    if name == "scifact":
        return beir_documents(root / "scifact")
    if name == "jaquad":
        return beir_documents(root / "jaquad", ["corpus_train_distractors.jsonl"])
    if name == "locomo":
        return locomo_documents(root / "locomo-dev" / "locomo-dev.json")
    raise SystemExit(f"unknown data set {name!r} (known: {', '.join(NAMES)})")


# ------------------------------------------------------------------------ examples
def window(text: str, start: int, end: int, words: int) -> str:
    """``text[start:end]`` with ``words`` words either side, on one line."""
    before = text[:start].split()[-words:] if words else []
    after = text[end:].split()[:words] if words else []
    # a CJK text has no spaces: a few characters either side instead
    if before and len(before[-1]) > 40:
        before = [before[-1][-15:]]
    if after and len(after[0]) > 40:
        after = [after[0][:15]]
    line = " ".join([*before, text[start:end], *after])
    return " ".join(line.split())


def collect_examples(
    original: str, redacted: str, res: Result, limit: int, words: int, where: str
) -> None:
    for m in _MARKER.finditer(redacted):
        shown = res.examples.setdefault(m["kind"], [])
        if len(shown) < limit:
            shown.append(f"{where}: …{window(redacted, m.start(), m.end(), words)}…")
    for m in _DROPPED.finditer(original):
        kind = m["kind"].lower()
        shown = res.examples.setdefault(kind, [])
        if len(shown) < limit:
            # the words before it only: what the span held is not shown
            line = " ".join(original[: m.start()].split()[-words:])
            shown.append(f"{where}: …{line} [{kind} span dropped from here]")


# ------------------------------------------------------------------------- measuring
def measure(
    name: str,
    docs: Sequence[LoadedDocument],
    redactor: Redactor,
    chunker: Callable[[str], list[str]] | None,
    examples: int,
    words: int,
    repeat: int,
) -> Result:
    res = Result(name, documents=len(docs))
    res.chars = sum(
        len(d.text) + len(d.title) + len(d.source) + sum(len(t.text) for t in d.turns or ())
        for d in docs
    )
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for d in docs:
            redact_document(d, redactor)
        best = min(best, time.perf_counter() - started)
    res.seconds = best
    for d in docs:
        kept, counts, _ = redact_document(d, redactor)
        title_changed = kept.title != d.title or kept.source != d.source
        if d.turns:
            res.unit = "turns"
            res.units += len(d.turns)
            for before, after in zip(d.turns, kept.turns, strict=True):
                if after.text != before.text:
                    res.units_changed += 1
                    where = f"{d.title} {before.turn_id}"
                    collect_examples(before.text, after.text, res, examples, words, where)
        elif kept.text != d.text:
            if chunker is not None:
                old = set(chunker(d.text))
                new = chunker(kept.text)
                res.units += len(new)
                res.units_changed += sum(c not in old for c in new)
            collect_examples(d.text, kept.text, res, examples, words, d.doc_id or d.source)
        if counts or title_changed or kept.text != d.text:
            res.documents_changed += 1
        res.kinds += counts
    return res


def make_chunker(model: str | None) -> Callable[[str], list[str]]:
    """Ingestion's ``chunk_document`` with the settings' chunk size and the model's tokens."""
    from memory_pipeline.config import Settings
    from memory_pipeline.embedding.registry import embedder_for
    from memory_pipeline.ingest.chunking import chunk_document

    settings = Settings.from_env()
    embedding = settings.embedding
    if model:
        embedding = embedding.model_copy(update={"model": model})
    ingest = settings.ingest
    loaded: list[Any] = []  # the model is loaded only when a document changed

    def chunker(text: str) -> list[str]:
        if not loaded:
            loaded.append(embedder_for(embedding, progress=False))
        chunks = chunk_document(
            text,
            token_counter=loaded[0].count_tokens,
            max_chunk_size=ingest.max_chunk_size,
            overlap=ingest.chunk_overlap,
        )
        return [c.text for c in chunks]

    return chunker


# -------------------------------------------------------------------------- printing
def table(results: Sequence[Result]) -> str:
    kinds = sorted({k for r in results for k in r.kinds})
    head = ["data set", "docs", "changed", "units", "changed", *kinds, "M chars", "M chars/s"]
    rows = [head]
    for r in results:
        rows.append(
            [
                r.name,
                f"{r.documents:,}",
                f"{r.documents_changed:,} ({r.documents_changed / max(r.documents, 1):.2%})",
                f"{r.units:,} {r.unit}",
                f"{r.units_changed:,}",
                *[str(r.kinds.get(k, 0)) for k in kinds],
                f"{r.chars / 1e6:.1f}",
                f"{r.chars / r.seconds / 1e6:.2f}" if r.seconds else "-",
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = [
        " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=(
            "Columns: docs (documents; a LoCoMo session is one), changed (documents the "
            "redaction altered), units (BEIR: the chunks of the changed documents; LoCoMo: "
            "every turn), changed (chunks or turns whose text the redaction altered), one "
            "column per kind found (findings, not documents), M chars (characters redacted, "
            "millions) and M chars/s (per second, best of --repeat)."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--datasets",
        default=",".join(NAMES),
        help=f"comma-separated, of {', '.join(NAMES)} (default: all)",
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=DATASETS,
        help=f"the shared data sets folder (default: {DATASETS})",
    )
    parser.add_argument("--examples", type=int, default=5, help="examples per kind (default 5)")
    parser.add_argument(
        "--words", type=int, default=4, help="words shown either side of a marker (default 4)"
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="timed passes per set, best kept (default 3)"
    )
    parser.add_argument(
        "--model",
        help="model whose tokens cut the chunks (default: the settings'; 'hashing' is fast)",
    )
    parser.add_argument(
        "--no-chunks",
        action="store_true",
        help="skip chunking the changed documents (no chunk counts for BEIR sets)",
    )
    args = parser.parse_args()
    names = [n.strip() for n in args.datasets.split(",") if n.strip()]
    for n in names:
        if n not in NAMES:
            parser.error(f"unknown data set {n!r} (known: {', '.join(NAMES)})")
    redactor = Redactor()
    chunker = None if args.no_chunks else make_chunker(args.model)
    results = []
    for name in names:
        docs = load(name, args.root)
        load1 = os.getloadavg()[0]
        res = measure(name, docs, redactor, chunker, args.examples, args.words, args.repeat)
        print(
            f"{name}: {res.documents:,} documents, {res.chars / 1e6:.1f} M chars, "
            f"redacted in {res.seconds:.2f} s ({res.chars / res.seconds / 1e6:.2f} M chars/s; "
            f"load {load1:.2f} → {os.getloadavg()[0]:.2f})",
            flush=True,
        )
        results.append(res)
    print()
    print(table(results))
    for res in results:
        if not res.examples:
            continue
        print(f"\n{res.name}: examples")
        for kind, shown in sorted(res.examples.items()):
            print(f"  {kind} ({res.kinds.get(kind, 0)} found)")
            for line in shown:
                print(f"    {line}")
    print("\nnone of these sets holds a secret: every change above is a false positive")
    return 0


if __name__ == "__main__":
    sys.exit(main())
