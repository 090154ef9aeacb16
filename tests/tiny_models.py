"""Tiny, real Hugging Face models built offline for tests.

The tests must exercise the genuine ``sentence_transformers.CrossEncoder`` loading and
scoring path without network access and without a multi-hundred-MB checkpoint, so this
helper writes a ~1 MB BERT cross-encoder: a WordPiece vocabulary made from a fixed text
and a 2-layer, 1-head BERT whose weights are *set by construction*, not trained, so that
its score is a known function of the input:

* ``HIT_SCORE`` = sigmoid(``MATCH_LOGIT``) when some word of the query occurs in the
  passage (after BERT's lowercasing: "Coffee" matches "COFFEE"),
* ``MISS_SCORE`` = sigmoid(-``MATCH_LOGIT``) otherwise. Words outside the vocabulary
  become [UNK], which, like every special token, matches nothing.

Every decision inside the network is a softmax or tanh with a gap of >= 10 logits, so
the score sits within ~1e-6 of those two values; weights moved by 1e-3 or another CPU's
float kernels cannot change which one comes out. How (per layer, on the residual stream):

1. Embeddings write one feature per token: its word, or "special"; "is [CLS]" or not;
   its segment (token type 0 = query, 1 = passage). Each feature is a balanced pair of
   dimensions (+v, -v), and every token has the same three, so the embedding LayerNorm
   (mean 0 already) only scales them all by the same known factor.
2. Layer 0 attention: a passage word attends to a query copy of itself (same word +
   cross segment) over itself (same word) over other query tokens (cross segment only);
   query and special tokens attend to [CLS]. The value is "query word", so a passage
   word whose word the query holds carries ``match`` = 1, every other token 0.
3. Layer 1 attention: [CLS] attends to the tokens by their ``match``: if any is 1 it
   reads 1, else the average of zeros. That is written as ``any_match``.
4. The feed-forward blocks are zero; the pooler thresholds ``any_match`` at one half
   (tanh saturated to +-1), and the classifier multiplies by ``MATCH_LOGIT``.
"""

from __future__ import annotations

import math
import os
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

MATCH_LOGIT = 4.0
HIT_SCORE = 1 / (1 + math.exp(-MATCH_LOGIT))  # ~0.982: a query word is in the passage
MISS_SCORE = 1 - HIT_SCORE  # ~0.018: none is

# Residual-stream features, one balanced pair of dimensions each.
_FEATURES = (
    *(f"word:{w}" for w in WORDS),
    "special",
    "cls",
    "not_cls",
    "type0",
    "type1",
    "match",  # written by layer 0 on passage words that the query holds
    "any_match",  # written by layer 1 on [CLS]
)
_F = {name: i for i, name in enumerate(_FEATURES)}
_HIDDEN = 2 * len(_FEATURES)
# Logit gap of each attention decision (softmax weight of a loser <= e^-GAP each).
_GAP = 30.0
# Pooler pre-activation at "no match" / "match": tanh(10) = 1 - 4e-9.
_POOLER_SATURATION = 10.0


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


def _write(row: torch.Tensor, feature: str, value: float) -> None:
    """Add ``value`` to ``feature`` in a residual-stream vector (+value, -value)."""
    i = 2 * _F[feature]
    row[i] += value
    row[i + 1] -= value


def _read(weight: torch.Tensor, out: int, feature: str, gain: float) -> None:
    """Make output ``out`` of a linear layer read ``gain`` x ``feature``."""
    i = 2 * _F[feature]
    weight[out, i] += gain / 2
    weight[out, i + 1] -= gain / 2


def _new_model(vocab: dict[str, int]) -> BertForSequenceClassification:
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=_HIDDEN,
        num_hidden_layers=2,
        num_attention_heads=1,
        intermediate_size=4,  # the feed-forward blocks are zero; any width would do
        # 512 positions so a reranker's default max_length never indexes out of range.
        max_position_embeddings=512,
        pad_token_id=vocab["[PAD]"],
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    config.num_labels = 1  # one relevance logit per pair; the CrossEncoder applies sigmoid
    model = BertForSequenceClassification(config)
    with torch.no_grad():
        for weight in model.parameters():
            weight.zero_()
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.fill_(1.0)
    return model


