"""What a secret looks like, and where one is in a text (docs/hygiene.md, "Secrets").

The broadest set of known formats is gitleaks' rule set (``rule_set``: about 220 providers
recognised by shape, each gated by its keywords), run as gitleaks runs it. Beside it are
detect-secrets' own (its plugins' ``denylist`` regexes: AWS, GitHub,
GitLab, Slack, Stripe, Azure, JWTs, passwords in URLs, …), read from the installed library
so they stay as it keeps them. Written here is only what it lacks or finds too loosely for
text that is stored for good: the newer key formats (Anthropic, OpenAI project keys, Google,
Hugging Face, GitHub fine-grained), whole PEM/OpenSSH key blocks (detect-secrets finds the
``BEGIN`` line only), bearer tokens, ``KEY=value`` lines whose name says secret, and
high-entropy quoted strings (its entropy rule, narrowed to base64-like strings of 20+).

``find_secrets`` returns spans, never values; ``marker`` is what a span becomes.
"""

from __future__ import annotations

import base64
import binascii
import functools
import itertools
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import ahocorasick
import re2
from detect_secrets.plugins import (
    artifactory,
    aws,
    azure_storage_key,
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

from memory_pipeline.hygiene import rule_set
from memory_pipeline.hygiene.rule_set import entropy  # detect-secrets' measure, gitleaks' too

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
    pattern: Any  # an RE2 pattern where RE2 can run it (``linear``), else Python's
    group: int = 0  # the group that holds the secret (0: the whole match)
    check: Callable[[str], bool] | None = None  # a last word on a candidate value
    priority: int = 2  # of two rules finding the same span, the higher names it
    # Lowercase words one of which every match holds: a text with none of them is not
    # searched by the pattern at all (gitleaks' keyword prefilter). Empty: always searched.
    keywords: tuple[str, ...] = ()
    shortest: int = 8  # a shorter value is not taken


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
_FLAGS = ((re.IGNORECASE, "i"), (re.MULTILINE, "m"), (re.DOTALL, "s"))


def linear(pattern: re.Pattern[str]) -> Any:
    """``pattern`` on RE2, whose time is linear in the text, where RE2 can run it (no
    lookaround, no backreference, repeats of at most 1000); else ``pattern`` itself, which
    must then be bounded so that Python's engine takes linear time on it too."""
    if not isinstance(pattern, re.Pattern):
        return pattern  # an RE2 pattern already
    flags = "".join(f for flag, f in _FLAGS if pattern.flags & flag)
    try:
        return re2.compile(f"(?{flags})" * bool(flags) + pattern.pattern, _RE2_OPTIONS)
    except re2.error:
        return pattern


# ------------------------------------------------------------------ detect-secrets' formats
# plugin module → (kind, whether its patterns' group 1 is the secret rather than a prefix)
_PLUGINS = (
    (artifactory.ArtifactoryDetector, "artifactory-token", False),
    (aws.AWSKeyDetector, "aws-key", True),
    (azure_storage_key.AzureStorageKeyDetector, "azure-storage-key", False),
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
            rules.append(Rule(kind, linear(pattern), group, check, 3, keywords))
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
    r"PuTTY-User-Key-File-\d: (?:(?!PuTTY-User-Key-File)[\s\S]){0,8000}?Private-MAC: [0-9a-fA-F]{1,128}"
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
    # The whole password of a URL's userinfo, any character a URL allows in it (RFC 3986:
    # unreserved, sub-delims, percent-encoded, even a raw ``@``: the last one ends it), with
    # or without a user, for every scheme.
    Rule(
        "url-password",
        re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]{0,30}://[^\s/?#:@]{0,200}:([^\s/?#]{1,300})@"),
        group=1,
        priority=3,
        keywords=("://",),
        shortest=3,
    ),
    Rule(
        "basic-auth",
        re.compile(
            r"(?i)\bauthorization[\"']?\s{0,5}[:=]\s{0,5}[\"']?basic\s{1,5}([A-Za-z0-9+/]{8,500}={0,2})"
        ),
        group=1,
        priority=3,
        keywords=("basic",),
    ),
    # a secret said in prose: "the password is …", "token: …", "my API key was …"
    Rule(
        "secret",
        re.compile(
            r"(?i)\b(?:secret|password|passwd|passphrase|token|api[ _-]?key|access[ _-]?key)s?"
            r"(?:\s{1,3}(?:is|was|are|were|reads|=|:)){1,2}\s{1,3}[`'\"]?"
            r"([A-Za-z0-9+/=_.~!@#$%^&*-]{12,200}?)[`'\"]?(?:[.,;:)]?(?:\s|$))"
        ),
        group=1,
        check=lambda v: (
            _classes(v) >= 2 and entropy(v) >= 3.0 and not _identifier(v) and not digest_like(v)
        ),
        priority=1,
        keywords=("secret", "password", "passwd", "passphrase", "token", "key"),
    ),
    Rule(
        "bearer-token",
        re.compile(r"\b[Bb]earer\s+([A-Za-z0-9._~+/-]{16,}=*)"),
        group=1,
        check=lambda v: _classes(v) >= 2,
        priority=3,
        keywords=("bearer",),
    ),
)


