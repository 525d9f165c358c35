"""The web board's Starlette application (docs/protocol.md §9).

Every request scans the queue once and projects it once (`cards.project`), then renders
a Jinja2 template with autoescape on: nothing read from a file reaches the page
unescaped, and a report's Markdown is rendered with raw HTML disabled.  One middleware
checks every request before routing: a `Host` that is not the server's own address is
421 (DNS rebinding), and the app is read-only (405 to any method but GET and HEAD); it
also sets the security headers (a Content-Security-Policy allowing our own script only).

Live updates are a fragment poll, not a push: the open page's script asks for
`/fragment` every second with the ETag of what it shows, and the server answers 304
while the rendered fragment is unchanged.  A push fed by file events would miss what
changes with time alone (a claim expiring, an outbox file turning stalled, ages), hold
a connection open per tab, and need a watcher thread per server; the poll needs none of
that, recovers by itself after a restart, and costs one scan and render a second.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markdown_it import MarkdownIt
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from handoffd import config, reports, safeio, scan
from handoffd import handoff as hf
from handoffd.board import cards, status
from handoffd.board.web import views

STATIC = os.path.join(os.path.dirname(os.path.dirname(__file__)), "static")
BODY_LIMIT = 1024 * 1024  # bytes of a handoff file shown on its page
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]
READ_ONLY = ("GET", "HEAD")
OTHERS_EVERY = 2.0  # seconds between reads of the other hosts' cards
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")

Check = Callable[[Scope], Response | None]


class Guard:
    """ASGI middleware: each request passes the checks in order, and the first that refuses
    it answers (before routing: nothing is read for a refused request); every answer gets
    the security headers.  A new rule is one more check in the list."""

    def __init__(self, app: ASGIApp, checks: Sequence[Check]) -> None:
        self.app = app
        self.checks = tuple(checks)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_guarded(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        for check in self.checks:
            refusal = check(scope)
            if refusal is not None:
                await refusal(scope, receive, send_guarded)
                return
        await self.app(scope, receive, send_guarded)


def host_check(host: str, port: int) -> Check:
    """421 unless the `Host` header names the address the server listens on: a page of
    another site whose name an attacker points at 127.0.0.1 (DNS rebinding) sends its own
    name as the Host, so it never reads the board."""
    allowed = allowed_hosts(host, port)

    def check(scope: Scope) -> Response | None:
        given = [value for key, value in scope["headers"] if key == b"host"]
        if len(given) == 1 and given[0].decode("latin-1").lower() in allowed:
            return None
        return Response("Misdirected Request: unknown Host\n", 421)

    return check


def allowed_hosts(host: str, port: int) -> frozenset[str]:
    """The `Host` values that name this server: loopback by name or address, or the
    `--host` given, each with the port (and without it on port 80, as browsers send it)."""
    given = f"[{host}]" if ":" in host and not host.startswith("[") else host
    names = {*LOOPBACK, given.lower()}
    return frozenset({f"{name}:{port}" for name in names} | (names if port == 80 else set()))


def read_only(scope: Scope) -> Response | None:
    """405 for any method but GET and HEAD: the board changes nothing."""
    if scope["method"] in READ_ONLY:
        return None
    return Response("Method Not Allowed\n", 405, {"Allow": ", ".join(READ_ONLY)})


def markdown() -> Callable[[str], Markup]:
    """A Markdown renderer with raw HTML off: a report's `<script>` shows as text."""
    parser = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    return lambda text: Markup(parser.render(text))  # markdown-it escaped the text


