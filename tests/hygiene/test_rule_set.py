"""gitleaks' rule set as the redaction step runs it: every rule loads on RE2 and finds its own
samples, the step catches what those samples hold (in context and bare), URL passwords of
any legal character, and keeps hashes, ids and lockfiles as written."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import random
import re
import string
import tomllib
import uuid
from pathlib import Path
from re import _parser as sre_parse  # type: ignore[attr-defined]

import pytest

from memory_pipeline.hygiene import rule_set, secrets
from memory_pipeline.hygiene.redactor import Redactor

DATA = Path(__file__).parent / "data" / "gitleaks_samples.jsonl.gz"
RULES = Path(secrets.__file__).parent / "rules" / "gitleaks.toml"
# Samples of rules the bundled file does not hold: a rule that judges a file's path only,
# and rules whose samples gitleaks keeps beside a rule it no longer ships.
ABSENT = {"pkcs12-file", "trello-access-token", "gcp-service-account", "square-secret"}


def samples() -> list[dict[str, str | None]]:
    with gzip.open(DATA, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def left(secret: str, text: str, width: int = 8, around: str = "") -> bool:
    """Whether ``width`` characters in a row of ``secret`` are still in ``text``, but for
    those the text ``around`` the secret holds anyway (a provider's name before it)."""
    width = min(width, len(secret))
    pieces = (secret[i : i + width] for i in range(len(secret) - width + 1))
    return any(p in text and p not in around for p in pieces)


def test_every_gitleaks_rule_with_a_regex_loads_on_re2() -> None:
    config = tomllib.loads(RULES.read_text())
    with_regex = [r["id"] for r in config["rules"] if "regex" in r]
    loaded = rule_set.gitleaks()
    assert [r.id for r in loaded.rules] == with_regex and len(with_regex) >= 220
    assert {r["id"] for r in config["rules"]} - set(with_regex) == {"pkcs12-file"}
    assert all(type(r.pattern).__module__.startswith("re2") for r in loaded.rules)


def test_every_rule_finds_each_of_its_own_samples() -> None:
    rules = {r.id: r for r in rule_set.gitleaks().rules}
    allow = rule_set.gitleaks().allowlist
    missed, judged = [], 0
    for sample in samples():
        rule = rules.get(str(sample["rule"]))
        if rule is None:
            assert sample["rule"] in ABSENT
            continue
        judged += 1
        text, secret = str(sample["text"]), sample["secret"]
        hits = list(rule_set.RuleSet((rule,), allow).find(text))
        if not hits or (
            secret
            and not any(
                secret in text[h.start : h.end] or text[h.start : h.end] in secret for h in hits
            )
        ):
            missed.append((rule.id, text))
    assert judged >= 4000 and missed == []


def test_the_redaction_step_catches_gitleaks_samples_in_context_and_bare() -> None:
    """The floors are the issue's targets; ``bench/bench_secret_recall.py`` prints the
    figures and, rule by rule, what is missed."""
    redactor = Redactor()
    rules = {r.id: r for r in rule_set.gitleaks().rules}
    allow = rule_set.gitleaks().allowlist
    caught = total = bare_caught = bare_total = 0
    for sample in samples():
        text, secret = str(sample["text"]), sample["secret"]
        if secret is None:
            rule = rules.get(str(sample["rule"]))
            if rule is None:
                continue
            found = rule_set.RuleSet((rule,), allow).find(text)
            wanted = [text[h.start : h.end] for h in found]
        else:
            wanted = [secret]
        kept = redactor.redact(text).text
        total += 1
        caught += not any(left(w, kept, around=text.replace(w, " ")) for w in wanted)
        if secret is not None:
            bare_total += 1
            bare_caught += not left(secret, redactor.redact(f"I used {secret} today.").text)
    assert total >= 4000 and caught / total >= 0.95
    assert bare_total >= 3500 and bare_caught / bare_total >= 0.50


@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("postgres://app:cyOfrvnzxt!xcvywyX@db/x", "cyOfrvnzxt!xcvywyX"),
        (
            "DATABASE_URL=mysql://u:Tr0ub4dor&3-horse-battery@db:3306/app",
            "Tr0ub4dor&3-horse-battery",
        ),
        ("REDIS_URL=redis://:Ns8qUomBP7PEJI1Mz7QL@cache:6379/0", "Ns8qUomBP7PEJI1Mz7QL"),
        ("amqp://guest:p$ss(w)rd*+,;=x@rabbit:5672/", "p$ss(w)rd*+,;=x"),
        ("mongodb+srv://admin:it's-%40-s3cret@cluster0.example.net/db", "it's-%40-s3cret"),
        ("https://deploy:ghx9Q2pLr7Ws@git.example.com/org/repo.git", "ghx9Q2pLr7Ws"),
        ("ftp://backup:k9#Rt2=vQ@files.example.org/", None),  # '#' ends the authority
        ('"url": "postgresql+psycopg://memory:s3cr!t-pw@db.example/mem"', "s3cr!t-pw"),
    ],
)
def test_every_legal_url_password_is_taken_whole(text: str, password: str | None) -> None:
    done = Redactor().redact(text)
    if password is None:
        return
    outside = secrets.MARKER_RE.sub("", done.text)
    assert password not in done.text and not left(password, outside, 4)
    assert "[secret: url-password]" in done.text
    assert done.text.count("@") == text.count("@")  # the host is kept


