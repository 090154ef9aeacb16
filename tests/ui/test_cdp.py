"""The DevTools driver (tests/ui/cdp.py) against a small local site: a form posted and
followed through its 303, a cookie kept across pages, the status of a 403 page."""

from __future__ import annotations

import html
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import pytest

from tests.ui.browser import free_port
from tests.ui.cdp import Browser


@dataclass
class Site:
    """The site's address and what its handlers saw."""

    base: str = ""
    posts: list[dict[str, str | None]] = field(default_factory=list)
    cookies: list[str | None] = field(default_factory=list)


def _handler(site: Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass  # quiet

        def _page(self, status: int, body: str, headers: dict[str, str] | None = None) -> None:
            data = f"<!doctype html><html><body>{body}</body></html>".encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/form":
                self._page(
                    200,
                    '<form id="f" method="post" action="/notes">'
                    '<input name="note"><button type="submit">Save</button></form>',
                )
            elif self.path == "/saved":
                self._page(200, "<h1>Saved</h1>")
            elif self.path == "/login":
                self._page(
                    200,
                    '<p>Welcome</p><a href="/whoami">who am I</a>',
                    {"Set-Cookie": "who=ana; Path=/; HttpOnly"},
                )
            elif self.path == "/whoami":
                cookie = self.headers.get("Cookie")
                site.cookies.append(cookie)
                self._page(200, f"<p>cookie: {html.escape(cookie or 'none')}</p>")
            elif self.path == "/secret":
                self._page(403, "<p>Forbidden here</p>")
            elif self.path == "/favicon.ico":
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
            else:
                self._page(404, "<p>No such page</p>")

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
            note = parse_qs(body).get("note", [""])[0]
            site.posts.append({"path": self.path, "note": note, "origin": self.headers["Origin"]})
            self.send_response(303)
            self.send_header("Location", "/saved")
            self.send_header("Content-Length", "0")
            self.end_headers()

    return Handler


@pytest.fixture
def site() -> Iterator[Site]:
    found = Site()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(found))
    server.daemon_threads = True
    found.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture
def browser() -> Iterator[Browser]:
    with Browser() as opened:
        yield opened


def test_a_form_is_posted_and_its_redirect_followed(site: Site, browser: Browser) -> None:
    browser.open(f"{site.base}/form")
    assert browser.url == f"{site.base}/form"
    assert browser.status() == 200
    assert '<input name="note">' in browser.html()
    browser.evaluate("document.querySelector('#f input[name=note]').value = 'keep SQLite'")

    browser.submit("document.querySelector('#f button').click()")

    assert browser.url == f"{site.base}/saved"
    assert browser.text() == "Saved"
    assert browser.status() == 200
    # what the server received: the field, and the page's own origin (what a CSRF check reads)
    assert site.posts == [{"path": "/notes", "note": "keep SQLite", "origin": site.base}]
    assert browser.evaluate("location.origin") == site.base


def test_a_cookie_set_by_one_response_is_sent_on_the_next(site: Site, browser: Browser) -> None:
    browser.open(f"{site.base}/whoami")
    browser.open(f"{site.base}/login")
    assert browser.text() == "Welcome\n\nwho am I"  # a paragraph, then the link
    browser.submit("document.querySelector('a').click()")  # a link followed
    assert site.cookies == [None, "who=ana"]
    assert browser.text() == "cookie: who=ana"


def test_the_status_of_a_refused_page(site: Site, browser: Browser) -> None:
    browser.open(f"{site.base}/secret")
    assert browser.status() == 403
    assert browser.text() == "Forbidden here"
    browser.open(f"{site.base}/form")
    assert browser.status() == 200


def test_an_address_nothing_serves_fails_and_misleads_no_later_wait(
    site: Site, browser: Browser
) -> None:
    with pytest.raises(AssertionError, match="ERR_CONNECTION_REFUSED"):
        browser.open(f"http://127.0.0.1:{free_port()}/")
    # Chromium commits and loads its error page after that answer: no wait below may end on it
    browser.open(f"{site.base}/form")
    browser.submit("document.querySelector('#f button').click()")
    assert browser.url == f"{site.base}/saved"
    assert [post["note"] for post in site.posts] == [""]


def test_a_submit_that_navigates_nowhere_fails_with_what_it_waited_for(browser: Browser) -> None:
    browser.timeout = 1
    with pytest.raises(AssertionError, match="no load of the page after 'void 0' within 1 s"):
        browser.submit("void 0")


def test_evaluate_returns_values_and_reports_what_a_page_threw(browser: Browser) -> None:
    assert browser.url == "about:blank"
    assert browser.status() is None
    assert browser.evaluate("({a: [1, 'two', null], b: true})") == {
        "a": [1, "two", None],
        "b": True,
    }
    assert browser.evaluate("Promise.resolve(6 * 7)") == 42
    assert browser.evaluate("undefined") is None
    assert browser.evaluate("innerWidth") == 1280
    with pytest.raises(AssertionError, match="no_such_thing is not defined"):
        browser.evaluate("no_such_thing.value")


def test_the_viewport_is_the_size_asked_for(site: Site) -> None:
    with Browser(width=390, height=844) as phone:
        assert phone.evaluate("[innerWidth, innerHeight]") == [390, 844]
        phone.open(f"{site.base}/form")  # another site: another renderer process
        assert phone.evaluate("[innerWidth, innerHeight]") == [390, 844]
        assert phone.evaluate("matchMedia('(max-width: 400px)').matches") is True


def test_closing_ends_the_browser_and_removes_its_profile() -> None:
    with Browser() as browser:
        assert browser.evaluate("[innerWidth, innerHeight]") == [1280, 900]
        process, profile = browser._process, browser._dir
        assert process is not None and profile.is_dir()
    assert process.poll() is not None
    assert not profile.exists()
