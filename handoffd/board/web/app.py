"""The web board's Starlette application (docs/protocol.md §9).

Every request scans the queue once and projects it once (`cards.project`), then renders
a Jinja2 template with autoescape on: nothing read from a file reaches the page
unescaped, and a report's Markdown is rendered with raw HTML disabled.  The app is
read-only: a middleware answers 405 to any method but GET and HEAD before routing, and
sets the security headers (a Content-Security-Policy allowing our own script file only).

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
from collections.abc import Callable, Iterable
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

from handoffd import config, scan
from handoffd.board import cards, reports, status
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


class Guard:
    """ASGI middleware: 405 for any method but GET/HEAD, security headers on every answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_guarded(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        if scope["method"] not in READ_ONLY:
            refusal = Response("Method Not Allowed\n", 405, {"Allow": ", ".join(READ_ONLY)})
            await refusal(scope, receive, send_guarded)
            return
        await self.app(scope, receive, send_guarded)


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

    def __init__(self, root: str, window_s: float, clock: Callable[[], float]) -> None:
        self.root = root
        self.window_s = window_s
        self.clock = clock
        self.env = environment()

    def scan(self) -> tuple[scan.Snapshot, float]:
        """One scan of the queue, and the moment it stands for."""
        now = self.clock()
        try:
            return scan.scan(self.root, now=now), now
        except config.ConfigError as error:
            raise HTTPException(503, f"Cannot read the project: {error}") from None

    def project(self, include_green: bool) -> tuple[cards.Board, float]:
        snapshot, now = self.scan()
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
        return template.render(board=board, columns=views.columns(board), **self.chrome(board, now))

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
        return JSONResponse([card.to_json() for card in board.cards],
                            headers={"Cache-Control": "no-store"})  # fmt: skip

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
    try:
        with open(path, "rb") as file:
            data = file.read(BODY_LIMIT)
    except OSError as error:
        return [], f"(cannot read {path}: {error.strerror})"
    text = data.decode("utf-8", errors="replace")
    head, sep, body = text.partition("\n\n")
    if not sep:
        return [], text
    pairs = [line.partition(": ") for line in head.split("\n")]
    return [(key, value) for key, colon, value in pairs if colon and key], body


def _etag(text: str) -> str:
    return '"' + hashlib.blake2b(text.encode(), digest_size=12).hexdigest() + '"'


def create_app(
    root: str, window_s: float = cards.WINDOW_S, clock: Callable[[], float] = time.time
) -> Starlette:
    """The board of the project at `root`, read-only, behind the `Guard`."""
    pages = Board(root, window_s, clock)
    routes = [
        Route("/", pages.open_cards),
        Route("/fragment", pages.fragment),
        Route("/archive", pages.archive),
        Route("/card/{card}", pages.card),
        Route("/api/cards", pages.api_cards),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: pages.error})
    app.add_middleware(Guard)
    return app