# ---------------------------------------------- KEY=value, by what the name says it holds
_HUMP_EDGE = re.compile(r"([a-z0-9])([A-Z])")
_NAME_SEPARATORS = re.compile(r"[\s_.\-]+")


@functools.lru_cache(maxsize=4096)  # names repeat: API_TOKEN, password, secret_key, …
def _words(name: str) -> tuple[str, ...]:
    spaced = _HUMP_EDGE.sub(r"\1 \2", name)
    return tuple(w.lower() for w in _NAME_SEPARATORS.split(spaced) if w)


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
    # words, not a token that happens to start so: my_password, example_key, put-it-here
    r"true|false|undefined|example[a-z_]*|dummy[a-z_]*|placeholder[a-z_]*|your[a-z_-]*|"
    r"my[a-z_-]*|test|redacted|hidden|todo|tbd|foo|bar|baz|[a-z_-]*here"
    # a value to fill in: <password>, {password}, ${DB_PASSWORD}, %(password)s, {{ token }}
    r"|<[^<>]*>|\$?\{+[^{}]*\}+|%\([^()]*\)s)$",
    re.IGNORECASE,
)
_DOTTED = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")
_ASSIGN = re.compile(
    # quotes may come escaped: a tool's input or output quoted as a JSON string
    r"""(?P<name>[A-Za-z_][A-Za-z0-9_.\-]{1,60})(?:\\?["'])?\s{0,40}(?::=|=>|=|:)[ \t]{0,40}"""
    # the value: runs of plain characters (one tight loop each), joined by backslashes
    # that escape nothing of JSON's, at most 500 characters (cut after the match)
    r"""(?P<q>\\?["'`]|)(?P<value>[^\s"'`,;\\]{1,500}(?:\\(?![nrt"'\\])[^\s"'`,;\\]{0,500}){0,16})"""
    r"""(?P=q)"""
)


def _classes(value: str) -> int:
    """How many of lowercase, uppercase, digits and other characters ``value`` holds."""
    return (
        (value.upper() != value)
        + (value.lower() != value)
        + any(map(str.isdigit, value))
        + (not value.isalnum() and bool(value))
    )


# What a value of ordinary text is, whatever a name beside it says: an integrity hash
# (``sha512-…`` of a lockfile, an HTML ``integrity`` attribute), a UUID, a hex digest of a
# known length (MD5, SHA-1, SHA-256, SHA-512: a git commit, a cache key), an image's data.
_DIGEST = re.compile(
    r"sha(?:1|256|384|512)-[A-Za-z0-9+/]{20,}={0,2}"
    r"|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|[0-9a-f]{32}|[0-9a-f]{40}|[0-9a-f]{64}|[0-9a-f]{128}|[0-9A-F]{40}|[0-9A-F]{64}"
    r"|data:image/[a-z+.-]{1,20};base64,[A-Za-z0-9+/=]*"
)
# Words in a name that make even a digest-shaped value a secret (``api_key = <hex32>``)
_SECRET_NAME_WORDS = frozenset(
    [
        "api",
        "apikey",
        "access",
        "private",
        "secret",
        "secrets",
        "password",
        "passwd",
        "pass",
        "pwd",
        "auth",
        "client",
        "token",
        "credential",
        "credentials",
        "signing",
        "master",
    ]
)


