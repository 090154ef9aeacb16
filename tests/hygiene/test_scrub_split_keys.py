"""Scrub and a private key longer than a chunk: a memory filled with redaction off holds
an RSA-4096 PEM key, OpenSSH ed25519 and RSA keys and a PuTTY key, each cut over several
chunks (a file, a note forgotten in part to the archive, a conversation's turn). The
redactor, reading one chunk at a time, finds only the chunk with a key's ``BEGIN`` line;
``scrub`` reads a document's chunks together, so after ``--apply`` no line of any key is in
any file under the memory's folder and a second scrub finds nothing, while the base64 that
is no secret (a certificate, a public key, an image, checksums) and the words around the
keys stay."""

from __future__ import annotations

import base64
import datetime as dt
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import tantivy

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.hygiene.keys import key_lines, take_lines
from memory_pipeline.hygiene.secrets import find_secrets
from memory_pipeline.index.backends.local.sparse_files import BODY_FIELD
from memory_pipeline.memory.archive import iter_archive
from memory_pipeline.system import MemorySystem
from serving.harness import StoreLayout
from tests.hygiene.test_scrub import run_ok, scrub_json, settings_of

CHUNK = {"HYBRID_RAG_MAX_CHUNK_SIZE": "16", "HYBRID_RAG_CHUNK_OVERLAP": "4"}
# openssh-key-v1, cipher and kdf none, one key: how every unencrypted OpenSSH key begins
OPENSSH_HEAD = (
    b"openssh-key-v1\x00\x00\x00\x00\x04none\x00\x00\x00\x04none\x00\x00\x00\x00\x00\x00\x00\x01"
)


@dataclass(frozen=True)
class Key:
    name: str
    text: str
    lines: tuple[str, ...]  # its base64 lines, the needles no file may hold


def wrapped(data: bytes, width: int) -> list[str]:
    text = base64.b64encode(data).decode()
    return [text[at : at + width] for at in range(0, len(text), width)]


def pem_rsa_4096(rng: random.Random) -> Key:
    """A PKCS#1 RSA-4096 key's shape: ``MIIJKA…``, 48 lines of 64 and a shorter one."""
    body = wrapped(b"\x30\x82\x09\x28\x02\x01\x00\x02\x82\x02\x01\x00" + rng.randbytes(2336), 64)
    text = "\n".join(["-----BEGIN RSA PRIVATE KEY-----", *body, "-----END RSA PRIVATE KEY-----"])
    return Key("rsa-4096 pem", text, tuple(body))


def openssh(rng: random.Random, name: str, size: int) -> Key:
    body = wrapped(OPENSSH_HEAD + rng.randbytes(size), 70)
    text = "\n".join(
        ["-----BEGIN OPENSSH PRIVATE KEY-----", *body, "-----END OPENSSH PRIVATE KEY-----"]
    )
    return Key(name, text, tuple(body))


def putty(rng: random.Random) -> Key:
    public = wrapped(b"\x00\x00\x00\x07ssh-rsa" + rng.randbytes(268), 64)
    private = wrapped(rng.randbytes(880), 64)
    text = "\n".join(
        [
            "PuTTY-User-Key-File-3: ssh-rsa",
            "Encryption: none",
            "Comment: rsa-key-20250601",
            f"Public-Lines: {len(public)}",
            *public,
            f"Private-Lines: {len(private)}",
            *private,
            f"Private-MAC: {rng.randbytes(32).hex()}",
        ]
    )
    return Key("putty rsa", text, (*public, *private))


def decoys(rng: random.Random) -> dict[str, str]:
    """Base64 that is no secret, each with the text it stands in."""
    cert = "\n".join(wrapped(b"\x30\x82\x05\x10" + rng.randbytes(1290), 64))
    blob = "\n".join(wrapped(rng.randbytes(600), 64))
    public = base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + rng.randbytes(32))
    image = base64.b64encode(b"\x89PNG\r\n\x1a\n" + rng.randbytes(300)).decode()
    sha = base64.b64encode(rng.randbytes(64)).decode()
    return {
        "certificate": f"-----BEGIN CERTIFICATE-----\n{cert}\n-----END CERTIFICATE-----",
        "test fixture": f"The fixture's bytes, base64:\n\n{blob}",
        "public key": f"ssh-ed25519 {public.decode()} ana@harbour",
        "image": f"![logo](data:image/png;base64,{image})",
        "lockfile": f'left-pad@^1.3.0:\n  integrity sha512-{sha}\n  resolved "https://r.example/l"',
    }


@dataclass(frozen=True)
class Filled:
    layout: StoreLayout
    env: dict[str, str]
    keys: tuple[Key, ...]
    decoys: dict[str, str]


def markdown(title: str, parts: list[tuple[str, str]]) -> str:
    """A file of sections, each a paragraph of prose and a fenced block."""
    out = [f"# {title}"]
    for prose, block in parts:
        out += [prose, "```", block, "```"]
    return "\n\n".join(out) + "\n"


