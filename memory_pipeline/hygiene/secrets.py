"""What a secret looks like, and where one is in a text (docs/hygiene.md, "Secrets").

The known formats are detect-secrets' own (its plugins' ``denylist`` regexes: AWS, GitHub,
GitLab, Slack, Stripe, Azure, JWTs, passwords in URLs, …), read from the installed library
so they stay as it keeps them. Written here is only what it lacks or finds too loosely for
text that is stored for good: the newer key formats (Anthropic, OpenAI project keys, Google,
Hugging Face, GitHub fine-grained), whole PEM/OpenSSH key blocks (detect-secrets finds the
``BEGIN`` line only), bearer tokens, ``KEY=value`` lines whose name says secret, and
high-entropy quoted strings (its entropy rule, narrowed to base64-like strings of 20+).

``find_secrets`` returns spans, never values; ``marker`` is what a span becomes.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from detect_secrets.plugins import (
    artifactory,
    aws,
    azure_storage_key,
    basic_auth,
    cloudant,
    discord,
    github_token,
    gitlab_token,
    ibm_cloud_iam,
    ibm_cos_hmac,
    jwt,
    mailchimp,
    npm,
    openai,
    pypi_token,
    sendgrid,
    slack,
    softlayer,
    square_oauth,
    stripe,
    telegram_token,
    twilio,
)

MARKER = "[secret: {kind}]"
#: A marker as it stands in a text (a scrub cuts a line at one).
MARKER_RE = re.compile(r"\[secret: [a-z0-9-]+\]")


def marker(kind: str) -> str:
    """What a secret of ``kind`` is stored as: its kind, never its value or a part of it."""
    return MARKER.format(kind=kind)


@dataclass(frozen=True, slots=True)
class Finding:
    kind: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Rule:
    kind: str
    pattern: re.Pattern[str]
    group: int = 0  # the group that holds the secret (0: the whole match)
    check: Callable[[str], bool] | None = None  # a last word on a candidate value
    priority: int = 2  # of two rules finding the same span, the higher names it
    # Lowercase words one of which every match holds: a text with none of them is not
    # searched by the pattern at all (gitleaks' keyword prefilter). Empty: always searched.
    keywords: tuple[str, ...] = ()


# ------------------------------------------------------------------ detect-secrets' formats
# plugin module → (kind, whether its patterns' group 1 is the secret rather than a prefix)
_PLUGINS = (
    (artifactory.ArtifactoryDetector, "artifactory-token", False),
    (aws.AWSKeyDetector, "aws-key", True),
    (azure_storage_key.AzureStorageKeyDetector, "azure-storage-key", False),
    (basic_auth.BasicAuthDetector, "url-password", True),
    (cloudant.CloudantDetector, "cloudant-key", True),
    (discord.DiscordBotTokenDetector, "discord-token", False),
    (github_token.GitHubTokenDetector, "github-token", False),
    (gitlab_token.GitLabTokenDetector, "gitlab-token", False),
    (ibm_cloud_iam.IbmCloudIamDetector, "ibm-cloud-key", True),
    (ibm_cos_hmac.IbmCosHmacDetector, "ibm-cos-key", True),
    (jwt.JwtTokenDetector, "jwt", False),
    (mailchimp.MailchimpDetector, "mailchimp-key", False),
    (npm.NpmDetector, "npm-token", True),
    (openai.OpenAIDetector, "openai-key", False),
    (pypi_token.PypiTokenDetector, "pypi-token", False),
    (sendgrid.SendGridDetector, "sendgrid-key", False),
    (slack.SlackDetector, "slack-token", False),
    (softlayer.SoftlayerDetector, "softlayer-key", True),
    (square_oauth.SquareOAuthDetector, "square-token", False),
    (stripe.StripeDetector, "stripe-key", False),
    (telegram_token.TelegramBotTokenDetector, "telegram-token", False),
    (twilio.TwilioKeyDetector, "twilio-key", False),
)


def _jwt_valid(value: str) -> bool:
    return bool(jwt.JwtTokenDetector.is_formally_valid(value))


# Each plugin's keywords (see ``Rule.keywords``), read off its patterns: the credential
# names of the keyword plugins (IBM, Cloudant, SoftLayer) all end in one of these words.
_CREDENTIAL_WORDS = ("key", "pw", "pass", "token")
_PLUGIN_KEYWORDS: dict[type, tuple[str, ...]] = {
    artifactory.ArtifactoryDetector: ("akc", "ap"),
    aws.AWSKeyDetector: ("a3t", "abia", "acca", "akia", "asia", "aws"),
    azure_storage_key.AzureStorageKeyDetector: ("accountkey",),
    basic_auth.BasicAuthDetector: ("://",),
    cloudant.CloudantDetector: (*_CREDENTIAL_WORDS, "cloudant"),
    github_token.GitHubTokenDetector: ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    gitlab_token.GitLabTokenDetector: ("gl", "gr1348941"),
    ibm_cloud_iam.IbmCloudIamDetector: _CREDENTIAL_WORDS,
    ibm_cos_hmac.IbmCosHmacDetector: ("key",),
    jwt.JwtTokenDetector: ("eyj",),
    mailchimp.MailchimpDetector: ("-us",),
    npm.NpmDetector: ("_authtoken",),
    openai.OpenAIDetector: ("t3blbkfj",),
    pypi_token.PypiTokenDetector: ("pypi-",),
    sendgrid.SendGridDetector: ("sg.",),
    slack.SlackDetector: ("xox", "hooks.slack.com"),
    softlayer.SoftlayerDetector: (*_CREDENTIAL_WORDS, "softlayer"),
    square_oauth.SquareOAuthDetector: ("sq0csp-",),
    stripe.StripeDetector: ("k_live_",),
    telegram_token.TelegramBotTokenDetector: (":",),
    twilio.TwilioKeyDetector: ("ac", "sk"),
}


def _generic(pattern: re.Pattern[str]) -> bool:
    """A keyword plugin's ``name = value`` pattern (IBM Cloud, IBM COS, Cloudant, SoftLayer).
    Left out: the assignment rule below finds the same names, and these patterns put three
    unbounded runs of spaces in a row (`` *``, ``| +``, `` *``), which take cubic time on a
    long run of spaces after a credential word: a text made to stall the memory."""
    return pattern.pattern.startswith("(?:(?<=\\W)|(?<=^))")


# Plugins whose patterns are written again below with bounds: their unbounded runs
# (``.+``, ``[...]+`` from every ``eyJ`` or ``sk-``) take quadratic time on a text made of
# the same prefix many times over.
_REWRITTEN = (openai.OpenAIDetector, jwt.JwtTokenDetector, npm.NpmDetector)


def _library_rules() -> list[Rule]:
    rules = []
    for detector, kind, secret_group in _PLUGINS:
        keywords = _PLUGIN_KEYWORDS.get(detector, ())
        for pattern in detector.denylist:
            if _generic(pattern) or detector in _REWRITTEN:
                continue
            group = 1 if secret_group and pattern.groups >= 1 else 0
            if detector is slack.SlackDetector and "hooks" in pattern.pattern:
                kind = "slack-webhook"
            if detector is aws.AWSKeyDetector and group == 1:
                kind = "aws-secret-key"
            elif detector is aws.AWSKeyDetector:
                kind = "aws-access-key"
            check = _jwt_valid if detector is jwt.JwtTokenDetector else None
            rules.append(Rule(kind, pattern, group, check, priority=3, keywords=keywords))
    return rules


# ----------------------------------------------------------------------- written here
_PEM = re.compile(
    r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    # to its END line, or (a key clipped by a tool, shown with line numbers or as a JSON
    # string) through every base64 line that follows
    # (never past the next BEGIN line: each text is read once, however many BEGINs it holds)
    r"(?:(?:(?!-----BEGIN)[\s\S]){0,16000}?-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r"|(?:(?:\s|\\n|\\r)+(?:\d{1,6}(?:→|\t|:\s))?[A-Za-z0-9+/=:-]{8,})*)"
)
_PUTTY = re.compile(
    r"PuTTY-User-Key-File-\d: (?:(?!PuTTY-User-Key-File)[\s\S]){0,8000}?Private-MAC: [0-9a-fA-F]+"
)

_HAND = (
    Rule(
        "anthropic-key",
        re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}"),
        priority=4,
        keywords=("sk-ant-",),
    ),
    Rule(
        "openai-key",
        re.compile(r"\bsk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}"),
        priority=4,
        keywords=("sk-",),
    ),
    Rule("openai-key", re.compile(r"\bsk-[A-Za-z0-9]{40,}\b"), priority=3, keywords=("sk-",)),
    Rule("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), priority=4, keywords=("aiza",)),
    Rule(
        "google-oauth-secret",
        re.compile(r"\bGOCSPX-[0-9A-Za-z_-]{20,}"),
        priority=4,
        keywords=("gocspx-",),
    ),
    Rule("huggingface-token", re.compile(r"\bhf_[A-Za-z0-9]{34,}"), priority=4, keywords=("hf_",)),
    Rule(
        "github-token",
        re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}"),
        priority=4,
        keywords=("github_pat_",),
    ),
    Rule(
        "github-token",
        re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9_]{36,}"),
        priority=4,
        keywords=("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ),
    Rule(
        "stripe-key",
        re.compile(r"\b(?:sk|rk)_(?:live|test)_[0-9a-zA-Z]{16,}"),
        priority=4,
        keywords=("k_live_", "k_test_"),
    ),
    Rule("npm-token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), priority=4, keywords=("npm_",)),
    # detect-secrets' npm and older OpenAI patterns, bounded
    Rule(
        "npm-token",
        re.compile(
            r"//[^\s/]{1,200}/:_authToken=[ \t]{0,10}(npm_[A-Za-z0-9]{36}|[A-Fa-f0-9-]{36})"
        ),
        group=1,
        priority=3,
        keywords=("_authtoken",),
    ),
    Rule(
        "openai-key",
        re.compile(r"\bsk-[A-Za-z0-9_-]{0,80}?[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}"),
        priority=3,
        keywords=("t3blbkfj",),
    ),
    Rule(
        "aws-secret-key",
        re.compile(r"(?i)aws_?secret_?(?:access_?)?key[\"']?\s*[:=]\s*[\"']?([A-Za-z0-9/+]{40})\b"),
        group=1,
        priority=4,
        keywords=("aws",),
    ),
    Rule(
        "stripe-webhook-secret",
        re.compile(r"\bwhsec_[0-9a-zA-Z]{24,}"),
        priority=4,
        keywords=("whsec_",),
    ),
    Rule(
        "slack-token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), priority=4, keywords=("xox",)
    ),
    # detect-secrets' JWT pattern ends lazily (its signature part may match empty): the
    # whole token, signature included, is the secret
    Rule(
        "jwt",
        re.compile(r"\beyJ[A-Za-z0-9_-]{8,}=*\.[A-Za-z0-9_-]{8,}=*\.[A-Za-z0-9_.+/=-]*"),
        check=_jwt_valid,
        priority=4,
        keywords=("eyj",),
    ),
    Rule("private-key", _PEM, priority=5, keywords=("begin",)),
    Rule("private-key", _PUTTY, priority=5, keywords=("putty-user-key-file",)),
    Rule(
        "bearer-token",
        re.compile(r"\b[Bb]earer\s+([A-Za-z0-9._~+/-]{16,}=*)"),
        group=1,
        check=lambda v: _classes(v) >= 2,
        priority=1,
        keywords=("bearer",),
    ),
)


# ---------------------------------------------- KEY=value, by what the name says it holds
def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w.lower() for w in re.split(r"[\s_.\-]+", spaced) if w]


# a name's word → the kind, the shortest value taken, and whether it must look random
_NAME_WORDS: dict[str, tuple[str, int, bool]] = {
    "password": ("password", 6, False),
    "passwd": ("password", 6, False),
    "pwd": ("password", 6, False),
    "pass": ("password", 6, False),
    "passphrase": ("password", 6, False),
    "secret": ("secret", 8, True),
    "secrets": ("secret", 8, True),
    "token": ("token", 12, True),
    "apikey": ("api-key", 12, True),
    "key": ("api-key", 16, True),
    "auth": ("secret", 12, True),
    "credential": ("secret", 12, True),
    "credentials": ("secret", 12, True),
}
# words after which a name holds something else: a file, a count, an id, …
_NOT_SECRET_WORDS = frozenset(
    [
        "id",
        "ids",
        "name",
        "names",
        "type",
        "types",
        "count",
        "len",
        "length",
        "size",
        "file",
        "files",
        "path",
        "paths",
        "dir",
        "url",
        "uri",
        "env",
        "var",
        "prefix",
        "suffix",
        "limit",
        "max",
        "min",
        "format",
        "version",
        "public",
        "pub",
        "hash",
        "sha",
        "field",
        "column",
        "header",
        "headers",
        "policy",
        "expiry",
        "expires",
        "ttl",
        "mode",
        "kind",
        "label",
        "template",
        "required",
        "counter",
        "settings",
        "source",
        "sources",
        "provider",
        "manager",
        "handler",
        "factory",
        "class",
        "cls",
        "fn",
        "func",
        "callback",
        "config",
        "schema",
        "scope",
        "scopes",
        "usage",
        "budget",
        "pool",
        "store",
        "storage",
        "endpoint",
        "location",
        "encoding",
        "algorithm",
        "method",
    ]
)
# A word of code or a name, not a secret: each part (between ``/ . : @ -``) is snake_case
# (``token_counter``, ``entity_mask2_token``: letters, maybe a short number, joined by
# underscores), CamelCase whose humps have two lowercase letters or more
# (``ResolvedAssetKey``, ``Deimv2ForObjectDetection``), or a short number with a unit
# (``14B``). A random token breaks these almost at once: ``Xq7rT2vLp9Wk`` is none of them.
_WORD = r"(?:[A-Z]?[a-z]+|[A-Z]+)[0-9]{0,3}"
# an acronym ends where a hump, a number or the part begins: one way to split a name, so
# the pattern takes linear time on any input (a run of capitals included)
_HUMP = r"(?:[A-Z]?[a-z]{2,}|[A-Z]{2,}(?=[A-Z][a-z]{2,}|[0-9]|$))[0-9]{0,3}"
_IDENTIFIER_PART = re.compile(
    rf"_*{_WORD}(?:_+{_WORD})*_*|(?:{_HUMP})+|[0-9]{{1,4}}[A-Za-z]{{0,2}}"
)
_IDENTIFIER_SEPARATORS = re.compile(r"[/.:@-]")


def _identifier(value: str) -> bool:
    parts = _IDENTIFIER_SEPARATORS.split(value)
    return bool(parts[0]) and all(not p or _IDENTIFIER_PART.fullmatch(p) for p in parts)


def _sequence_run(value: str, length: int = 5) -> bool:
    """Whether ``value`` holds ``length`` characters in a row of the alphabet or of the
    digits (``ABCDE``, ``56789``): written by a person, not drawn at random."""
    run = 1
    for a, b in itertools.pairwise(value):
        run = run + 1 if ord(b) == ord(a) + 1 else 1
        if run >= length:
            return True
    return False


_PLACEHOLDER = re.compile(
    r"^(?:x+|\*+|\.+|-+|changeme|change_me|secret|password|passw0rd|token|none|null|nil|"
    r"true|false|undefined|example\w*|dummy\w*|placeholder\w*|your[\w-]*|my[\w-]*|test|"
    r"redacted|hidden|todo|tbd|foo|bar|baz|\w*here"
    # a value to fill in: <password>, {password}, ${DB_PASSWORD}, %(password)s, {{ token }}
    r"|<[^<>]*>|\$?\{+[^{}]*\}+|%\([^()]*\)s)$",
    re.IGNORECASE,
)
_DOTTED = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")
_ASSIGN = re.compile(
    # quotes may come escaped: a tool's input or output quoted as a JSON string
    r"""(?P<name>[A-Za-z_][A-Za-z0-9_.\-]{1,60})(?:\\?["'])?\s{0,40}(?::=|=>|=|:)[ \t]{0,40}"""
    r"""(?P<q>\\?["'`]|)(?P<value>(?:[^\s"'`,;\\]|\\(?![nrt"'\\])){1,500})(?P=q)"""
)


def _classes(value: str) -> int:
    return sum(
        (
            any(c.islower() for c in value),
            any(c.isupper() for c in value),
            any(c.isdigit() for c in value),
            any(not c.isalnum() for c in value),
        )
    )


def entropy(value: str) -> float:
    """Shannon entropy in bits per character (detect-secrets' measure for its entropy rule)."""
    counts = Counter(value)
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _assigned_kind(name: str, value: str) -> str | None:
    words = _words(name)
    if not words or words[-1] in _NOT_SECRET_WORDS or "public" in words:
        return None
    said = next((_NAME_WORDS[w] for w in reversed(words) if w in _NAME_WORDS), None)
    if said is None:
        return None
    kind, shortest, random = said
    if (
        len(value) < shortest
        or _PLACEHOLDER.match(value)
        or MARKER_RE.search(value)
        or any(c in value for c in "()[]{}<>$%")
        or _DOTTED.match(value)
        or _identifier(value)
        or value.startswith(("/", "./", "~/", "http://", "https://"))
        or _classes(value) < 2
        or (random and entropy(value) < 3.0)
    ):
        return None
    return kind


_QUOTED = re.compile(r"""(?P<q>\\?["'])(?P<value>[A-Za-z0-9+/=_-]{20,200})(?P=q)""")
_HEX = re.compile(r"^[0-9a-fA-F-]+$")
ENTROPY_LIMIT = 4.5  # detect-secrets' default for base64 strings


def _high_entropy(value: str) -> bool:
    return (
        not _HEX.match(value)
        and _classes(value) >= 3
        and entropy(value) > ENTROPY_LIMIT
        and not _identifier(value)  # a model's or a package's name: org/Name-Parts-14B
        and not _sequence_run(value)
    )


# ----------------------------------------------------------------------------- finding
_RULES: tuple[Rule, ...] = (*_library_rules(), *_HAND)
_STRIP = " \t\r\n\"'=:"


# The words a name must hold to say it holds a secret (``_NAME_WORDS``, each in one of these).
_NAME_KEYWORDS = ("pass", "pwd", "secret", "token", "key", "auth", "credential")
# Where a name that holds one of them meets its separator (as ``_ASSIGN`` reads it).
_NAME_HINT = re.compile(
    r"""(?i)(?:pass|pwd|secret|token|key|auth|credential)[A-Za-z0-9_.\-]{0,60}(?:\\?["'])?\s{0,40}(?::=|=>|=|:)"""
)
_NAME_LONGEST = 61
# Every keyword, each looked for once in a text.
_KEYWORDS = frozenset(word for rule in _RULES for word in rule.keywords) | set(_NAME_KEYWORDS)


def _candidates(text: str) -> Iterable[tuple[Finding, int]]:
    lowered = text.lower()
    present = {word for word in _KEYWORDS if word in lowered}
    for rule in _RULES:
        if rule.keywords and present.isdisjoint(rule.keywords):
            continue
        for match in rule.pattern.finditer(text):
            start, end = match.span(rule.group)
            if start < 0:
                continue
            while start < end and text[start] in _STRIP:
                start += 1
            while end > start and text[end - 1] in _STRIP:
                end -= 1
            value = text[start:end]
            if (
                len(value) < 8
                or _PLACEHOLDER.match(value)
                or (rule.check is not None and not rule.check(value))
            ):
                continue
            yield Finding(rule.kind, start, end), rule.priority
    # The assignment rule searches from the first place a telling name meets its separator
    # (``_NAME_HINT``), less the longest name before it: most texts have none.
    hint = _NAME_HINT.search(text) if not present.isdisjoint(_NAME_KEYWORDS) else None
    at = len(text) if hint is None else max(0, hint.start() - _NAME_LONGEST)
    while (named := _ASSIGN.search(text, at)) is not None:
        kind = _assigned_kind(named["name"], named["value"])
        if kind is not None:
            yield Finding(kind, *named.span("value")), 1
            at = named.end()
        else:
            # ``ok: SESSION_SECRET=…``, ``{"command": "DB_PASSWORD=…"}``: the value of a name
            # that says nothing may hold a name that does
            at = max(named.start() + 1, named.start("value"))
    for match in _QUOTED.finditer(text):
        if _high_entropy(match["value"]):
            yield Finding("high-entropy-string", *match.span("value")), 0


def find_secrets(text: str, allow: frozenset[str] = frozenset()) -> list[Finding]:
    """The secrets in ``text``, as spans in order, none overlapping.

    Overlapping finds become one span named by the most specific rule. A value found once is
    found everywhere else it is written too (a token in an ``.env`` line and again in a
    command). A value in ``allow`` is not a secret (a test key everyone knows).
    """
    found = [(f, p) for f, p in _candidates(text) if text[f.start : f.end] not in allow]
    if not found:
        return []
    # only values that cannot be a word of the text around them are looked for again
    values = {
        value: f.kind
        for f, _ in found
        if len(value := text[f.start : f.end]) >= 10 and not _identifier(value)
    }
    for value, kind in values.items():
        at = text.find(value)
        while at >= 0:
            found.append((Finding(kind, at, at + len(value)), -1))
            at = text.find(value, at + len(value))
    found.sort(key=lambda fp: (fp[0].start, -fp[0].end))
    merged: list[tuple[Finding, int]] = []
    for f, p in found:
        if merged and f.start < merged[-1][0].end:
            last, lp = merged[-1]
            kind = f.kind if p > lp else last.kind
            merged[-1] = (Finding(kind, last.start, max(last.end, f.end)), max(p, lp))
        else:
            merged.append((f, p))
    return [f for f, _ in merged]


def redact_secrets(text: str, allow: frozenset[str] = frozenset()) -> tuple[str, Counter[str]]:
    """``text`` with each secret replaced by its marker, and how many of each kind."""
    findings = find_secrets(text, allow)
    if not findings:
        return text, Counter()
    parts: list[str] = []
    at = 0
    for f in findings:
        parts += [text[at : f.start], marker(f.kind)]
        at = f.end
    parts.append(text[at:])
    return "".join(parts), Counter(f.kind for f in findings)