def digest_like(value: str, name: str = "") -> bool:
    """Whether ``value`` is a hash, an id or an image rather than a secret (``name``: what
    it is assigned to; a name that says secret takes even a digest-shaped value)."""
    if value.startswith(("sha1-", "sha256-", "sha384-", "sha512-", "data:image/")):
        return _DIGEST.fullmatch(value) is not None
    return _DIGEST.fullmatch(value) is not None and _SECRET_NAME_WORDS.isdisjoint(_words(name))


def _named_secret(named: str, value: str) -> bool:
    """Whether gitleaks' catch-all rule found a secret: ``named`` (its match up to the value:
    a name, an operator, a quote) does not say the value is something else, and the value
    is not a word of code, a hash or an id."""
    name = re.split(r"[^\w.-]", named.strip(), maxsplit=1)[0]
    words = _words(name)
    return not (
        (words and words[-1] in _NOT_SECRET_WORDS) or _identifier(value) or digest_like(value, name)
    )


_LETTER_DIGIT = re.compile(r"(?=[A-Za-z][0-9]|[0-9][A-Za-z])")


def _mixes(value: str) -> int:
    """How many times ``value`` turns from a letter to a digit or back."""
    return len(_LETTER_DIGIT.findall(value))


_TOKEN_PARTS = re.compile(r"[/._+=-]+")
# a run of token characters, whole: a token no name or prefix tells stands alone
_TOKEN_RUN = re2.compile(r"[A-Za-z0-9_+/=.-]{16,}", _RE2_OPTIONS)
_WORDISH = re.compile(r"[A-Z]?[a-z]{2,}|[A-Z]{2,}[a-z]?")
_HUMPS = re.compile(r"(?:[A-Z][a-z]+[0-9]*)+")
# Longer runs are data (an image, a blob, a part of one a chunk cut), not a token: a longer
# secret has a provider's prefix its own rule knows (fly.io, 1Password, Bedrock, …)
_TOKEN_LONGEST = 100


_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")


