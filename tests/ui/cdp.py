"""A small driver of headless Chromium over the Chrome DevTools Protocol, for browser tests of
pages with HTML forms: open a page, fill fields and click buttons through JavaScript, follow
the navigation a submit starts, read the page back and the HTTP status of its document.

Standard library only: the protocol goes through ``--remote-debugging-pipe``, where Chromium
reads commands from its fd 3 and writes replies and events to its fd 4, one JSON object per
message, each ended by a NUL byte. Chromium gets a fresh profile (a temporary
``--user-data-dir``, removed on close) and one page, whose cookies last until the browser
closes.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.ui.browser import FLAGS, chromium

__all__ = ["Browser"]


class Browser:
    """One headless Chromium with a fresh profile (a temporary --user-data-dir), one page."""

    def __init__(self, *, width: int = 1280, height: int = 900, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self._lock = threading.Condition()
        self._write_lock = threading.Lock()
        self._next_id = 0
        self._replies: dict[int, dict[str, Any]] = {}
        # the page's navigations, in arrival order: ("started" or "navigated", its loaderId)
        # or ("load", ""), a navigation being a document's load (loaderId: Network's too)
        self._events: list[tuple[str, str]] = []
        self._statuses: dict[str, int] = {}  # a document's loaderId: its response's status
        self._loader: str | None = None  # the loaderId of the main frame's current document
        self._dead: str | None = None  # why no reply can come any more
        self._crashed = False
        self._session: str | None = None
        self._closed = False
        self._reader: threading.Thread | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._to_browser = self._from_browser = -1
        self._dir = Path(tempfile.mkdtemp(prefix="cdp-chromium-"))
        try:
            self._start(width, height)
            self._attach(width, height)
        except BaseException:
            self.close()
            raise

    # -- the process and the pipe ------------------------------------------------------------

    def _start(self, width: int, height: int) -> None:
        exe = chromium()  # skips (or fails, where a browser is required) when it is missing
        cmd_read, self._to_browser = os.pipe()
        self._from_browser, reply_write = os.pipe()
        # The child's ends, copied far above 3 and 4 so that moving one onto 3 or 4 in the
        # child cannot overwrite the other. The originals stay open until Popen returns: then
        # fds 3 and 4 are open in this process (ours, or someone else's if taken already), so
        # subprocess's error pipe is not one of them and pass_fds=(3, 4) can mark them
        # inheritable in the child, which _posixsubprocess does before preexec_fn.
        child_in = fcntl.fcntl(cmd_read, fcntl.F_DUPFD_CLOEXEC, 10)
        child_out = fcntl.fcntl(reply_write, fcntl.F_DUPFD_CLOEXEC, 10)

        def onto_3_and_4() -> None:  # in the child, between fork and exec
            os.dup2(child_in, 3)  # os.dup2 makes the copy inheritable
            os.dup2(child_out, 4)

        self._log = self._dir / "chromium.log"
        try:
            with self._log.open("wb") as log:
                self._process = subprocess.Popen(
                    [
                        exe,
                        *FLAGS,
                        "--remote-debugging-pipe",
                        f"--user-data-dir={self._dir / 'profile'}",
                        f"--window-size={width},{height}",
                        "about:blank",
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    # close_fds (the default) runs after preexec_fn and keeps only pass_fds:
                    # the copies on 3 and 4 survive, nothing else of this process leaks.
                    pass_fds=(3, 4),
                    preexec_fn=onto_3_and_4,
                )
        finally:
            for fd in (cmd_read, reply_write, child_in, child_out):
                os.close(fd)  # Chromium holds them now: its exit ends our reads
        self._reader = threading.Thread(target=self._read, name="cdp-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        """The reader thread: splits the stream on NUL, routes replies by id, keeps events."""
        buffer = b""
        reason = "the browser closed its end of the pipe"
        try:
            while True:
                chunk = os.read(self._from_browser, 1 << 16)
                if not chunk:
                    break
                *messages, buffer = (buffer + chunk).split(b"\0")
                for raw in messages:
                    self._route(json.loads(raw))
        except Exception as exc:  # a broken message: nothing after it can be trusted
            reason = f"the reader stopped: {exc!r}"
        with self._lock:
            self._dead = self._dead or reason
            self._lock.notify_all()

    def _route(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        params = message.get("params", {})
        with self._lock:
            if "id" in message:
                self._replies[message["id"]] = message
            elif message.get("sessionId") != self._session or self._session is None:
                return  # the browser's own events, or another target's
            elif method == "Network.responseReceived" and params.get("type") == "Document":
                self._statuses[params["loaderId"]] = params["response"]["status"]
            elif method == "Page.frameStartedNavigating":  # any frame's: ids are unique
                self._events.append(("started", params["loaderId"]))
            elif method == "Page.frameNavigated" and "parentId" not in params["frame"]:
                self._loader = params["frame"]["loaderId"]
                self._events.append(("navigated", self._loader))
            elif method == "Page.loadEventFired":  # the main frame's only
                self._events.append(("load", ""))
            elif method == "Inspector.targetCrashed":
                self._crashed = True
            else:
                return
            self._lock.notify_all()

    def _why_dead(self) -> str:
        """What went wrong, with how the process ended and the end of its log."""
        assert self._process is not None
        code = self._process.poll()
        try:
            tail = self._log.read_text(errors="replace")[-2000:]
        except OSError:
            tail = ""
        ended = "still running" if code is None else f"exit code {code}"
        return f"{self._dead} ({ended}); chromium's output ends with:\n{tail}"

    def _wait(self, done: Callable[[], bool], what: str, timeout: float | None = None) -> None:
        """Wait (holding the lock) until ``done()``; fail on timeout or if the browser died."""
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        while not done():
            if self._crashed:
                raise AssertionError(f"the page crashed while waiting for {what}")
            if self._dead is not None:
                raise AssertionError(f"waiting for {what}: {self._why_dead()}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {what} within {limit:g} s")
            self._lock.wait(left)

    def _send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        page: bool = True,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Send one command (to the page's session unless ``page`` is false), return its result."""
        with self._lock:
            self._next_id += 1
            ident = self._next_id
            if self._dead is not None:
                raise AssertionError(f"cannot send {method}: {self._why_dead()}")
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if page:
            message["sessionId"] = self._session
        data = json.dumps(message).encode() + b"\0"
        with self._write_lock:
            try:
                while data:
                    data = data[os.write(self._to_browser, data) :]
            except OSError as exc:
                raise AssertionError(f"cannot send {method}: {exc}") from exc
        with self._lock:
            self._wait(lambda: ident in self._replies, f"reply to {method}", timeout)
            reply = self._replies.pop(ident)
        if "error" in reply:
            raise AssertionError(f"{method} failed: {reply['error']}")
        result: dict[str, Any] = reply.get("result", {})
        return result

    def _attach(self, width: int, height: int) -> None:
        targets = self._send("Target.getTargets", page=False)["targetInfos"]
        pages = [t["targetId"] for t in targets if t["type"] == "page"]
        if pages:
            target = pages[0]
        else:  # the start page's tab does not exist yet: a tab of our own then
            target = self._send("Target.createTarget", {"url": "about:blank"}, page=False)[
                "targetId"
            ]
        attached = self._send(
            "Target.attachToTarget", {"targetId": target, "flatten": True}, page=False
        )
        with self._lock:
            self._session = attached["sessionId"]
        for domain in ("Page", "Runtime", "Network"):
            self._send(f"{domain}.enable")
        # --window-size sizes the window, whose viewport headless Chromium makes smaller (the
        # height less its toolbars) and no narrower than 500 px: the viewport is set instead.
        self._send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )

    # -- navigation ----------------------------------------------------------------------------

    def _mark(self) -> int:
        """Where the page's events stand now: a navigation waited for comes after it."""
        with self._lock:
            return len(self._events)

    def _wait_loaded(self, since: int, what: str, loader: str | None = None) -> None:
        """Wait until the main frame committed a navigation started after event ``since`` (or
        the one of ``loader``) and then fired its load event. A navigation started before,
        such as the error page of an address that could not be opened, does not count."""

        def loaded() -> bool:
            started = set() if loader is None else {loader}
            navigated = False
            for kind, ident in self._events[since:]:
                if kind == "started":
                    started.add(ident)
                elif kind == "navigated":
                    navigated = ident in started
                elif navigated:  # the load of the document committed after `since`
                    return True
            return False

        with self._lock:
            self._wait(loaded, f"load of the page after {what}")

    # -- the API --------------------------------------------------------------------------------

    def open(self, url: str) -> None:
        """Navigate to ``url`` and wait until the new document fired its load event (redirects
        followed; cookies kept in the profile across calls)."""
        since = self._mark()
        result = self._send("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise AssertionError(f"cannot open {url}: {result['errorText']}")
        if "loaderId" not in result:
            return  # a same-document navigation (only the fragment changed): no load
        self._wait_loaded(since, f"opening {url}", result["loaderId"])

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (a promise awaited); an
        AssertionError with the exception's text if it threw."""
        result = self._send(
            "Runtime.evaluate",
            {
                "expression": expression,
                "returnByValue": True,
                "awaitPromise": True,
                "userGesture": True,
            },
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise AssertionError(f"{expression!r} threw: {text}")
        value = result["result"]
        if "unserializableValue" in value:  # NaN, Infinity, -0, a bigint
            raw = value["unserializableValue"]
            return int(raw[:-1]) if raw.endswith("n") else float(raw)
        return value.get("value")

    def submit(self, expression: str) -> None:
        """Evaluate an expression that submits a form or follows a link (e.g.
        ``document.querySelector('#f button').click()``) and wait until the document the
        navigation it starts leads to has loaded."""
        since = self._mark()
        self.evaluate(expression)
        self._wait_loaded(since, f"{expression!r}")

    def html(self) -> str:
        """The page's markup as the browser holds it."""
        return str(self.evaluate("document.documentElement.outerHTML"))

    def text(self) -> str:
        """The page's text as rendered (``document.body.innerText``)."""
        return str(self.evaluate("document.body.innerText"))

    @property
    def url(self) -> str:
        """The page's address (``location.href``)."""
        return str(self.evaluate("location.href"))

    def status(self) -> int | None:
        """The HTTP status of the response the current document came from (after redirects);
        None for a page no response made (about:blank, a network error)."""
        with self._lock:
            return None if self._loader is None else self._statuses.get(self._loader)

    # -- the end ------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the browser (Browser.close, then terminate or kill it) and remove the profile."""
        if self._closed:
            return
        self._closed = True
        process = self._process
        if process is not None and process.poll() is None:
            if self._reader is not None:
                with contextlib.suppress(AssertionError):  # it may exit before replying
                    self._send("Browser.close", page=False, timeout=10)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        if self._to_browser >= 0:
            os.close(self._to_browser)
        if self._reader is not None:
            self._reader.join(timeout=10)
        # closed only once the reader is done with it (else its number could be reused under it)
        if self._from_browser >= 0 and not (self._reader and self._reader.is_alive()):
            os.close(self._from_browser)
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
