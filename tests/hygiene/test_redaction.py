"""The redaction step on text: each kind of secret becomes its marker, ordinary text stays."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_pipeline.hygiene.echo import echo_line, own_tool
from memory_pipeline.hygiene.private import fence
from memory_pipeline.hygiene.redactor import Redactor
from memory_pipeline.hygiene.secrets import find_secrets, marker
from memory_pipeline.sources.conversations import clip
from tests.hygiene.corpus import Maker, build, in_context

SECRETS = [*Maker(7).secrets(), Maker(7).private_key("RSA"), Maker(8).private_key("OPENSSH")]


@pytest.mark.parametrize("secret", SECRETS, ids=lambda s: s.kind)
def test_each_kind_becomes_its_marker_and_no_piece_of_it_stays(secret) -> None:  # type: ignore[no-untyped-def]
    written = in_context(secret) if secret.kind != "private-key" else secret.value
    done = Redactor().redact(f"before {written} after")
    assert dict(done.counts) == {secret.kind: 1}
    assert marker(secret.kind) in done.text
    assert not [p for p in secret.pieces(8) if p in done.text]
    assert done.text.startswith("before ") and done.text.endswith(" after")


def test_a_secret_written_twice_is_taken_both_times() -> None:
    token = Maker(3).secrets()[1].value  # a GitHub token
    done = Redactor().redact(f"GH={token}\nthen: git push https://x:{token}@github.com/o/r")
    assert token not in done.text and done.text.count(marker("github-token")) == 2


def test_a_private_key_shown_with_line_numbers_and_clipped_is_taken_to_its_last_line() -> None:
    key = Maker(5).private_key("OPENSSH")
    lines = key.value.splitlines()[:4]  # a tool's output cut before the END line
    numbered = "\n".join(f"{n + 1:>6}→{line}" for n, line in enumerate(lines))
    done = Redactor().redact(f"{numbered}\n")
    assert done.counts["private-key"] == 1
    assert not [p for p in key.pieces(8)[:20] if p in done.text]


@pytest.mark.parametrize(
    "text",
    [
        "commit 3f786850e387550fdab836ed7e6dc881de23001b merged",
        "id 123e4567-e89b-12d3-a456-426614174000 ok",
        "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b4b0b822cd15d6c15b0f00a08",
        'password = os.environ["DB_PASSWORD"]',
        "token_count=128",
        "api_key = settings.api_key",
        "max_tokens: 4096",
        "The password must be at least 12 characters.",
        "secret_name = my-app-db-credentials",
        "export PATH=/usr/local/bin:$PATH",
        'class_name="MemorySystemWithTokens"',
        "PASSWORD_MIN_LENGTH=12",
        'model: "sentence-transformers/all-MiniLM-L6-v2"',
        'key = "chunk_ids"',
        "TOKEN=$(gh auth token)",
        "The OpenAI key format begins with sk- and the GitHub one with ghp_.",
        "DB_PASSWORD=changeme",
        "[secret: github-token] was stored as a marker",
    ],
)
def test_ordinary_text_is_kept_as_written(text: str) -> None:
    done = Redactor().redact(text)
    assert (done.text, dict(done.counts)) == (text, {})


def test_an_allowed_value_is_kept_and_off_keeps_everything() -> None:
    example = "AKIA" + "IOSFODNN7EXAMPLE"  # the AWS documentation's own example key
    text = f"aws_access_key_id = {example}"
    assert Redactor().redact(text).counts["aws-access-key"] == 1
    assert Redactor.from_setting("on", f" {example} ,other").redact(text).text == text
    assert Redactor.from_setting("off").redact(text).text == text
    assert Redactor.from_setting("OFF").enabled is False


def test_a_secret_inside_a_private_span_goes_with_it_uncounted() -> None:
    token = Maker(4).secrets()[1].value
    done = Redactor().redact(f"x <private>{token}</private> y")
    assert done.text == "x  y" and dict(done.counts) == {"private": 1}


def test_what_the_hooks_hand_over_is_fenced_and_dropped_whole() -> None:
    block = "## Principles\n- keep the ledger locked\n"
    fenced = fence(block)
    assert fenced.startswith("<memory-recall>\n") and block.strip() in fenced
    done = Redactor().redact(f"Session context: {fenced}Then the user asked.")
    assert done.text == "Session context: \nThen the user asked."


@pytest.mark.parametrize(
    ("name", "ours"),
    [
        ("hybrid_search", "hybrid_search"),
        ("mcp__memory__hybrid_search", "hybrid_search"),
        ("mcp__memory-pipeline__get_document_chunks", "get_document_chunks"),
        ("mcp__work_notes__find_by_tag", "find_by_tag"),
        ("memory__hybrid_search", "hybrid_search"),
        ("memory.ingest_text", "ingest_text"),
        ("Bash", None),
        ("mcp__github__search_code", None),
        ("web_search", None),
        ("", None),
    ],
)
def test_the_memory_s_own_tools_are_known_by_their_base_name(name: str, ours: str | None) -> None:
    assert own_tool(name) == ours


def test_an_echo_line_names_the_tool_and_the_query() -> None:
    line = echo_line("hybrid_search", '{"query": "why  did we\\ndrop Redis?", "top_k": 5}')
    assert line == (
        '[memory hybrid_search for "why did we drop Redis?": '
        "its result came from this memory and is not stored again]"
    )
    assert "for" not in echo_line("index_health", {})


def test_a_clip_never_cuts_inside_a_word() -> None:
    token = Maker(9).secrets()[1].value
    clipped = clip(f"the token {token} was used", 20)
    assert clipped == "the token …"
    assert not find_secrets(clipped)


def test_the_hostile_corpus_holds_at_least_40_secrets_of_15_kinds(tmp_path: Path) -> None:
    corpus = build(tmp_path)
    assert len({s.value for s in corpus.secrets}) >= 40
    assert len({s.kind for s in corpus.secrets}) >= 15
    for path in corpus.files.values():
        text = path.read_text()
        assert all(s.core in text or s.kind == "private-key" for s in corpus.secrets)


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        # a name that says nothing, whose value holds a name that does
        (
            '{"command": "DB_PASSWORD=Xq7rT2vLp9Wk"}',
            '{"command": "DB_PASSWORD=[secret: password]"}',
        ),
        ("ok: SESSION_SECRET=Yc01O8sBA0aqoT5CRl22", "ok: SESSION_SECRET=[secret: secret]"),
        # a tool's input quoted as a JSON string: escaped quotes and line breaks
        (
            '{"command": "\\"api_key\\": \\"FcNG2369G1qKEWyZa6xGnfOd\\""}',
            '{"command": "\\"api_key\\": \\"[secret: api-key]\\""}',
        ),
        (
            '"DB_PASSWORD=abc12345XY\\nAPI_TOKEN=4zCOFV4YBABApURAT3R4\\n"',
            '"DB_PASSWORD=[secret: password]\\nAPI_TOKEN=[secret: token]\\n"',
        ),
    ],
)
def test_a_name_that_says_secret_is_found_inside_quoted_and_chained_text(
    text: str, kept: str
) -> None:
    assert Redactor().redact(text).text == kept


def test_detect_secrets_own_patterns_load_from_the_installed_library() -> None:
    from detect_secrets.plugins.github_token import GitHubTokenDetector

    from memory_pipeline.hygiene.secrets import _PLUGINS, _RULES

    library = [r for r in _RULES if r.priority == 3]
    assert len(_PLUGINS) == 21 and len(library) >= len(_PLUGINS)  # basic auth: url-password
    assert {r.pattern.pattern for r in library} >= {p.pattern for p in GitHubTokenDetector.denylist}


def test_a_tag_that_holds_a_secret_is_refused_without_repeating_it(tmp_path: Path) -> None:
    from memory_pipeline.embedding.base import HashingEmbedder
    from memory_pipeline.errors import InvalidInputError
    from memory_pipeline.system import MemorySystem
    from tests.conftest import make_settings

    token = Maker(11).secrets()[1].value
    system = MemorySystem(make_settings(tmp_path), embedder=HashingEmbedder())
    try:
        with pytest.raises(InvalidInputError) as refused:
            system.ingest_text("a note", "note", {"tags": ["ok", token]})
        assert "tag 2 of 2 looks like a secret (github-token)" in str(refused.value)
        assert token not in str(refused.value) and token[:12] not in str(refused.value)
        assert system.counts()["documents"] == 0
    finally:
        system.close()


def test_every_name_that_says_secret_holds_a_keyword_of_the_prefilter() -> None:
    from memory_pipeline.hygiene.secrets import _NAME_KEYWORDS, _NAME_WORDS

    assert [w for w in _NAME_WORDS if not any(k in w for k in _NAME_KEYWORDS)] == []


@pytest.mark.parametrize(
    "text",
    [
        # words of code: type annotations, keyword arguments passed through, constants
        "file_secret_settings: PydanticBaseSettingsSource,",
        "token_counter=token_counter, entity_mask2_token=entity_mask2_token,",
        'LAST_UPDATED_TIMESTAMP_METADATA_KEY = "dagster/last_updated_timestamp"',
        "- {key: memory_pipeline/writer, limit: 1}",
        "pass :paramref:`_sa.create_engine.json_serializer` to",
        # values to fill in
        "mysql+pymysql://<username>:<password>@<host>/<dbname>",
        "DB_PASSWORD=${DB_PASSWORD}",
        "api_token: {{ api_token }}",
        # names of models and alphabets, quoted
        'AutoTokenizer.from_pretrained("naver-hyperclovax/HyperCLOVAX-SEED-Think-14B")',
        '_PDB_CHAIN_TAGS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"',
    ],
)
def test_code_and_placeholders_are_not_secrets(text: str) -> None:
    done = Redactor().redact(text)
    assert (done.text, dict(done.counts)) == (text, {})


def test_this_project_s_own_code_and_docs_hold_no_secret() -> None:
    """A code corpus: the redaction step leaves all of it as it is (``<private>`` is
    written literally in the docs that explain it)."""
    root = Path(__file__).resolve().parents[2]
    paths = [
        p
        for folder in ("memory_pipeline", "serving", "docs", "bench")
        for p in sorted((root / folder).rglob("*"))
        if p.suffix in (".py", ".md", ".yaml")
        and "hygiene" not in p.parts
        and "_build" not in p.parts
    ]
    assert len(paths) > 150
    found = {}
    for path in paths:
        counts = Redactor().redact(path.read_text(encoding="utf-8")).counts
        counts.pop("private", None)
        counts.pop("memory-recall", None)
        if counts:
            found[str(path.relative_to(root))] = dict(counts)
    assert found == {}


def test_few_random_tokens_pass_for_words_of_code() -> None:
    """The price of precision on code: a random token that happens to read as an
    identifier (letters, then a few digits) is kept. Seeded, so the figures are fixed;
    docs/hygiene.md quotes them."""
    import random
    import string

    from memory_pipeline.hygiene.secrets import _identifier

    rng = random.Random(0)
    alphabet = string.ascii_letters + string.digits

    def share(length: int, n: int = 20_000) -> float:
        return sum(_identifier("".join(rng.choices(alphabet, k=length))) for _ in range(n)) / n

    assert share(12) < 0.05 and share(16) < 0.02 and share(24) < 0.005


# Texts made to stall a pattern: one prefix many times over, a long run of one character.
STALLERS = [
    "password_",
    "key ",
    "key" + " " * 50,
    "eyJ",
    "sk-ant-",
    "sk-proj-a",
    "AKC",
    "pypi-AgEIcHlwaS5vcmc",
    "ACCOUNTKEY=",
    "-----BEGIN PRIVATE KEY-----\n",
    "PuTTY-User-Key-File-2: ",
    "://a:",
    "<private>",
    '\\"api_key\\": \\"',
    "AbcAbc",
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("unit", STALLERS)
def test_a_text_made_to_stall_the_rules_is_read_in_linear_time(unit: str) -> None:
    """Every rule reads a text in time linear in its length: a pattern that took quadratic
    time here (detect-secrets' own JWT, OpenAI and npm patterns, its keyword patterns'
    three runs of spaces) would take minutes on these 0.5 MB and fail by the timeout."""
    text = unit * (500_000 // len(unit)) + " T3BlbkFJ _authToken -----END PRIVATE KEY-----"
    Redactor().redact(text)