def _set_weights(model: BertForSequenceClassification, vocab: dict[str, int]) -> None:
    """The construction described in the module docstring.

    After each LayerNorm a feature of a token whose stream holds three features reads
    ``k = sqrt(H / 6)`` (variance of three (+1, -1) pairs over H dims is 6/H); a fourth
    feature of the same size scales them all by ``s = sqrt(3/4)``. An attention score
    q.k / sqrt(H) between two read features with gains a and 1 is a * ``unit``.
    """
    k = math.sqrt(_HIDDEN / 6)
    s = math.sqrt(3 / 4)
    unit = k * k / math.sqrt(_HIDDEN)
    words = set(WORDS)
    # Any: torch's Module.__getattr__ typing cannot follow HF submodule attributes.
    bert: Any = model.bert
    with torch.no_grad():
        emb = bert.embeddings.word_embeddings.weight
        for token, i in vocab.items():
            _write(emb[i], f"word:{token}" if token in words else "special", 1.0)
            _write(emb[i], "cls" if token == "[CLS]" else "not_cls", 1.0)
        types = bert.embeddings.token_type_embeddings.weight
        _write(types[0], "type0", 1.0)
        _write(types[1], "type1", 1.0)

        # Layer 0: scores 3G passage word -> query copy, 2G -> itself, G -> other query
        # tokens; 3G (query tokens) or 4G+ (specials) -> [CLS]. Value: "query word".
        attn0 = bert.encoder.layer[0].attention
        q, key, v = attn0.self.query.weight, attn0.self.key.weight, attn0.self.value.weight
        for c, word in enumerate(WORDS):
            _read(q, c, f"word:{word}", 2 * _GAP / unit)
            _read(key, c, f"word:{word}", 1.0)
        cross, sink = len(WORDS), len(WORDS) + 1
        _read(q, cross, "type1", _GAP / unit)
        _read(key, cross, "type0", 1.0)
        _read(q, sink, "type0", 3 * _GAP / unit)
        _read(q, sink, "special", 3 * _GAP / unit)
        _read(key, sink, "cls", 1.0)
        _read(v, 0, "type0", 1.0)
        _read(v, 0, "special", -1.0)
        out0 = attn0.output.dense.weight
        out0[2 * _F["match"], 0] = 1.0  # match = k on a matched passage word
        out0[2 * _F["match"] + 1, 0] = -1.0

        # Layer 1: [CLS] scores 2G on matched words (their match reads k*s), 0 elsewhere.
        attn1 = bert.encoder.layer[1].attention
        _read(attn1.self.query.weight, 0, "cls", 2 * _GAP / (s * unit))
        _read(attn1.self.key.weight, 0, "match", 1.0)
        _read(attn1.self.value.weight, 0, "match", 1.0 / s)
        out1 = attn1.output.dense.weight
        out1[2 * _F["any_match"], 0] = 1.0  # any_match = k on [CLS], reads k*s after LN
        out1[2 * _F["any_match"] + 1, 0] = -1.0

        # Pooler: +-saturation around half the "match" reading; classifier: +-MATCH_LOGIT.
        half = k * s / 2
        gain = _POOLER_SATURATION / half
        _read(bert.pooler.dense.weight, 0, "any_match", gain)
        bert.pooler.dense.bias[0] = -_POOLER_SATURATION
        model.classifier.weight[0, 0] = MATCH_LOGIT


def build_tiny_cross_encoder(path: Path) -> Path:
    """Write the constructed cross-encoder to ``path``, loadable by ``CrossEncoder(str(path))``.

    Scores ``HIT_SCORE`` for a passage that holds a query word, ``MISS_SCORE`` for one
    that does not (see the module docstring). No randomness and no training: two builds
    write the same bytes. Returns ``path``.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    vocab = build_vocab()
    model = _new_model(vocab)
    _set_weights(model, vocab)
    model.save_pretrained(path)
    build_tokenizer(vocab).save_pretrained(path)
    return path


def perturbed_copy(source: Path, target: Path, *, seed: int, scale: float = 1e-3) -> Path:
    """Copy the model in ``source`` to ``target`` with every weight moved by U(-scale, scale).

    A verdict that holds for the copies (a few seeds) does not hang on the last digits of
    the weights, so another CPU's float kernels cannot flip it either.
    """
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    model = BertForSequenceClassification.from_pretrained(source)
    noise = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for weight in model.parameters():
            weight.add_((torch.rand(weight.shape, generator=noise) * 2 - 1) * scale)
    model.save_pretrained(target)
    BertTokenizerFast.from_pretrained(source).save_pretrained(target)
    return target