def environment() -> Environment:
    """The templates, with autoescape on for every one of them."""
    env = Environment(
        loader=PackageLoader("handoffd.board", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["markdown"] = markdown()
    env.filters["duration"] = views.duration
    env.filters["card_url"] = views.card_url
    env.globals.update(views=views, BADGE=views.BADGE, GLYPH=views.GLYPH, COLUMN=views.COLUMN)
    return env


class Board:
    """The pages of one project: each handler scans and projects once, then renders.
    Handlers are plain functions: Starlette runs them in its thread pool, so a slow
    archive page never holds up the event loop (nor another tab's live refresh)."""

    def __init__(
        self, root: str, window_s: float, clock: Callable[[], float], all_hosts: bool = False
    ) -> None:
        self.root = root
        self.window_s = window_s
        self.clock = clock
        self.env = environment()
        self.all_hosts = all_hosts  # other hosts' cards too (docs/protocol.md §15)
        self._others: tuple[float, list[dict[str, Any]], list[str]] = (float("-inf"), [], [])

    def others(self) -> tuple[list[dict[str, Any]], list[str]]:
        """Other hosts' open cards and stale-host lines, read from the bucket at most every
        OTHERS_EVERY seconds (the page polls each second)."""
        if not self.all_hosts:
            return [], []
        when, cards, notes = self._others
        if self.clock() - when < OTHERS_EVERY:
            return cards, notes
        from handoffd.remote import settings

        try:
            network = settings.load(self.root)
        except config.ConfigError as error:
            return [], [f"other hosts: {error}"]
        if network is None:
            return [], ["other hosts: swarmforge.conf names no NATS servers"]
        from handoffd.remote import hosts

        try:
            entries = [e for e in hosts.read_all(network) if e.host != network.here]
        except ConnectionError as error:
            cards, notes = [], [f"other hosts: not shown, NATS cannot be reached ({error})"]
        else:
            cards = [card for entry in entries for card in entry.cards]
            notes = hosts.last_seen(entries, self.clock())
        self._others = (self.clock(), cards, notes)
        return cards, notes

    def scan(self, history: bool = False) -> tuple[scan.Snapshot, float]:
        """One scan of the queue (with its history, for green cards), and the moment it
        stands for."""
        now = self.clock()
        try:
            return scan.scan(self.root, now=now, history=history), now
        except config.ConfigError as error:
            raise HTTPException(503, f"Cannot read the project: {error}") from None

    def project(self, include_green: bool) -> tuple[cards.Board, float]:
        snapshot, now = self.scan(history=include_green)
        return cards.project(snapshot, now, self.window_s, include_green=include_green), now

    def render(self, template: str, status_code: int = 200, **values: Any) -> HTMLResponse:
        html = self.env.get_template(template).render(root=self.root, **values)
        return HTMLResponse(html, status_code, headers={"Cache-Control": "no-store"})

    def chrome(self, board: cards.Board, now: float) -> dict[str, Any]:
        """What the header of every page shows: the daemon's state and the counts."""
        daemon = board.snapshot.daemon
        return {
            "daemon": status.daemon_line(daemon, now).removeprefix("daemon: "),
            "daemon_running": daemon is not None and daemon.running,
            "counts": board.counts(),
            "now": now,
        }

    # --- the open cards ----------------------------------------------------------------

    def live(self, board: cards.Board, now: float) -> str:
        """The part of `/` that updates itself: the header's facts and the three columns."""
        template = self.env.get_template("live.html")
        others, notes = self.others()
        return template.render(board=board, columns=views.columns(board), others=others,
                               host_notes=notes, **self.chrome(board, now))  # fmt: skip

    def open_html(self) -> str:
        """The whole open page: one scan, one projection, one render."""
        board, now = self.project(include_green=False)
        live = self.live(board, now)
        template = self.env.get_template("open.html")
        return template.render(root=self.root, live=Markup(live), etag=_etag(live),
                               title=views.counts_title(board.counts()))  # fmt: skip

    def open_cards(self, request: Request) -> Response:
        return HTMLResponse(self.open_html(), headers={"Cache-Control": "no-store"})

    def fragment(self, request: Request) -> Response:
        """The live part alone, or 304 when it has not changed since the page's copy."""
        board, now = self.project(include_green=False)
        live = self.live(board, now)
        tag = _etag(live)
        headers = {"ETag": tag, "Cache-Control": "no-store"}
        if tag in request.headers.get("if-none-match", ""):
            return Response(status_code=304, headers=headers)
        return HTMLResponse(live, headers=headers)

    # --- the archive, one card, the API --------------------------------------------------

    def archive(self, request: Request) -> Response:
        number = views.page_number(request.query_params.get("page"))
        board, now = self.project(include_green=True)
        green = views.newest_first(board.cards)
        shown, pages = views.page_of(green, number or 1)
        if number is None or number > pages:
            raise HTTPException(404, "No such page of the archive.")
        return self.render("archive.html", cards=shown, page=number, pages=pages,
                           total=len(green), title="Archive — handoffd",
                           **self.chrome(board, now))  # fmt: skip

    def card(self, request: Request) -> Response:
        name = request.path_params["card"]
        if not views.valid_name(name):
            raise HTTPException(404, "No such card.")
        snapshot, now = self.scan()
        # open cards are named first, so a name found among them is the same with history;
        # only a card not open costs the projection with history
        board = cards.project(snapshot, now, self.window_s)
        if name not in board.by_card:
            snapshot.load_history()
            board = cards.project(snapshot, now, self.window_s, include_green=True)
        card = board.by_card.get(name)
        if card is None:
            raise HTTPException(404, "No such card.")
        headers, body = read_file(card.path)
        history = read_reports(reversed(snapshot.reports(card.role, card.id)))
        needed_by = [other for other in board.cards if card.id in other.depends_on]
        return self.render("card.html", card=card, file_headers=headers, body=body,
                           history=history, needed_by=needed_by, title=f"{name} — handoffd",
                           **self.chrome(board, now))  # fmt: skip

    def api_cards(self, request: Request) -> Response:
        """What `status --json --all` prints."""
        board, _ = self.project(include_green=True)
        shown = [card.to_json() for card in board.cards]
        if self.all_hosts:
            from handoffd.remote import settings

            network = settings.load(self.root)
            here = network.here if network is not None else "local"
            shown = [{**card, "host": here} for card in shown] + self.others()[0]
        return JSONResponse(shown, headers={"Cache-Control": "no-store"})

    async def error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return self.render("error.html", exc.status_code, code=exc.status_code,
                           message=exc.detail, title=f"{exc.status_code} — handoffd")  # fmt: skip


def read_reports(paths: Iterable[str]) -> list[reports.Report]:
    """The reports at `paths`; one pruned away since the scan listed it is left out."""
    found = []
    for path in paths:
        try:
            found.append(reports.read(path))
        except OSError:
            continue
    return found


def read_file(path: str) -> tuple[list[tuple[str, str]], str]:
    """A queue file's header lines and body, leniently: a broken file shows what it holds."""
    try:  # the careful reader: never a link, a FIFO or more than the page shows
        fd = safeio.open_regular(path)
        try:
            data = safeio.read_fd(fd, BODY_LIMIT)
        finally:
            os.close(fd)
    except safeio.Refused as refusal:
        return [], f"(not shown: {refusal.why})"
    except OSError as error:
        return [], f"(cannot read {path}: {error.strerror})"
    return hf.split_lenient(data.decode("utf-8", errors="replace"))


def _etag(text: str) -> str:
    return '"' + hashlib.blake2b(text.encode(), digest_size=12).hexdigest() + '"'


def create_app(
    root: str,
    window_s: float = cards.WINDOW_S,
    clock: Callable[[], float] = time.time,
    host: str = "127.0.0.1",
    port: int = 8765,
    all_hosts: bool = False,
) -> Starlette:
    """The board of the project at `root`, read-only, behind the `Guard`; `host` and
    `port` are where it listens, the only names its requests may carry as `Host`."""
    pages = Board(root, window_s, clock, all_hosts)
    routes = [
        Route("/", pages.open_cards),
        Route("/fragment", pages.fragment),
        Route("/archive", pages.archive),
        Route("/card/{card}", pages.card),
        Route("/api/cards", pages.api_cards),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: pages.error})
    app.add_middleware(Guard, checks=[host_check(host, port), read_only])
    return app
