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
_MARKER_RE = re.compile(r"\[secret: [a-z0-9-]+\]")


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


def _library_rules() -> list[Rule]:
    rules = []
    for detector, kind, secret_group in _PLUGINS:
        for pattern in detector.denylist:
            group = 1 if secret_group and pattern.groups >= 1 else 0
            if detector is slack.SlackDetector and "hooks" in pattern.pattern:
                kind = "slack-webhook"
            if detector is aws.AWSKeyDetector and group == 1:
                kind = "aws-secret-key"
            elif detector is aws.AWSKeyDetector:
                kind = "aws-access-key"
            check = _jwt_valid if detector is jwt.JwtTokenDetector else None
            rules.append(Rule(kind, pattern, group, check, priority=3))
    return rules


# ----------------------------------------------------------------------- written here
_PEM = re.compile(
    r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    # to its END line, or (a key clipped by a tool, shown with line numbers or as a JSON
    # string) through every base64 line that follows
    r"(?:[\s\S]{0,16000}?-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r"|(?:(?:\s|\\n|\\r)+(?:\d{1,6}(?:→|\t|:\s))?[A-Za-z0-9+/=:-]{8,})*)"
)
_PUTTY = re.compile(r"PuTTY-User-Key-File-\d: [\s\S]{0,8000}?Private-MAC: [0-9a-fA-F]+")

_HAND = (
    Rule("anthropic-key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}"), priority=4),
    Rule(
        "openai-key", re.compile(r"\bsk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}"), priority=4
    ),
    Rule("openai-key", re.compile(r"\bsk-[A-Za-z0-9]{40,}\b"), priority=3),
    Rule("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), priority=4),
    Rule("google-oauth-secret", re.compile(r"\bGOCSPX-[0-9A-Za-z_-]{20,}"), priority=4),
    Rule("huggingface-token", re.compile(r"\bhf_[A-Za-z0-9]{34,}"), priority=4),
    Rule("github-token", re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}"), priority=4),
    Rule("github-token", re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9_]{36,}"), priority=4),
    Rule("stripe-key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[0-9a-zA-Z]{16,}"), priority=4),
    Rule("npm-token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), priority=4),
    Rule(
        "aws-secret-key",
        re.compile(r"(?i)aws_?secret_?(?:access_?)?key[\"']?\s*[:=]\s*[\"']?([A-Za-z0-9/+]{40})\b"),
        group=1,
        priority=4,
    ),
    Rule("stripe-webhook-secret", re.compile(r"\bwhsec_[0-9a-zA-Z]{24,}"), priority=4),
    Rule("slack-token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), priority=4),
    # detect-secrets' JWT pattern ends lazily (its signature part may match empty): the
    # whole token, signature included, is the secret
    Rule(
        "jwt",
        re.compile(r"\beyJ[A-Za-z0-9_-]{8,}=*\.[A-Za-z0-9_-]{8,}=*\.[A-Za-z0-9_.+/=-]*"),
        check=_jwt_valid,
        priority=4,
    ),
    Rule("private-key", _PEM, priority=5),
    Rule("private-key", _PUTTY, priority=5),
    Rule(
        "bearer-token",
        re.compile(r"\b[Bb]earer\s+([A-Za-z0-9._~+/-]{16,}=*)"),
        group=1,
        check=lambda v: _classes(v) >= 2,
        priority=1,
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
    ]
)
_PLACEHOLDER = re.compile(
    r"^(?:x+|\*+|\.+|-+|changeme|change_me|secret|password|passw0rd|token|none|null|nil|"
    r"true|false|undefined|example\w*|dummy\w*|placeholder\w*|your[\w-]*|my[\w-]*|test|"
    r"redacted|hidden|todo|tbd|foo|bar|baz|\w*here)$",
    re.IGNORECASE,
)
_DOTTED = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")
_ASSIGN = re.compile(
    # quotes may come escaped: a tool's input or output quoted as a JSON string
    r"""(?P<name>[A-Za-z_][A-Za-z0-9_.\-]{1,60})(?:\\?["'])?\s*(?::=|=>|=|:)[ \t]*"""
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
        or _MARKER_RE.search(value)
        or any(c in value for c in "()[]{}<>$%")
        or _DOTTED.match(value)
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
    return not _HEX.match(value) and _classes(value) >= 3 and entropy(value) > ENTROPY_LIMIT


# ----------------------------------------------------------------------------- finding
_RULES: tuple[Rule, ...] = (*_library_rules(), *_HAND)
_STRIP = " \t\r\n\"'=:"


def _candidates(text: str) -> Iterable[tuple[Finding, int]]:
    for rule in _RULES:
        for match in rule.pattern.finditer(text):
            start, end = match.span(rule.group)
            if start < 0:
                continue
            while start < end and text[start] in _STRIP:
                start += 1
            while end > start and text[end - 1] in _STRIP:
                end -= 1
            value = text[start:end]
            if len(value) < 8 or (rule.check is not None and not rule.check(value)):
                continue
            yield Finding(rule.kind, start, end), rule.priority
    at = 0
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
    values = {text[f.start : f.end]: f.kind for f, _ in found if f.end - f.start >= 8}
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