def _encoded_text(value: str) -> bool:
    """Whether ``value`` is base64 of text (a test's fixture, a MIME part, a data file), read
    from any of the four places a line cut from a longer block may start: a secret drawn at
    random decodes to bytes, not to words."""
    if not _BASE64.fullmatch(value):
        return False
    body = value.rstrip("=")
    for skip in range(4):
        part = body[skip:]
        try:
            text = base64.b64decode(part[: len(part) // 4 * 4]).decode("utf-8")
        except (binascii.Error, ValueError):
            continue
        if text and sum(c.isprintable() or c in "\t\r\n" for c in text) >= 0.95 * len(text):
            return True
    return False


def random_token(value: str) -> bool:
    """Whether ``value``, standing alone, is a token drawn at random: 16 characters or more
    (at most ``_TOKEN_LONGEST``), letters and digits mixed many times over within one part
    (a word with a number, a gene, a version or a file name mixes them once or twice a
    part), not hex alone (a hash, an id), high entropy, and not a word of code or a hash of
    a known kind."""
    if not 16 <= len(value) <= _TOKEN_LONGEST or _HEX.match(value) or value.isdigit():
        return False
    if value.lstrip("-+").startswith(("0x", "0X")) or _encoded_text(value):
        return False  # a hex literal (0x1.921fb54442d18p+1), text in base64
    parts = [p for p in _TOKEN_PARTS.split(value) if p]
    if not parts or (len(parts) > 1 and any(_WORDISH.fullmatch(p) for p in parts)):
        return False  # a path, a domain, a file name: words between the separators
    if all(_HUMPS.fullmatch(p) for p in parts):
        return False  # capitalised words with numbers: Gln356Pro871Glu1038, Python311Build
    mixed = max(_mixes(p) - 0.2 * len(p) for p in parts)
    return (
        mixed >= 0
        and max(_mixes(p) for p in parts) >= 4
        and sum(c.isdigit() for c in value) >= 3
        and sum(c.isalpha() for c in value) >= 4
        and entropy(value) >= 3.5
        and not _identifier(value)
        and not digest_like(value)
        and not _sequence_run(value)
    )


def _random_tokens(text: str) -> Iterable[Finding]:
    """Tokens drawn at random that stand alone in ``text``: not a part of a path or a URL,
    not an image's data, not a line of a block of base64 (a file's or a blob's data; a
    private key's body is known by its BEGIN and END lines, here and in scrub)."""
    for match in _TOKEN_RUN.finditer(text):
        start, end = match.span()
        while end > start and text[end - 1] in ".-":
            end -= 1  # the end of a sentence, a dash after a word
        if start and text[start - 1] in "/\\@:%&?#":
            continue
        before = text[max(0, start - 48) : start]
        if before.endswith("base64,") or _PUBLIC_KEY_TYPE.search(before):
            continue  # an image's data, an SSH public key (ssh-ed25519 AAAA…)
        if _in_block(text, start, end):
            continue
        if random_token(text[start:end]):
            yield Finding("random-token", start, end)


_PUBLIC_KEY_TYPE = re.compile(
    r"\b(?:ssh-[a-z0-9]+|ecdsa-sha2-[a-z0-9]+|sk-[a-z0-9-]+@openssh\.com) $"
)
BLOCK_WIDTH = 60  # base64 blocks wrap at 60, 64, 70 or 76 characters


def _in_block(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` is a whole line of a block of base64 lines: a line next to
    it is base64 too, and the wider of the two is a full line of the block."""
    if (start and text[start - 1] != "\n") or (end < len(text) and text[end] not in "\r\n"):
        return False
    width = end - start
    reach = max(0, start - 2 - 2 * width)  # a bound: a line this wide is no block's
    before = max(reach, text.rfind("\n", reach, start - 1) + 1)
    after = text.find("\n", end + 1, end + 2 + 2 * width)
    neighbours = []
    if start:
        neighbours.append(text[before : start - 1].rstrip("\r"))
    if end < len(text):
        neighbours.append(text[end + 1 : after if after >= 0 else end + 2 + 2 * width].rstrip("\r"))
    return any(
        line.startswith(("-----BEGIN ", "-----END "))  # a PEM block's (a certificate's) body
        or (_BASE64.fullmatch(line) and max(len(line), width) >= BLOCK_WIDTH)
        for line in neighbours
    )


_EXPRESSION_MARK = re.compile(r"[()\[\]{}<>$%]")


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
        or digest_like(value, name)
        or _PLACEHOLDER.match(value)
        or MARKER_RE.search(value)
        or _EXPRESSION_MARK.search(value)
        or _DOTTED.match(value)
        or (_identifier(value) and _mixes(value) < 3)
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
        and not digest_like(value)
        and _classes(value) >= 3
        and entropy(value) > ENTROPY_LIMIT
        and not _identifier(value)  # a model's or a package's name: org/Name-Parts-14B
        and not _sequence_run(value)
    )


# ----------------------------------------------------------------------------- finding
_RULES: tuple[Rule, ...] = tuple(
    replace(rule, pattern=linear(rule.pattern)) for rule in (*_library_rules(), *_HAND)
)
_GITLEAKS = rule_set.gitleaks()
# gitleaks' catch-all rule judges by a name, as the assignment rule below does: it names
# what it finds only where that rule does not, and takes no hash or id (``digest_like``)
_GENERIC = "generic-api-key"
_PRIORITY = {_GENERIC: 0}
_STRIP = " \t\r\n\"'=:"


# The words a name must hold to say it holds a secret (``_NAME_WORDS``, each in one of these).
_NAME_KEYWORDS = ("pass", "pwd", "secret", "token", "key", "auth", "credential")
# Where a name that holds one of them meets its separator (as ``_ASSIGN`` reads it).
_NAME_HINT = re.compile(
    r"""(?i)(?:pass|pwd|secret|token|key|auth|credential)[A-Za-z0-9_.\-]{0,60}(?:\\?["'])?\s{0,40}(?::=|=>|=|:)"""
)
_NAME_LONGEST = 61
# Every keyword, each looked for once in a text.
_KEYWORDS = (
    frozenset(word for rule in _RULES for word in rule.keywords)
    | set(_NAME_KEYWORDS)
    | _GITLEAKS.keywords
)
_KEYWORD_SEARCH = rule_set.Words(sorted(_KEYWORDS))


def _by_shape(text: str, present: set[str]) -> Iterator[tuple[Finding, int]]:
    """What the rules written here and detect-secrets' find (keywords ``present``)."""
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
                len(value) < rule.shortest
                or _PLACEHOLDER.match(value)
                or (rule.check is not None and not rule.check(value))
            ):
                continue
            yield Finding(rule.kind, start, end), rule.priority


def _by_name(text: str, present: set[str]) -> Iterator[tuple[Finding, int]]:
    """Values whose name says they are secret (``_assigned_kind``)."""
    # The assignment rule searches from the first place a telling name meets its separator
    # (``_NAME_HINT``), less the longest name before it: most texts have none.
    hint = _NAME_HINT.search(text) if not present.isdisjoint(_NAME_KEYWORDS) else None
    at = len(text) if hint is None else max(0, hint.start() - _NAME_LONGEST)
    while (named := _ASSIGN.search(text, at)) is not None:
        value = named["value"][:500]
        if named.start() > 0 and text[named.start() - 1] in "?&":
            value = value.split("&", 1)[0]  # a URL's query: the value ends at the next field
        kind = _assigned_kind(named["name"], value)
        if kind is not None:
            start = named.start("value")
            yield Finding(kind, start, start + len(value)), 1
            at = named.end()
        else:
            # ``ok: SESSION_SECRET=…``, ``{"command": "DB_PASSWORD=…"}``: the value of a name
            # that says nothing may hold a name that does
            at = max(named.start() + 1, named.start("value"))


def _by_gitleaks(
    text: str, present: set[str], taken: set[tuple[int, int]]
) -> Iterator[tuple[Finding, int]]:
    """What gitleaks' rules find, but the spans ``taken`` already."""
    for hit in _GITLEAKS.find(text, present, taken):
        value = text[hit.start : hit.end]
        if len(value) < 8 or _PLACEHOLDER.match(value) or MARKER_RE.search(value):
            continue
        if hit.rule == _GENERIC and not _named_secret(text[hit.match_start : hit.start], value):
            continue
        yield Finding(hit.rule, hit.start, hit.end), _PRIORITY.get(hit.rule, 2)


def _candidates(text: str) -> list[tuple[Finding, int]]:
    present = _KEYWORD_SEARCH.found(text.lower())
    found = [*_by_shape(text, present), *_by_name(text, present)]
    found += ((f, -1) for f in _random_tokens(text))
    found += (
        (Finding("high-entropy-string", *match.span("value")), 0)
        for match in _QUOTED.finditer(text)
        if _high_entropy(match["value"])
    )
    found += _by_gitleaks(text, present, {(f.start, f.end) for f, _ in found})
    found += _aws_pairs(text, found)
    return found


_AWS_ID_KINDS = frozenset(["aws-access-key", "aws-access-token"])
_BASE64_RUN = re2.compile(r"[A-Za-z0-9/+=]{40,}", _RE2_OPTIONS)
AWS_REACH = 400  # characters either side of a key id: a few lines of a config or a log


def _aws_pairs(text: str, found: list[tuple[Finding, int]]) -> list[tuple[Finding, int]]:
    """An AWS secret key (40 characters of base64, mixed) near an AWS key id is a secret,
    whatever name it has or lacks (Betterleaks pairs the two the same way). Each stretch of
    text is read once, however many ids there are."""
    ids = sorted(f.start for f, _ in found if f.kind in _AWS_ID_KINDS)
    pairs: list[tuple[Finding, int]] = []
    at = 0
    for start in ids:
        lo, hi = max(at, start - AWS_REACH), min(len(text), start + AWS_REACH)
        if lo >= hi:
            continue
        for match in _BASE64_RUN.finditer(text[lo:hi]):
            value = match.group().rstrip("=")
            if len(value) == 40 and _classes(value) >= 3 and entropy(value) >= 4.0:
                begin = lo + match.start()
                pairs.append((Finding("aws-secret-key", begin, begin + 40), 3))
        at = hi
    return pairs


# The longest value looked for again: a longer one is a run its rule found whole (a token
# pattern over a megabyte of one repeated prefix), not a secret written twice; the
# automaton's build is not made for words that long.
_REPEATED_LONGEST = 1024


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
        if 10 <= len(value := text[f.start : f.end]) <= _REPEATED_LONGEST and not _identifier(value)
    }
    if values:
        # every value in one pass over the text, however many there are
        automaton = ahocorasick.Automaton()
        for value, kind in values.items():
            automaton.add_word(value, (len(value), kind))
        automaton.make_automaton()
        spans = {(f.start, f.end) for f, _ in found}
        for last, (length, kind) in automaton.iter_long(text):
            if (last + 1 - length, last + 1) not in spans:  # where it was found first
                found.append((Finding(kind, last + 1 - length, last + 1), -1))
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