def conversation(key: Key) -> dict[str, Any]:
    turns = [
        {"speaker": "Ana", "text": "Where is the backup server's key for the lighthouse job?"},
        {"speaker": "Ben", "text": f"Here it is, pasted from my laptop:\n\n{key.text}\n\nKeep it safe."},
        {"speaker": "Ana", "text": "Thanks, the lighthouse backup runs again tonight."},
    ]  # fmt: skip
    return {
        "conversation_id": "lighthouse",
        "title": "The lighthouse backup",
        "sessions": [
            {"session_id": "1", "date": dt.datetime.now(dt.UTC).isoformat(), "turns": turns}
        ],
    }


def fill(root: Path) -> Filled:
    rng = random.Random(20250601)
    rsa, ed25519, long_rsa, ppk = (
        pem_rsa_4096(rng),
        openssh(rng, "ed25519 openssh", 260),
        openssh(rng, "rsa openssh", 2560),
        putty(rng),
    )
    kept = decoys(rng)
    layout = StoreLayout(root / "memory")
    env = layout.env(HYBRID_RAG_REDACT="off", **CHUNK)
    files = root / "in"
    files.mkdir(parents=True)
    deploy = files / "deploy.md"
    deploy.write_text(
        markdown(
            "Harbour deploy",
            [
                ("The harbour bastion is reached with the deploy key below.", rsa.text),
                ("The bastion's TLS certificate, for the record.", kept["certificate"]),
                ("Ana's public key, to add to authorized_keys.", kept["public key"]),
                ("The release pipeline keeps an ed25519 key for the mirror.", ed25519.text),
                (kept["image"], kept["lockfile"]),
                ("The checksum service's sample input.", kept["test fixture"]),
            ],
        )
    )
    run_ok("ingest", str(deploy), env=env)
    transcript = files / "lighthouse.json"
    transcript.write_text(json.dumps(conversation(long_rsa)))
    run_ok("import", "transcript", str(transcript), env=env)
    # a note, half of its chunks forgotten to the archive
    settings = settings_of(layout, redact="off", max_chunk_size=16, chunk_overlap=4)
    system = MemorySystem(settings, embedder=HashingEmbedder())
    try:
        note = f"The windmill router takes a PuTTY key.\n\n{ppk.text}\n\nThe windmill is patched."
        doc = system.ingest_text(note, "windmill router", {"importance": 0.9}).doc_id
        system.update_index()
        # every other chunk of the note goes, the rest of the memory stays
        with system.store.write() as w:
            w.execute(
                sa.text(
                    "UPDATE chunks SET importance = CASE WHEN doc_id = :d AND chunk_index % 2 = 1"
                    " THEN 0.01 ELSE 1.0 END"
                ),
                {"d": doc},
            )
        weights = system.settings.memory_params(importance_threshold=0.5)
        report = system.run_forgetting_batch(
            memory=weights, dry_run=False, force=True, grace_days=0, max_fraction=1.0
        )
        assert 0 < report.archived < report.live_chunks / 4, report.render()
    finally:
        system.close()
    return Filled(layout, env, (rsa, ed25519, long_rsa, ppk), kept)


def stored_texts(layout: StoreLayout) -> list[tuple[str, int, str]]:
    """(document, chunk index, text) of every chunk, in the store and in the archive (its
    chunk index negative: ``-1 - index``)."""
    engine = sa.create_engine(f"sqlite:///{layout.db}")
    try:
        with engine.connect() as c:
            rows = c.execute(sa.text("SELECT doc_id, chunk_index, content FROM chunks")).all()
    finally:
        engine.dispose()
    archived = [
        (r["doc_id"], -1 - r["chunk_index"], r["content"])
        for _, r, _ in iter_archive(layout.archive / "chunks_archive.jsonl")
        if r is not None
    ]
    return [(d, i, t) for d, i, t in rows] + archived


def lines_left(layout: StoreLayout, key: Key) -> int:
    texts = [t for _, _, t in stored_texts(layout)]
    return sum(any(line in t for t in texts) for line in key.lines)


def leaks_in_files(root: Path, keys: tuple[Key, ...]) -> list[str]:
    needles = {line.encode(): key.name for key in keys for line in key.lines if len(line) >= 20}
    out = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        out += sorted({f"{path.relative_to(root)}: {k}" for n, k in needles.items() if n in data})
    return out


def leaks_in_terms(index: Path, keys: tuple[Key, ...]) -> list[str]:
    lines = [line.lower() for key in keys for line in key.lines]
    out: list[str] = []
    folders = {p.parent for p in index.rglob("*.term")}
    assert folders, f"no BM25 index under {index}"
    for folder in sorted(folders):
        for term, _ in tantivy.Index.open(str(folder)).searcher().terms_with_prefix(BODY_FIELD, ""):
            if len(term) >= 10 and any(term in line for line in lines):
                out.append(f"{folder.name}: {term}")
    return out


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Filled:
    return fill(tmp_path_factory.mktemp("split-keys"))


