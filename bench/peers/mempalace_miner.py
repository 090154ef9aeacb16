"""MemPalace 3.11 mining a folder of transcripts (``mempalace mine DIR --mode convos``,
called as ``convo_miner.mine_convos``): each file in its transcript format (``> `` marks
the first speaker's turns), chunked by exchange (a ``>`` turn and the reply after it,
at most 800 characters a drawer), embedded by chromadb's ONNX all-MiniLM-L6-v2 and
upserted into its Chroma palace, then its hallways and full-text check.

    HOME=… python bench/peers/mempalace_miner.py CONVO_FOLDER PALACE_FOLDER

HOME must hold ``.cache/chroma/onnx_models/all-MiniLM-L6-v2/onnx`` (``minilm_onnx.py``):
chromadb otherwise downloads it.
"""

from __future__ import annotations

import sys

from _timing import report, timed


def main(convo_dir: str, palace: str) -> None:
    def load():  # type: ignore[no-untyped-def]
        from mempalace.embedding import get_embedding_function

        embedder = get_embedding_function()
        embedder(["warm up the model"])
        return embedder

    _, *load_times = timed(load)
    from mempalace.convo_miner import mine_convos
    from mempalace.palace import get_collection

    _, *ingest_times = timed(lambda: mine_convos(convo_dir, palace, wing="locomo"))
    stored = get_collection(palace, create=False).count()
    report(tuple(load_times), tuple(ingest_times), stored=stored)  # type: ignore[arg-type]


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