@pytest.mark.parametrize(
    "text",
    [
        "postgres://localhost:5432/app",
        "ssh://git@github.com:22/org/repo",
        "postgres://app:${DB_PASSWORD}@db/app",
        "redis://:<password>@cache:6379",
        "see https://example.com/a:b@c for details",  # no authority holds the ':'
    ],
)
def test_a_url_without_a_password_is_kept(text: str) -> None:
    assert Redactor().redact(text).text == text


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("curl -u admin:S3cr3tPassw0rd https://api.example.com", "curl-auth-user"),
        ("Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l", "basic-auth"),
        ("the secret is wJalrXUtnFEMI/K7MDENG/bPxRfiCYzK7 ok", "secret"),
        ("my api key was k3j9x0q2m1z8p4w7 yesterday", "secret"),
        (
            "hvs.CAESIJlWh8Uq0Z0mVbXkT2qYkE3b3kS7y0uZtX0yFqWqP9FkGh4KHGh2cy5WTnRnS0ZwSjJ2Y0dUZ3"
            "FpcVl6eFN0Yk4xQ2hLNFhXMkZ0Wg",
            None,
        ),
        ("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", None),
        ("sgp_a0d7ccb4f752ea73_6f6b2b5a7e49cb3f7e1d7d8f01c9e2a0a4f5b6c7", None),
        ("AGE-SECRET-KEY-1QQPQZXWQ8ZFKSAS4JTZ8Y2G9XPGFSC7TQRDNNX7W2NXSQ2A8PVFQZ0N4ZK", None),
    ],
)
def test_providers_and_prose_are_taken_without_a_telling_name(text: str, kind: str | None) -> None:
    done = Redactor().redact(text)
    assert done.changed, text
    if kind is not None:
        assert kind in done.counts


def _lockfile(n: int = 40, seed: int = 0) -> str:
    rng = random.Random(seed)
    entries = {}
    for i in range(n):
        digest = base64.b64encode(hashlib.sha512(rng.randbytes(32)).digest()).decode()
        entries[f"node_modules/pkg-{i}"] = {
            "version": f"1.{i}.0",
            "resolved": f"https://registry.npmjs.org/pkg-{i}/-/pkg-{i}-1.{i}.0.tgz",
            "integrity": f"sha512-{digest}",
        }
    return json.dumps({"lockfileVersion": 3, "packages": entries}, indent=2)


