"""A hostile corpus: secrets of many kinds in every shape a text reaches the memory in.

The secrets are made here from a seeded generator, in each format's public shape, so the
files of this project hold none (and no scanner of this repository trips on one). Each is a
``Secret`` with the bytes that must never reach the memory's files: the value, and the
random middle of it (a prefix or a clipped copy would hold that).

Shapes: the four transcript formats (Claude Code: user text, assistant text, a tool call's
input, a tool result as a string and as blocks, a ``Read`` of a key file; Codex: messages,
function calls and their outputs; ChatGPT: user, assistant and tool messages; Claude.ai:
text, tool blocks and attachments), a markdown file, and texts given to ``ingest_text``.
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass
from pathlib import Path

ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
# Words around each secret: they must stay searchable.
AROUND = "marmalade"


@dataclass(frozen=True)
class Secret:
    kind: str  # the kind its marker is expected to name
    value: str  # what appears in the text
    core: str  # the random part: no piece of it may be stored

    def pieces(self, size: int = 12) -> list[str]:
        """Pieces of the random part that no stored byte may hold (a prefix or a clipped
        copy of the secret would hold the first one)."""
        core = self.core
        return [core[i : i + size] for i in range(0, max(1, len(core) - size + 1), size)]


class Maker:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def chars(self, n: int, alphabet: str = ALNUM) -> str:
        while True:
            made = "".join(self.rng.choice(alphabet) for _ in range(n))
            # every class present, as a real random token would have
            if alphabet != ALNUM or (
                any(c.islower() for c in made)
                and any(c.isupper() for c in made)
                and any(c.isdigit() for c in made)
            ):
                return made

    def b64url(self, data: dict[str, object]) -> str:
        raw = json.dumps(data, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def secrets(self) -> list[Secret]:
        c = self.chars
        out: list[Secret] = []

        def add(kind: str, prefix: str, core: str, suffix: str = "") -> None:
            out.append(Secret(kind, prefix + core + suffix, core))

        add("aws-access-key", "AKIA", c(16, string.ascii_uppercase + "234567"))
        add("github-token", "ghp_", c(36))
        add("github-token", "gho_", c(36))
        add("github-token", "github_pat_", c(22) + "_" + c(59))
        add("gitlab-token", "glpat-", c(20))
        add("openai-key", "sk-proj-", c(64))
        add("openai-key", "sk-", c(48))
        add("anthropic-key", "sk-ant-api03-", c(93), "AA")
        add("huggingface-token", "hf_", c(34, string.ascii_letters))
        add("slack-token", "xoxb-", f"{c(11, string.digits)}-{c(13, string.digits)}-{c(24)}")
        add("slack-token", "xoxp-", f"{c(11, string.digits)}-{c(12, string.digits)}-{c(32)}")
        add("stripe-key", "sk_live_", c(24))
        add("stripe-key", "rk_live_", c(24))
        add("google-api-key", "AIza", c(35, ALNUM + "_-"))
        add("npm-token", "npm_", c(36))
        add("pypi-token", "pypi-AgEIcHlwaS5vcmc", c(70, ALNUM + "_-"))
        add("sendgrid-key", "SG.", c(22) + "." + c(43))
        header = self.b64url({"alg": "HS256", "typ": "JWT"})
        claims = self.b64url({"sub": c(10), "name": "Ada", "iat": 1700000000})
        add("jwt", header + ".", claims + "." + c(43, ALNUM + "_-"))
        # secrets named by the line they are on (passwords, KEY=value, URLs)
        add("url-password", "", c(18))  # written as postgres://app:<it>@db…
        add("password", "", c(16) + "!#")  # DB_PASSWORD=…
        add("secret", "", c(40))  # SESSION_SECRET=…
        add("api-key", "", c(32))  # "api_key": "…"
        add("aws-secret-key", "", c(40, B64))  # aws_secret_access_key = …
        add("azure-storage-key", "", c(86, B64), "==")  # AccountKey=…
        add("bearer-token", "", c(40))  # Authorization: Bearer …
        return out

    def private_key(self, kind: str) -> Secret:
        body = [self.chars(64, B64) for _ in range(6)]
        core = "".join(body)
        text = (
            f"-----BEGIN {kind} PRIVATE KEY-----\n"
            + "\n".join(body)
            + f"\n-----END {kind} PRIVATE KEY-----"
        )
        return Secret("private-key", text, core)


def in_context(secret: Secret) -> str:
    """The secret as a person or a tool would write it, with words around it."""
    v = secret.value
    by_kind = {
        "url-password": f"DATABASE_URL=postgres://app:{v}@db.internal:5432/orders",
        "password": f"DB_PASSWORD={v}",
        "secret": f"SESSION_SECRET={v}",
        "api-key": f'"api_key": "{v}"',
        "aws-secret-key": f"aws_secret_access_key = {v}",
        "azure-storage-key": (
            "DefaultEndpointsProtocol=https;AccountName=orders;"
            f"AccountKey={v};EndpointSuffix=core.windows.net"
        ),
        "bearer-token": f"curl -H 'Authorization: Bearer {v}' https://api.internal/v1",
    }
    return by_kind.get(secret.kind, f"export TOKEN_{secret.kind.upper().replace('-', '_')}={v}")


@dataclass
class Corpus:
    secrets: list[Secret]
    private: list[str]  # words inside <private> spans: dropped with them
    files: dict[str, Path]  # shape → the file written

    def everything(self) -> list[Secret]:
        return self.secrets


PRIVATE_WORDS = ("quinceprivate", "gooseberryprivate", "damsonprivate")


def _sentence(n: int) -> str:
    return f"Note {n}: the {AROUND} rollout keeps its config in the vault."


def build(folder: Path, seed: int = 44) -> Corpus:
    """Every file of the corpus under ``folder``: transcripts of the four formats, a
    markdown file, and ``texts.json`` (texts for ``ingest_text``)."""
    maker = Maker(seed)
    plain = maker.secrets() + maker.secrets()  # two of each: 50 values, 23 kinds
    keys = [maker.private_key("RSA"), maker.private_key("OPENSSH")]
    # Every secret goes into every shape: a shape that lets one through is found.
    lines = [in_context(s) for s in plain]
    env_dump = "\n".join(lines)
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "claude_code": _claude_code(folder, lines, env_dump, keys),
        "codex": _codex(folder, lines, env_dump, keys),
        "chatgpt": _chatgpt(folder, lines, env_dump, keys),
        "claude_ai": _claude_ai(folder, lines, env_dump, keys),
        "markdown": _markdown(folder, env_dump, keys),
        "texts": _texts(folder, lines, keys),
    }
    return Corpus([*plain, *keys], list(PRIVATE_WORDS), files)


def _private(n: int) -> str:
    word = PRIVATE_WORDS[n % len(PRIVATE_WORDS)]
    return f"keep this <private>the {word} plan</private> out"


def _stamp(n: int) -> str:
    return f"2026-11-20T10:{n // 60:02d}:{n % 60:02d}Z"


def _claude_code(folder: Path, lines: list[str], env_dump: str, keys: list[Secret]) -> Path:
    records: list[dict[str, object]] = []

    def add(role: str, content: object) -> None:
        n = len(records)
        records.append(
            {
                "parentUuid": records[-1]["uuid"] if records else None,
                "isSidechain": False,
                "cwd": "/home/dev/orders",
                "sessionId": "hostile-cc",
                "type": role,
                "message": {"role": role, "content": content},
                "uuid": f"cc-{n}",
                "timestamp": _stamp(n),
            }
        )

    for n, line in enumerate(lines):
        add("user", f"{_sentence(n)} My key is {line} please wire it.")
        add("assistant", [{"type": "text", "text": f"{_sentence(n)} I will use {line} now."}])
        add(
            "assistant",
            [{"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": line}}],
        )
        add(
            "user",
            [{"type": "tool_result", "tool_use_id": f"t{n}", "content": f"ok: {line}"}],
        )
    add(
        "assistant",
        [{"type": "tool_use", "id": "env", "name": "Bash", "input": {"command": "cat .env"}}],
    )
    add(
        "user",
        [
            {
                "type": "tool_result",
                "tool_use_id": "env",
                "content": [{"type": "text", "text": env_dump}],
            }
        ],
    )
    for n, key in enumerate(keys):
        path = f"/home/dev/.ssh/id_{n}"
        add(
            "assistant",
            [{"type": "tool_use", "id": f"r{n}", "name": "Read", "input": {"file_path": path}}],
        )
        numbered = "\n".join(f"{i + 1:>6}→{ln}" for i, ln in enumerate(key.value.splitlines()))
        add("user", [{"type": "tool_result", "tool_use_id": f"r{n}", "content": numbered}])
    add("user", f"{_private(0)} and {_private(1)}; then <private>the {PRIVATE_WORDS[2]} unclosed")
    path = folder / "claude-code" / "-home-dev-orders" / "hostile-cc.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _codex(folder: Path, lines: list[str], env_dump: str, keys: list[Secret]) -> Path:
    sid = "0199f0e1-2d3c-7b4a-8f5e-6d7c8b9a0f1e"
    records: list[dict[str, object]] = [
        {
            "timestamp": _stamp(0),
            "type": "session_meta",
            "payload": {"id": sid, "cwd": "/home/dev/orders"},
        }
    ]

    def item(payload: dict[str, object]) -> None:
        records.append(
            {"timestamp": _stamp(len(records)), "type": "response_item", "payload": payload}
        )

    for n, line in enumerate(lines):
        item(
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": f"{_sentence(n)} use {line}"}],
            }
        )
        item(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": f"{_sentence(n)} set {line}"}],
            }
        )
        item(
            {
                "type": "function_call",
                "name": "shell",
                "call_id": f"c{n}",
                "arguments": json.dumps({"command": ["bash", "-lc", line]}),
            }
        )
        item(
            {
                "type": "function_call_output",
                "call_id": f"c{n}",
                "output": json.dumps({"output": f"done {line}", "metadata": {"exit_code": 0}}),
            }
        )
    item(
        {
            "type": "function_call",
            "name": "shell",
            "call_id": "env",
            "arguments": json.dumps({"command": ["cat", ".env"]}),
        }
    )
    item({"type": "function_call_output", "call_id": "env", "output": env_dump})
    for n, key in enumerate(keys):
        item({"type": "function_call_output", "call_id": f"k{n}", "output": key.value})
    item(
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": _private(1)}],
        }
    )
    path = folder / "codex" / "2026" / "11" / "20" / f"rollout-2026-11-20T10-00-00-{sid}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _chatgpt(folder: Path, lines: list[str], env_dump: str, keys: list[Secret]) -> Path:
    messages: list[dict[str, object]] = []

    def add(role: str, text: str, recipient: str = "all", name: str | None = None) -> None:
        author: dict[str, object] = {"role": role}
        if name:
            author["name"] = name
        messages.append(
            {
                "id": f"m{len(messages)}",
                "author": author,
                "create_time": 1763632800.0 + len(messages),
                "content": {"content_type": "text", "parts": [text]},
                "recipient": recipient,
                "metadata": {},
            }
        )

    for n, line in enumerate(lines):
        add("user", f"{_sentence(n)} here is {line}")
        add("assistant", f"{_sentence(n)} noted {line}")
        add("assistant", f"run {line}", recipient="python")
        add("tool", f"printed {line}", name="python")
    add("tool", env_dump, name="python")
    for key in keys:
        add("user", key.value)
    add("user", _private(2))
    mapping: dict[str, object] = {}
    parent = None
    for m in messages:
        mapping[str(m["id"])] = {"id": m["id"], "message": m, "parent": parent, "children": []}
        parent = m["id"]
    export = [
        {"id": "hostile-gpt", "title": "Orders rollout", "mapping": mapping, "current_node": parent}
    ]
    path = folder / "chatgpt" / "conversations.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(export), encoding="utf-8")
    return path


def _claude_ai(folder: Path, lines: list[str], env_dump: str, keys: list[Secret]) -> Path:
    chat: list[dict[str, object]] = []

    def add(sender: str, text: str, **more: object) -> None:
        n = len(chat)
        chat.append(
            {
                "uuid": f"ca-{n}",
                "sender": sender,
                "created_at": _stamp(n),
                "text": text,
                "content": more.pop("content", [{"type": "text", "text": text}]),
                "attachments": more.pop("attachments", []),
                "files": [],
            }
        )

    for n, line in enumerate(lines):
        add("human", f"{_sentence(n)} see {line}")
        add("assistant", f"{_sentence(n)} got {line}")
        add(
            "assistant",
            "",
            content=[
                {"type": "tool_use", "id": f"u{n}", "name": "web_fetch", "input": {"url": line}},
                {
                    "type": "tool_result",
                    "tool_use_id": f"u{n}",
                    "content": [{"type": "text", "text": line}],
                },
            ],
        )
    add(
        "human",
        "the env file",
        attachments=[
            {
                "file_name": ".env",
                "file_type": "text/plain",
                "file_size": 1,
                "extracted_content": env_dump,
            }
        ],
    )
    for key in keys:
        add(
            "human",
            "my key",
            attachments=[
                {
                    "file_name": "id_rsa",
                    "file_type": "text/plain",
                    "file_size": 1,
                    "extracted_content": key.value,
                }
            ],
        )
    add("human", _private(0))
    export = [
        {
            "uuid": "hostile-ca",
            "name": "Orders keys",
            "created_at": _stamp(0),
            "updated_at": _stamp(len(chat)),
            "chat_messages": chat,
        }
    ]
    path = folder / "claude-ai" / "conversations.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(export), encoding="utf-8")
    return path


def _markdown(folder: Path, env_dump: str, keys: list[Secret]) -> Path:
    path = folder / "notes" / "deploy.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    keys_text = "\n\n".join(k.value for k in keys)
    path.write_text(
        f"# Deploy notes\n\n{_sentence(0)}\n\n```\n{env_dump}\n```\n\n{keys_text}\n\n"
        f"{_private(1)}\n",
        encoding="utf-8",
    )
    return path


def _texts(folder: Path, lines: list[str], keys: list[Secret]) -> Path:
    texts = [
        {"title": f"note {n}", "text": f"{_sentence(n)} {line}"} for n, line in enumerate(lines)
    ]
    texts += [
        {"title": f"key {n}", "text": f"{_sentence(99)}\n{k.value}"} for n, k in enumerate(keys)
    ]
    texts.append({"title": "private", "text": f"{_sentence(98)} {_private(2)}"})
    path = folder / "texts.json"
    path.write_text(json.dumps(texts), encoding="utf-8")
    return path