def test_each_key_is_cut_over_chunks_the_redactor_reads_one_at_a_time(filled: Filled) -> None:
    """What the test stands on: every key over two chunks or more, some of them chunks with
    no BEGIN line, in which the redactor alone finds no private key (it may take a line
    that stands alone as a random token, but not the key's short last line, nor name it)."""
    texts = stored_texts(filled.layout)
    for key in filled.keys:
        holding = [t for _, _, t in texts if any(line in t for line in key.lines)]
        assert len(holding) >= 2, key.name
        kinds = [{f.kind for f in find_secrets(t)} for t in holding]
        assert any("private-key" not in k for k in kinds), key.name
    archived = [t for _, i, t in texts if i < 0]
    assert any(line in t for t in archived for line in filled.keys[-1].lines), "and archived"


def test_scrub_takes_every_line_of_a_split_key_and_only_those(filled: Filled) -> None:
    layout, env, keys = filled.layout, filled.env, filled.keys
    keyless = {
        (doc, index): text
        for doc, index, text in stored_texts(layout)
        if not any(line in text for key in keys for line in key.lines) and "PRIVATE" not in text
    }
    before = {key.name: lines_left(layout, key) for key in keys}
    assert all(before[key.name] == len(key.lines) for key in keys), before
    assert leaks_in_files(layout.root, keys), "the test means a memory that holds the keys"

    found = scrub_json("--all-spaces", env=env)
    # a key's line that stands alone in a chunk may be named a random token by the redactor
    # before the key is recognised around it: either way the chunk is named
    taken = {"private-key", "random-token"}
    places = {p["place"].rsplit(":", 1)[0] for p in found["places"] if p["kind"] in taken}
    for doc, index, text in stored_texts(layout):
        if any(line in text for key in keys for line in key.lines):
            named = f"document {doc}, chunk {index}" if index >= 0 else "archive line"
            assert any(named in p for p in places), (doc, index)

    applied = scrub_json("--apply", "--all-spaces", env=env)
    assert applied["applied"] and applied["found"] == found["found"]
    after = {key.name: lines_left(layout, key) for key in keys}
    assert after == dict.fromkeys(before, 0), (before, after)
    assert leaks_in_files(layout.root, keys) == []
    assert leaks_in_terms(layout.index, keys) == []
    again = scrub_json("--all-spaces", env=env)
    assert again["found"] == 0 and again["places"] == [], again

    # what is no secret is kept (a chunk that held no key as it was, every long word of
    # base64 that is no key's), the words around the keys are found
    now = {(doc, index): text for doc, index, text in stored_texts(layout)}
    assert {at: now[at] for at in keyless} == keyless
    stored = "\n".join(now.values())
    for name, decoy in filled.decoys.items():
        pieces = re.findall(r"[A-Za-z0-9+/=]{20,}", decoy)
        assert pieces and all(w[:20] in stored for w in pieces), name
    system = MemorySystem(settings_of(layout), embedder=HashingEmbedder())
    try:
        request = system.settings.search_request(top_k=5, record_access=False)
        for words in ("harbour bastion deploy key", "lighthouse backup", "windmill patched"):
            hits = system.query(words, request).hits
            assert any(words.split()[0] in hit.content for hit in hits), words
        assert system.index_health().healthy
    finally:
        system.close()


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("-----BEGIN CERTIFICATE-----\n" + "\n".join(["QUJD" * 16] * 3) + "\n-----END CERTIFICATE-----", True),
        ("A data blob:\n" + "\n".join(["QUJD" * 16] * 3) + "\nQUJDQUJD", True),
        ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ" + "x" * 30 + " me@host", True),
        ("-----BEGIN PRIVATE KEY-----\n" + "\n".join(["QUJD" * 16] * 3), False),
        ("\n".join(["QUJD" * 16] * 3) + "\nQUJD==\n-----END PRIVATE KEY-----", False),
        ("Private-Lines: 3\n" + "\n".join(["QUJD" * 16] * 2) + "\nQUJDQUJD12", False),
        # as a tool shows a file (line numbers), as a JSON string holds it
        ("\n".join(f"  {n}→{'QUJD' * 16}" for n in range(5, 8)) + "\n  8→-----END PRIVATE KEY-----", False),
        ('{"text": "' + "\\n".join(["QUJD" * 16] * 2 + ["-----END PRIVATE KEY-----"]) + '"}', False),
    ],
)  # fmt: skip
def test_a_run_of_base64_is_a_key_s_only_beside_a_key_s_own_line(text: str, kept: bool) -> None:
    taken, n = take_lines(text, key_lines([text]))
    assert (taken == text) is kept and (n == 0) is kept, taken
