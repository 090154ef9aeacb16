"""The prompt hook (``memory-pipeline recall --prompt``): how fast, and how good.

Speed (``--speed``): the real hook command, from process start to its output, on SciFact's
abstracts as notes (11,447 chunks, the default model; built once into ``--memory``, as
``bench_ui.py`` builds it), its prompts SciFact's claims. Side by side in one run,
interleaved round by round: ``python -c pass`` (the floor of any hook), the hook answered
by the warm helper (the default), and the hook searching in its own process
(``HYBRID_RAG_PROMPT_RECALL_HELPER=off``: loading the store, the index and the model for
each prompt, the choice without a helper process). p50/p95 in ms, with the load.

Quality (``--quality``): LoCoMo's development conversations (``../shared``), each in a
memory of its own as an import stores it; every question with evidence asked as a prompt
(its own session, as of the conversation's last day). For the hook: the share of
questions whose evidence turn is among the chunks it adds, the share it adds nothing to,
the tokens it adds on average (``estimate_tokens``); beside the full ``hybrid_search``
top 5 on the same questions. Then the small talk below (two sets), asked of every conversation's
memory: the share of prompts the hook adds something to, which it should not. The
floors (dense similarity and BM25) are swept (``--floors``); the defaults were chosen on
conversations conv-26 and conv-30 and small-talk set A; conv-41, conv-42 and set B are
reported apart, as held out.

    python bench/bench_prompt_recall.py --speed [--rounds 60] [--memory /tmp/bench-ui]
    python bench/bench_prompt_recall.py --quality [--floors 0.83:8,0.85:0]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "datasets"
sys.path.insert(0, str(REPO))

from bench.bench_ui import SCIFACT, build  # noqa: E402
from tests.ui.browser import memory_env  # noqa: E402

#: Said to an agent while working; none asks anything a memory should answer.
SMALL_TALK = (
    "hello there, good morning to you all!",
    "thanks, that looks good to me",
    "great, go ahead and do that",
    "ok sounds good, continue please",
    "can you run the tests again?",
    "please commit that with a clear message",
    "looks fine, ship it",
    "wait, stop for a second",
    "never mind, let's try the other way",
    "that's all for today, thank you",
    "fix the typo in the readme",
    "make the function shorter please",
    "what time is it right now?",
    "good job, that worked",
    "hmm, that is not what I meant",
    "try again but slower",
    "show me the diff",
    "lol that's funny",
    "how are you doing today?",
    "let's take a break and come back later",
)
#: More of the same, written apart: the defaults were chosen beside set A, never B.
SMALL_TALK_B = (
    "please rename that variable to something clearer",
    "run the linter and fix what it finds",
    "good, now push it",
    "can you explain that more simply?",
    "I'm not sure, what do you think?",
    "ok let's move on to the next one",
    "that's wrong, undo it",
    "nice, thank you so much",
    "could you format the output as a table?",
    "hold on, I need to check something",
    "sure, whatever works best",
    "one more time please",
    "sounds like a plan",
    "no, the other file",
    "keep going until it passes",
    "write a short summary of what you did",
    "are you still there?",
    "what should we do next?",
    "I'll be back in ten minutes",
    "perfect, that's exactly it",
)
TUNING = ("conv-26", "conv-30")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _env(memory: Path, **extra: str) -> dict[str, str]:
    env = memory_env(memory)
    env.pop("HYBRID_RAG_EMBEDDING_MODEL", None)  # the default model, not the tests' one
    env["HOME"] = os.environ.get("HOME", str(memory))  # the user's model cache
    env["HYBRID_RAG_SPACE"] = "default"
    return {**env, **extra}


def _claims(n: int) -> list[str]:
    with (SCIFACT / "queries.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line)["text"] for line in fh][:n]


def _time(command: list[str], env: dict[str, str], stdin: str, cwd: Path) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(
        command, input=stdin, env=env, cwd=cwd, capture_output=True, text=True, check=True
    )
    return (time.perf_counter() - started) * 1000, done.stdout


def speed(memory: Path, rounds: int, cold_every: int) -> None:
    chunks = build(memory, "")
    hook = [sys.executable, "-m", "memory_pipeline.cli", "recall", "--prompt"]
    warm_env = _env(memory)
    cold_env = _env(memory, HYBRID_RAG_PROMPT_RECALL_HELPER="off")
    claims = _claims(rounds)
    payload = lambda i: json.dumps(  # noqa: E731
        {"session_id": f"bench-{i}", "cwd": str(memory), "hook_event_name": "UserPromptSubmit",
         "prompt": claims[i % len(claims)]}
    )  # fmt: skip
    # The helper: started by a first prompt, given until it listens.
    subprocess.run(
        hook, input=payload(0), env=warm_env, cwd=memory, capture_output=True, text=True, check=True
    )
    from memory_pipeline.cli.prompt_hook import helper_paths

    sock, lock = helper_paths(warm_env)
    deadline = time.monotonic() + 120
    while not sock.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    load_before = os.getloadavg()
    times: dict[str, list[float]] = {
        "python -c pass": [],
        "hook, warm helper": [],
        "hook, no helper": [],
    }
    added = 0
    for i in range(rounds):
        times["python -c pass"].append(
            _time([sys.executable, "-c", "pass"], warm_env, "", memory)[0]
        )
        took, out = _time(hook, warm_env, payload(i), memory)
        times["hook, warm helper"].append(took)
        added += bool(out.strip())
        if i % cold_every == 0:
            times["hook, no helper"].append(_time(hook, cold_env, payload(i), memory)[0])
    load_after = os.getloadavg()
    pid = lock.read_text().strip()
    if pid.isdigit():
        os.kill(int(pid), 15)
    print(f"memory: {chunks} chunks (SciFact abstracts, default model); prompts: SciFact claims")
    print(
        f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}; {os.cpu_count()} cores"
    )
    for name, values in times.items():
        print(
            f"{name:20s} n={len(values):3d}  p50 {statistics.median(values):7.1f} ms  "
            f"p95 {_pct(values, 0.95):7.1f} ms"
        )
    print(f"the warm hook added chunks to {added} of {rounds} prompts")


def quality(floors: list[tuple[float, float]], limit: int | None) -> None:
    from memory_pipeline.config import Settings
    from memory_pipeline.embedding.registry import embedder_for
    from memory_pipeline.evaluation.beir import default_eval_cache
    from memory_pipeline.evaluation.locomo import LocomoMemories, last_session_day, load_locomo
    from memory_pipeline.memory.prompt_recall import DEFAULT_BUDGET, recall_for_prompt
    from memory_pipeline.memory.recall import estimate_tokens

    ds = load_locomo(SHARED / "locomo-dev" / "locomo-dev.json")
    settings = Settings.from_env({})
    embedder = embedder_for(settings.embedding, lambda: [])
    memories = LocomoMemories(settings, embedder, default_eval_cache())
    # rows[(split, floor)] = [found, empty, tokens, n]; small talk: [added, n]
    rows: dict[tuple[str, str], list[float]] = {}
    talk: dict[str, list[int]] = {}
    started = time.perf_counter()
    try:
        for cid, sessions in ds.sessions.items():
            split = "tuning" if cid in TUNING else "held out"
            system = memories.build(cid, sessions)
            now = last_session_day(sessions)
            questions = ds.queries.get(cid, [])[:limit]
            try:
                for n, q in enumerate(questions):
                    evidence = set(q.qrels)
                    top = system.query(q.text, _request(system, now)).hits[:5]
                    turns = {t.turn_id for h in top for t in h.turns}
                    text = "\n".join(h.content for h in top)
                    _add(
                        rows,
                        (split, "hybrid_search top 5"),
                        bool(evidence & turns),
                        not top,
                        estimate_tokens(text) if top else 0,
                    )
                    for dense, bm25 in floors:
                        got = recall_for_prompt(
                            system,
                            q.text,
                            floor=dense,
                            bm25_floor=bm25,
                            now=now,
                            budget=DEFAULT_BUDGET,
                        )
                        turns = {t.turn_id for h in got.hits for t in h.turns}
                        _add(
                            rows,
                            (split, f"hook, floors {dense} / {bm25:g}"),
                            bool(evidence & turns),
                            not got.block,
                            estimate_tokens(got.block),
                        )
                    if n % 50 == 0:
                        print(
                            f"  {cid}: {n}/{len(questions)} questions, {time.perf_counter() - started:.0f} s",
                            file=sys.stderr,
                            flush=True,
                        )
                for which, prompts in (("A", SMALL_TALK), ("B", SMALL_TALK_B)):
                    for dense, bm25 in floors:
                        counts = talk.setdefault(f"set {which}, floors {dense} / {bm25:g}", [0, 0])
                        for prompt in prompts:
                            got = recall_for_prompt(
                                system, prompt, floor=dense, bm25_floor=bm25, now=now
                            )
                            counts[0] += bool(got.block)
                            counts[1] += 1
            finally:
                system.close()
    finally:
        memories.close()
    print(
        f"LoCoMo dev ({ds.n_queries} questions with evidence), model {embedder.model_id}, budget {DEFAULT_BUDGET} tokens"
    )
    print(
        "| split | what is handed over | evidence turn in it | nothing added | tokens added (mean) | questions |"
    )
    print("|---|---|---|---|---|---|")
    for (split, name), (found, empty, tokens, n) in sorted(rows.items()):
        print(
            f"| {split} | {name} | {found / n:.3f} | {empty / n:.3f} | {tokens / n:.0f} | {n:.0f} |"
        )
    print(
        f"\nsmall talk (sets A and B of {len(SMALL_TALK)} prompts × {len(ds.sessions)} memories; the defaults were chosen beside A): share given something"
    )
    for name, (added, n) in talk.items():
        print(f"  {name}: {added}/{n} = {added / n:.3f}")


def _request(system, now):  # type: ignore[no-untyped-def]
    from dataclasses import replace

    return replace(system.settings.search_request(), top_k=5, record_access=False, now=now)


def _add(
    rows: dict[tuple[str, str], list[float]],
    key: tuple[str, str],
    found: bool,
    empty: bool,
    tokens: int,
) -> None:
    row = rows.setdefault(key, [0.0, 0.0, 0.0, 0.0])
    row[0] += found
    row[1] += empty
    row[2] += tokens
    row[3] += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--speed", action="store_true", help="time the hook (default when nothing is chosen)"
    )
    parser.add_argument("--quality", action="store_true", help="LoCoMo dev and small talk")
    parser.add_argument(
        "--memory",
        type=Path,
        default=Path("/tmp/bench-ui"),
        help="where the SciFact memory is built once",
    )
    parser.add_argument("--rounds", type=int, default=60, help="prompts timed per way (default 60)")
    parser.add_argument(
        "--cold-every",
        type=int,
        default=4,
        help="time the hook without a helper every Nth round (each takes seconds)",
    )
    parser.add_argument(
        "--floors",
        default="0.83:8,0.83:0,0.85:0,0.87:0,0.83:10,0.84:8",
        help="dense:BM25 floor pairs to measure, comma-separated",
    )
    parser.add_argument(
        "--limit", type=int, default=None, help="questions per conversation (default: all)"
    )
    args = parser.parse_args()
    if args.quality:
        pairs = [tuple(float(x) for x in f.split(":")) for f in args.floors.split(",")]
        quality([(d, b) for d, b in pairs], args.limit)
    if args.speed or not args.quality:
        args.memory.mkdir(parents=True, exist_ok=True)
        speed(args.memory, args.rounds, args.cold_every)


if __name__ == "__main__":
    main()