def _keep_cases() -> list[str]:
    rng = random.Random(1)
    sha256 = hashlib.sha256(b"x").hexdigest()
    sha1 = hashlib.sha1(b"x").hexdigest()
    sri = base64.b64encode(hashlib.sha384(b"x").digest()).decode()
    png = base64.b64encode(rng.randbytes(120)).decode()
    return [
        _lockfile(),
        f'<script src="app.js" integrity="sha384-{sri}" crossorigin="anonymous"></script>',
        f'cache_key = "{sha256}"',
        f"idempotency_key: {uuid.UUID(int=rng.getrandbits(128))}",
        f"commit {sha1}\nAuthor: A <a@example.com>",
        f"git checkout {sha1[:12]} && git cherry-pick {sha1}",
        f'<img src="data:image/png;base64,{png}">',
        "GET /items?page_token=abc123&limit=50",
        "request_id=7f3a9c2e-1b4d-4e8f-9a6b-3c2d1e0f9a8b",
        "python3.11 -m pip install onnxruntime==1.32.0 faiss-cpu==1.15.0",
        "the alleles Gln356Pro871Glu1038Ser1613 and rs5883T/rs9930761C were studied",
        "https://i.redd.it/6a9y8ycad0ga1.jpg",
    ]


@pytest.mark.parametrize("text", _keep_cases(), ids=lambda t: t[:30])
def test_hashes_ids_lockfiles_and_data_are_kept_as_written(text: str) -> None:
    done = Redactor().redact(text)
    assert done.text == text, done.counts


def test_a_query_string_token_ends_at_its_field() -> None:
    done = Redactor().redact("GET /items?page_token=Qm9vdGggc2VjcmV0IGhlcmUx&limit=50")
    assert done.text == "GET /items?page_token=[secret: token]&limit=50"


# --------------------------------------------------------------------------- linear time
def _width(pattern: re.Pattern[str]) -> int:
    return int(sre_parse.parse(pattern.pattern, pattern.flags).getwidth()[1])


def test_every_pattern_is_linear_by_construction() -> None:
    """A pattern on RE2 runs in time linear in the text (RE2's automata). One on Python's
    engine is linear when its matches are bounded in width (each start costs at most a
    constant): every one is, but the private-key rule, whose unbounded tail (a key's base64
    lines) is read once, never from inside itself (it stops at the next BEGIN line)."""
    on_python = [r for r in secrets._RULES if isinstance(r.pattern, re.Pattern)]
    unbounded = [r.kind for r in on_python if _width(r.pattern) >= sre_parse.MAXREPEAT]
    assert unbounded == ["private-key"]
    assert {r.kind for r in on_python} <= {"private-key", "gitlab-token"}
    for pattern in (secrets._ASSIGN, secrets._QUOTED, secrets._NAME_HINT):
        assert _width(pattern) < 10_000
    assert len(secrets._RULES) - len(on_python) >= 40


@pytest.mark.timeout(300)
def test_every_gitleaks_keyword_many_times_over_is_read_in_linear_time() -> None:
    """A text that wakes every rule at once: each rule's keywords followed by characters its
    secrets are made of, over and over. A rule that rescanned from each keyword would take
    minutes here; bench/bench_redaction_growth.py times each rule at 1x and 4x."""
    units = [k + "aZ09_-+/=.bQ " for r in rule_set.gitleaks().rules for k in r.keywords]
    unit = "".join(units)
    text = unit * (400_000 // len(unit) + 1)
    Redactor().redact(text)


def test_a_megabyte_of_one_token_is_taken_once() -> None:
    """One repeated token prefix over a megabyte: its rule finds one run, which is not
    looked for again (the automaton for values seen once is given none that long)."""
    unit = "pypi-AgEIcHlwaS5vcmc"
    text = unit * (1_048_576 // len(unit))
    done = Redactor().redact(text)
    assert unit not in done.text


def test_many_distinct_secrets_are_each_taken() -> None:
    rng = random.Random(3)
    alphabet = string.ascii_letters + string.digits
    values = ["".join(rng.choices(alphabet, k=32)) for _ in range(3000)]
    text = "".join(f"SERVICE_{i}_API_TOKEN={v}\n" for i, v in enumerate(values))
    text += "echo " + " ".join(values[::100])  # each written again, with no name
    done = Redactor().redact(text)
    assert not any(v in done.text for v in values)
