"""The default model's ONNX graph made two ways — traced through torch (the reference,
``onnx_export.export_with_torch``) and written from the weights without torch (what a
first use builds now, ``embedding/onnx_build.py``) — side by side on the shared data
sets: every chunk's vector, and the retrieval figures.

Run by hand: ``python bench/bench_onnx_retrieval.py [--out DIR]`` (about an hour here:
each model embeds SciFact, JaQuAD and the LoCoMo dev split once). Each way gets a cache
folder of its own (``XDG_CACHE_HOME``): the model made that way, then ``memory-pipeline
eval`` on each data set, as a user would run it, into that folder's evaluation memories.
Printed: per data set, every chunk of the evaluation memories compared by its text
(count, min and mean cosine, how many vectors are bit-identical; LoCoMo's memories are
not kept, so its turns are embedded by both models), and each variant's
nDCG@10, Recall@10 and MRR for both ways in one table. A second run with the same
``--out`` reuses what the first made.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
DATASETS = HERE.parents[1] / "shared" / "datasets"
SETS = {
    "SciFact": ["--beir", str(DATASETS / "scifact")],
    "JaQuAD": ["--beir", str(DATASETS / "jaquad")],
    "LoCoMo-dev": ["--locomo", str(DATASETS / "locomo-dev" / "locomo-dev.json")],
}
LOCOMO_TURNS = DATASETS / "locomo-dev" / "beir" / "locomo-dev-all" / "corpus.jsonl"
WAYS = {"torch export": "torch", "written without torch": "onnx_build"}
METRICS = ("ndcg@10", "recall@10", "mrr")


def _first_use_script() -> str:
    spec = importlib.util.spec_from_file_location("bench_onnx_build", HERE / "bench_onnx_build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module.FIRST_USE)


def _load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HYBRID_RAG_")}
    env.update(XDG_CACHE_HOME=str(root), XDG_DATA_HOME=str(root / "data"))
    env["PYTHONPATH"] = str(HERE.parent)
    return env


def _model(root: Path, way: str) -> None:
    from memory_pipeline.embedding import onnx_export

    models = root / "memory-pipeline" / "models"
    if (models / onnx_export.ONNX_FOLDER / onnx_export.MARKER).exists():
        return
    models.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-c", _first_use_script(), str(models), way],
        env=_env(root),
        check=True,
    )


def _evaluate(root: Path, name: str, args: list[str]) -> dict[str, Any]:
    reports = root / "reports" / name
    if not sorted(reports.glob("*.json")):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "memory_pipeline.cli",
                "eval",
                *args,
                "--cache-dir",
                str(root / "eval"),
                "--output-dir",
                str(reports),
                "--no-chart",
                "--no-progress",
            ],
            env=_env(root),
            check=True,
            cwd=root,
        )
    report: dict[str, Any] = json.loads(sorted(reports.glob("*.json"))[-1].read_text())
    return report


def _vectors(db: Path, model_id: str) -> dict[str, np.ndarray]:
    from memory_pipeline.store import Store
    from memory_pipeline.store.engine import sqlite_url

    store = Store(sqlite_url(db))
    try:
        return {
            text: np.frombuffer(blob, dtype=np.float32)
            for text, blob in store.iter_content_vectors(model_id)
        }
    finally:
        store.close()


def _compare_vectors(roots: dict[str, Path], model_id: str, names: dict[int, str]) -> list[str]:
    reference, built = (roots[way] / "eval" for way in WAYS.values())
    rows = []
    for db in sorted(reference.glob("*/memory.db")):
        other = built / db.parent.name / "memory.db"
        if not other.exists():
            rows.append(f"| {db.parent.name} | missing on the other side | | | |")
            continue
        a, b = _vectors(db, model_id), _vectors(other, model_id)
        shared = sorted(set(a) & set(b))
        cos = np.array([float(a[t] @ b[t]) for t in shared])
        same = sum(bool(np.array_equal(a[t], b[t])) for t in shared)
        only = len(set(a) ^ set(b))
        name = names.get(len(a), db.parent.name.split("-")[0])  # by its report's chunk count
        rows.append(
            f"| {name} chunks | {len(shared)} (+{only} on one side only) | "
            f"{cos.min():.7f} | {cos.mean():.7f} | {same}/{len(shared)} |"
        )
    return rows


def _compare_turns(roots: dict[str, Path]) -> str:
    """LoCoMo's evaluation memories are not kept: its turns, embedded by both models."""
    from memory_pipeline.embedding.onnx import OnnxEmbedder
    from memory_pipeline.evaluation.beir import read_corpus

    texts = [d.text for d in read_corpus(LOCOMO_TURNS)]
    a, b = (
        OnnxEmbedder(cache_dir=roots[way] / "memory-pipeline" / "models").embed_documents(texts)
        for way in WAYS.values()
    )
    cos = np.sum(a * b, axis=1)
    same = int(np.sum(np.all(a == b, axis=1)))
    return (
        f"| LoCoMo-dev turns ({LOCOMO_TURNS.parent.name}/corpus.jsonl) | {len(texts)} | "
        f"{cos.min():.7f} | {cos.mean():.7f} | {same}/{len(texts)} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench-onnx-retrieval"))
    args = parser.parse_args()
    print(f"load before: {_load()}  (python {sys.version.split()[0]}, {os.cpu_count()} cores)")
    roots = {way: args.out / way for way in WAYS.values()}
    for way, root in roots.items():
        _model(root, way)
    reports: dict[str, dict[str, dict[str, Any]]] = {}
    for name, argv in SETS.items():
        for way, root in roots.items():
            reports.setdefault(name, {})[way] = _evaluate(root, name, argv)
            print(f"evaluated {name} with the {way} graph; load: {_load()}", flush=True)
    model_id = next(iter(reports["SciFact"].values()))["model_id"]
    print()
    print(f"## Every chunk's vector ({model_id}): written without torch against torch export")
    print()
    print("| evaluation memory | chunks compared | min cosine | mean cosine | bit-identical |")
    print("|---|---|---|---|---|")
    names = {int(r["torch"]["n_chunks"]): name for name, r in reports.items()}
    for row in _compare_vectors(roots, model_id, names):
        print(row)
    print(_compare_turns(roots))
    print()
    print("## Retrieval, torch export → written without torch")
    print()
    print("| data set | variant | " + " | ".join(METRICS) + " |")
    print("|---|---|" + "---|" * len(METRICS))
    for name, by_way in reports.items():
        before, after = (
            {v["name"]: v["summary"] for v in by_way[way]["variants"]} for way in WAYS.values()
        )
        for variant, summary in before.items():
            cells = [
                f"{summary.get(m, float('nan')):.4f} → {after.get(variant, {}).get(m, float('nan')):.4f}"
                for m in METRICS
            ]
            print(f"| {name} | {variant} | " + " | ".join(cells) + " |")
    print()
    print(f"load after: {_load()}")


if __name__ == "__main__":
    main()
