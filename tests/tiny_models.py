"""Tiny, real Hugging Face models built offline for tests.

The tests must exercise the genuine ``sentence_transformers.CrossEncoder`` loading and
scoring path without network access and without a multi-hundred-MB checkpoint, so this
helper builds a ~0.4 MB BERT cross-encoder from scratch: a WordPiece vocabulary made
from a fixed text, a 2-layer BERT with a one-logit classification head, and a few
seconds of training on synthetic (query, passage) pairs so that the scores *mean*
something ("passage contains the query word" scores higher than "it does not").
Everything is seeded, so two builds give the same weights on the same machine.
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path
from typing import Any

# Set before transformers is imported so nothing in here can reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch
from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import WordPiece
from transformers import (  # type: ignore[attr-defined]  # lazy export, unseen by mypy
    BertConfig,
    BertForSequenceClassification,
    BertTokenizerFast,
)

SEED = 1234
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

# Source of the vocabulary: plain lowercase words, each a whole WordPiece token.
_TEXT = """
the agent remembers what the user said about the garden and the kitchen last week
memory search finds notes about travel plans budget meetings music books and coffee
a hybrid retrieval system mixes dense vectors with keyword scores to rank passages
alice likes tea bob prefers jazz carol went hiking in the mountains during summer
the project deadline moved to friday because the server migration needs more time
"""
WORDS: tuple[str, ...] = tuple(sorted(set(_TEXT.split())))


def build_vocab() -> dict[str, int]:
    """Special tokens first (BERT convention: [PAD]=0), then the sorted word list."""
    tokens = [*SPECIAL_TOKENS, *WORDS]
    return {tok: i for i, tok in enumerate(tokens)}


def build_tokenizer(vocab: dict[str, int]) -> BertTokenizerFast:
    """A BERT-style WordPiece tokenizer built with the ``tokenizers`` library."""
    backend = Tokenizer(WordPiece(vocab, unk_token="[UNK]"))
    backend.normalizer = normalizers.BertNormalizer(lowercase=True)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.decoder = decoders.WordPiece(prefix="##")
    # Pair template gives the passage token_type_id 1, as BERT cross-encoders expect.
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    # ``tokenizer_object`` makes the wrapper use our backend as is; ``vocab`` is passed too
    # because transformers 5's BertTokenizer otherwise keeps a stale 5-token ``_vocab``.
    return BertTokenizerFast(
        vocab=vocab,
        tokenizer_object=backend,
        do_lower_case=True,
        model_max_length=512,
    )


def _synthetic_pairs(rng: random.Random, n: int) -> list[tuple[str, str, float]]:
    """Balanced (query, passage, label) pairs: label 1 when the passage holds the query word.

    Positives *replace* a passage word rather than insert one so both classes have the
    same length distribution; otherwise the model learns "longer passage = relevant".
    Short passages keep the match signal strong relative to the [CLS] average.
    """
    pairs: list[tuple[str, str, float]] = []
    for i in range(n):
        query = rng.choice(WORDS)
        # With replacement: repeated passage words teach "copy in the *other* segment",
        # not merely "some token occurs twice".
        passage = rng.choices([w for w in WORDS if w != query], k=rng.randint(2, 10))
        positive = i % 2 == 0
        if positive:
            passage[rng.randrange(len(passage))] = query
        pairs.append((query, " ".join(passage), 1.0 if positive else 0.0))
    return pairs


def _encode(
    tokenizer: BertTokenizerFast, batch: list[tuple[str, str, float]]
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    enc = tokenizer(
        [q for q, _, _ in batch], [p for _, p, _ in batch], padding=True, return_tensors="pt"
    )
    return dict(enc), torch.tensor([y for _, _, y in batch])


def _init_for_matching(model: BertForSequenceClassification, scale: float = 1.0) -> None:
    """Give layer 0 a head start on "same token in the other segment" detection.

    From a plain random init this tiny BERT sits on the 0.693 loss plateau for thousands
    of steps. With query = key = scale * I the first attention layer already attends
    from each token to copies of itself (dot product of identical embeddings), so
    training only has to learn to read the segment mix out of it: a few hundred steps.
    scale=1 keeps that attention soft; at 2 the softmax saturates and gradients vanish.
    Position embeddings start at zero because relevance here does not depend on word
    order and random position vectors would blur the identity match.
    """
    with torch.no_grad():
        model.bert.embeddings.position_embeddings.weight.zero_()
        # Any: torch's Module.__getattr__ typing cannot follow HF submodule attributes.
        layer0: Any = model.bert.encoder.layer[0]
        attn = layer0.attention.self
        eye = torch.eye(model.config.hidden_size) * scale
        attn.query.weight.copy_(eye)
        attn.key.weight.copy_(eye)
        attn.query.bias.zero_()
        attn.key.bias.zero_()


def _accuracy(
    model: BertForSequenceClassification, enc: dict[str, torch.Tensor], y: torch.Tensor
) -> float:
    model.eval()
    with torch.no_grad():
        logits = model(**enc).logits.squeeze(-1)
    model.train()
    return float(((logits > 0).float() == y).float().mean())


def _train(
    model: BertForSequenceClassification,
    tokenizer: BertTokenizerFast,
    *,
    max_steps: int,
    batch_size: int,
    seed: int,
    target_accuracy: float = 0.99,
    give_up_at: int = 400,
) -> tuple[int, float]:
    """AdamW on BCE until a fixed held-out set reaches ``target_accuracy``.

    Stops early on success, and at ``give_up_at`` steps if the held-out accuracy is
    still near chance (the run fell into the constant-0.5 collapse; a fresh init is
    cheaper than waiting). Deterministic: data, init and check points all follow
    ``seed``. Returns (steps, held-out accuracy).
    """
    rng = random.Random(seed)
    eval_enc, eval_y = _encode(tokenizer, _synthetic_pairs(random.Random(seed + 1), 256))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    # Short linear warm-up: full-rate Adam steps straight from init collapse more runs.
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 50))
    loss_fn = torch.nn.BCEWithLogitsLoss()
    model.train()
    accuracy = 0.0
    step = 0
    while step < max_steps:
        enc, labels = _encode(tokenizer, _synthetic_pairs(rng, batch_size))
        loss = loss_fn(model(**enc).logits.squeeze(-1), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        step += 1
        if step % 25 == 0:
            accuracy = _accuracy(model, eval_enc, eval_y)
            if accuracy >= target_accuracy or (step >= give_up_at and accuracy < 0.75):
                break
    model.eval()
    return step, accuracy


def _new_model(
    vocab: dict[str, int], hidden_size: int, num_heads: int
) -> BertForSequenceClassification:
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=hidden_size,
        num_hidden_layers=2,
        num_attention_heads=num_heads,
        intermediate_size=2 * hidden_size,
        # 512 positions so a reranker's default max_length never indexes out of range.
        max_position_embeddings=512,
        pad_token_id=vocab["[PAD]"],
        # No dropout: the 1-logit head must learn fast and give repeatable scores.
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    config.num_labels = 1  # one relevance logit per pair; the CrossEncoder applies sigmoid
    return BertForSequenceClassification(config)


def build_tiny_cross_encoder(
    path: Path,
    *,
    train: bool = True,
    max_train_steps: int = 1200,
    max_attempts: int = 3,
    batch_size: int = 32,
    seed: int = SEED,
    hidden_size: int = 64,
    num_heads: int = 2,
) -> Path:
    """Build a tiny BERT cross-encoder in ``path``, loadable by ``CrossEncoder(str(path))``.

    2 layers, 2 heads, hidden 64 (~108k parameters, ~0.43 MB). Hidden 64 rather than 32
    because with 2 heads of 16 dims the 59 random word embeddings overlap enough that
    the model confuses some word pairs; 32-dim heads separate them. ``train=False``
    keeps random (deterministic) weights. With training, up to ``max_attempts`` seeded
    inits are tried until one reaches >= 95 % held-out accuracy (each stops early at
    99 %); with the default seed the first one does, in 250 steps. Stats go to
    ``tiny_model_info.json`` beside the weights (CrossEncoder ignores it). Returns ``path``.
    """
    started = time.perf_counter()
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    vocab = build_vocab()
    tokenizer = build_tokenizer(vocab)
    torch.manual_seed(seed)
    model = _new_model(vocab, hidden_size, num_heads)
    info: dict[str, object] = {"seed": seed, "trained": train}
    if train:
        # One thread: CPU kernels may split reductions differently per thread count, and
        # identical weights across builds matter more here than a second of speed.
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            for attempt in range(max_attempts):
                attempt_seed = seed + 7919 * attempt
                torch.manual_seed(attempt_seed)
                model = _new_model(vocab, hidden_size, num_heads)
                _init_for_matching(model)
                steps, accuracy = _train(
                    model,
                    tokenizer,
                    max_steps=max_train_steps,
                    batch_size=batch_size,
                    seed=attempt_seed,
                )
                info.update(attempt=attempt, train_steps=steps, heldout_accuracy=accuracy)
                if accuracy >= 0.95:
                    break
        finally:
            torch.set_num_threads(threads)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    info["build_seconds"] = round(time.perf_counter() - started, 3)
    (path / "tiny_model_info.json").write_text(json.dumps(info, indent=2) + "\n")
    return path
