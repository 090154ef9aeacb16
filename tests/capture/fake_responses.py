"""The real Codex CLI against a fake Responses API, inside a network namespace that holds
only loopback (``unshare -rn``): Codex can reach nothing but the fake.

Run as ``python -m tests.capture.fake_responses CODEX PROMPT…`` in the namespace: it brings
loopback up, answers every request with one assistant message (``Reply <n>: …``), runs
``codex exec`` for the first prompt and ``codex exec resume`` for each further one, and
prints each run's exit code and stderr as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PORT = 18765  # a fresh namespace has every port free
PROVIDER = f"""
model = "test-model"
model_provider = "fake"

[model_providers.fake]
name = "fake"
base_url = "http://127.0.0.1:{PORT}/v1"
wire_api = "responses"
"""


def reply(n: int) -> str:
    return f"Reply {n}: we keep the walrus{n} plan."


class Responses(BaseHTTPRequestHandler):
    """``POST /v1/responses`` → a streamed response of one message."""

    answered = 0

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        Responses.answered += 1
        n = Responses.answered
        item = {
            "type": "message",
            "role": "assistant",
            "id": f"msg_{n}",
            "content": [{"type": "output_text", "text": reply(n)}],
        }
        usage = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}
        events = [
            {"type": "response.created", "response": {"id": f"resp_{n}"}},
            {"type": "response.output_item.done", "item": item},
            {"type": "response.completed", "response": {"id": f"resp_{n}", "usage": usage}},
        ]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for event in events:
            self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())


def main(codex: str, prompts: list[str]) -> None:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    server = ThreadingHTTPServer(("127.0.0.1", PORT), Responses)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    runs = []
    session = ""
    for n, prompt in enumerate(prompts):
        resume = ["resume", session] if n else []
        done = subprocess.run(
            [codex, "exec", "--skip-git-repo-check", *resume, prompt],
            capture_output=True,
            text=True,
            timeout=120,
        )
        runs.append({"code": done.returncode, "stderr": done.stderr})
        if not n:
            home = Path(os.environ["CODEX_HOME"])
            [rollout] = home.glob("sessions/*/*/*/rollout-*.jsonl")
            session = rollout.stem[-36:]
    server.shutdown()
    print(json.dumps(runs))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
