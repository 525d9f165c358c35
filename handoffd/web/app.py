"""The web board's Starlette application (docs/protocol.md §9).

Every request scans the queue once and projects it once (`cards.project`), then renders
a Jinja2 template with autoescape on: nothing read from a file reaches the page
unescaped, and a report's Markdown is rendered with raw HTML disabled.  One middleware
checks every request before routing: a `Host` that is not the server's own address is
421 (DNS rebinding); any method but GET, HEAD and POST is 405; a POST needs the board's
key (its cookie) and an `Origin` of the board's own, and with `--read-only` is 405; on a
non-loopback address every request needs the key.  It also sets the security headers (a
Content-Security-Policy allowing our own script, and forms that post to the board only).

The key (docs/protocol.md §13) is a random token: opening the board's URL with `?key=`
trades it for an HttpOnly, SameSite=Strict cookie of this board's own name and value (see
`Keys`) and redirects to the URL without it; an answer that lacks the key says where it
is.  Each form carries a CSRF token derived from the key; the actions themselves are the
table's (`handoffd.adapters.web`), handed in as `actions`: this module only guards and
renders.

Live updates are a fragment poll, not a push: the open page's script asks for
`/fragment` every second with the ETag of what it shows, and the server answers 304
while the rendered fragment is unchanged.  A push fed by file events would miss what
changes with time alone (a claim expiring, an outbox file turning stalled, ages), hold
a connection open per tab, and need a watcher thread per server; the poll needs none of
that, recovers by itself after a restart, and costs one scan and render a second.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import time
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from jinja2 import Environment, PackageLoader, StrictUndefined
from markdown_it import MarkdownIt
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from handoffd.board import cards, status
from handoffd.core import config, limits
from handoffd.core.outcome import INBOX_BUSY
from handoffd.numbers import charts, exposition, facts, stamps, stats
from handoffd.queue import scan
from handoffd.remote import held
from handoffd.snapshot.snapshot import GreenListing, Snapshot
from handoffd.web import views
from handoffd.web.workers import BOARD_BUSY, Workers

SEND = "send"  # the Send work form's action (`handoffd.adapters.web.SEND`)

STATIC = os.path.join(os.path.dirname(__file__), "static")
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
# `same-origin`, not `no-referrer`: with no referrer at all Chromium sends `Origin: null`
# on a form's POST, and the Origin check would refuse the board's own forms.
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
]
READ_ONLY = ("GET", "HEAD")
METHODS = ("GET", "HEAD", "POST")
FORM_TYPE = "application/x-www-form-urlencoded"  # what a form without `enctype` sends
FORM_LIMIT = 128 * 1024  # bytes of a form's body: a 16 KiB answer, percent-encoded, and more
OTHERS_EVERY = 2.0  # seconds between reads of the other hosts' cards
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
HOW = (  # where the key is, in every answer that lacks it
    "open the URL with ?key= that `handoffd web` printed when it started (with "
    "`--key-file F`, the key is the line in F)"
)
READ_ONLY_BOARD = "this board is read-only (handoffd web --read-only): it takes no actions"
STALE = f"This browser holds an old key of this board (it restarted with a new key): {HOW}."

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
    """405 for any method but GET and HEAD: the board changes nothing (`--read-only`), and
    says so (it printed no key to act with, so the refusal speaks of none)."""
    if scope["method"] in READ_ONLY:
        return None
    return Response(
        f"Method Not Allowed: {READ_ONLY_BOARD}\n", 405, {"Allow": ", ".join(READ_ONLY)}
    )


def methods(scope: Scope) -> Response | None:
    """405 for any method but GET, HEAD and POST."""
    if scope["method"] in METHODS:
        return None
    return Response("Method Not Allowed\n", 405, {"Allow": ", ".join(METHODS)})


class Keys:
    """The board's key, the cookie that stands for it and the CSRF token its forms carry
    (each derived from the key, so a page rendered before a restart with a kept
    `--key-file` still posts).

    A browser sends a cookie of 127.0.0.1 to every port of 127.0.0.1, so the cookie is
    named for this board alone (its port, a digest of its project's root): two boards
    never replace each other's.  Its value is derived from the key, never the key itself:
    whatever local server it reaches learns a token for this board, not the key the
    operator keeps in a file or pastes into another browser."""

    def __init__(self, key: str, port: int, root: str) -> None:
        self.key = key
        self.csrf = _derive(key, "handoffd csrf")
        self.cookie = cookie_name(port, root)
        self.value = _derive(key, f"handoffd cookie {self.cookie}")

    def held(self, scope: Scope) -> bool:
        """Whether the request carries this board's cookie with the key's value."""
        return any(hmac.compare_digest(value.encode(), self.value.encode())
                   for value in self._values(scope))  # fmt: skip

    def stale(self, scope: Scope) -> bool:
        """Whether the request carries this board's cookie with another key's value (the
        board restarted with a new key since the browser opened its URL)."""
        return bool(self._values(scope)) and not self.held(scope)

    def sign(self, action: str, card: str) -> str:
        """The signature of `Answered <card>` in a redirect's query (`Board.done_note`)."""
        return _derive(self.key, f"handoffd done {action}\n{card}")[:32]

    def csrf_ok(self, token: str) -> bool:
        return hmac.compare_digest(token.encode(errors="surrogatepass"), self.csrf.encode())

    def _values(self, scope: Scope) -> list[str]:
        return [value for name, value in cookies(scope) if name == self.cookie]


def _derive(key: str, purpose: str) -> str:
    return hmac.new(key.encode(), purpose.encode(), "sha256").hexdigest()


def cookie_name(port: int, root: str) -> str:
    """The key cookie's name for the board of `root` on `port`."""
    digest = hashlib.blake2b(os.path.realpath(root).encode(), digest_size=6).hexdigest()
    return f"handoffd_key_{port}_{digest}"


def cookies(scope: Scope) -> list[tuple[str, str]]:
    """The request's cookies, as (name, value)."""
    found = []
    for key, value in scope["headers"]:
        if key == b"cookie":
            for part in value.decode("latin-1").split(";"):
                name, _, text = part.strip().partition("=")
                found.append((name, text))
    return found


Page = Callable[[int, str], Response]  # a refusal as a page of the board: (status, message)


def key_check(
    keys: Keys | None,
    host: str,
    port: int,
    loopback: bool,
    page: Page | None = None,
    writable: bool = True,
) -> Check:
    """The key's rules (docs/protocol.md §13): `?key=` trades the key for its cookie; a POST
    needs the cookie and, when it names one, the board's own Origin; off loopback every
    request needs the cookie.  Without a key the board is read-only: a POST is 403.  A
    wrong key is said on a `page` of the board, with a way back (§15).  A read-only board on
    loopback printed no key and needs none: a `?key=` is dropped."""
    origins = {f"http://{name}" for name in allowed_hosts(host, port)}

    def check(scope: Scope) -> Response | None:
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if "key" in query and scope["method"] in READ_ONLY:
            return _trade(keys if writable or not loopback else None, scope, query, page)
        held = keys is not None and keys.held(scope)
        if scope["method"] == "POST":
            if not held:
                return _forbidden(keys, scope, "this needs the board's key")
            origin = [v.decode("latin-1") for k, v in scope["headers"] if k == b"origin"]
            if origin and origin[0].lower() not in origins:
                return Response("Forbidden: a form of another site\n", 403)
        elif not loopback and not held:
            return _forbidden(keys, scope, "every page of this board needs its key")
        return None

    return check


def _trade(keys: Keys | None, scope: Scope, query: dict[str, str], page: Page | None) -> Response:
    """The key given in the URL, as a cookie, then the same URL without it."""
    given = query.pop("key")
    target = on_board(scope["path"]) + (f"?{urlencode(query)}" if query else "")
    if keys is None:  # a read-only board on loopback: no key to trade, none needed to read
        return Response(status_code=303, headers={"Location": target})
    if not hmac.compare_digest(given.encode(), keys.key.encode()):
        said = f"Forbidden: not the board's key; {HOW}."
        return page(403, said.replace("`", "")) if page else Response(said + "\n", 403)
    response = Response(status_code=303, headers={"Location": target})
    response.set_cookie(keys.cookie, keys.value, httponly=True, samesite="strict", path="/")
    return response


def on_board(path: str) -> str:
    """`path` as a `Location` that stays on the board: percent-encoded (a backslash, which
    browsers read as a slash, or a control character is then no part of the URL's syntax)
    and starting with exactly one `/`, so `//host/…`, which a browser would leave the
    board for, is the board's own path `/host/…`."""
    return "/" + quote(path, safe="/:@!$&'()*+,;=-._~").lstrip("/")


def _forbidden(keys: Keys | None, scope: Scope, why: str) -> Response:
    """403 for a request without the key, saying where the key is; for a browser holding
    an old one, saying so."""
    if keys is not None and keys.stale(scope):
        return Response(f"Forbidden: {STALE}\n", 403)
    return Response(f"Forbidden: {why}; {HOW}.\n", 403)


def markdown() -> Callable[[str], Markup]:
    """A Markdown renderer with raw HTML off: a report's `<script>` shows as text."""
    parser = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    return lambda text: Markup(parser.render(text))  # markdown-it escaped the text


def environment() -> Environment:
    """The templates, with autoescape on for every one of them."""
    env = Environment(
        loader=PackageLoader("handoffd.web", "templates"),
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
        self,
        root: str,
        window_s: float,
        clock: Callable[[], float],
        all_hosts: bool = False,
        actions: Any = None,
        keys: Keys | None = None,
        loopback: bool = True,
    ) -> None:
        self.root = root
        self.loopback = loopback  # off loopback every page needs the key
        self.actions = actions  # `handoffd.adapters.web.Actions`, or None: no forms at all
        self.green = GreenListing()  # the archive's names, kept between requests
        self.kept = stamps.Kept()  # history's stamps for the numbers, likewise
        self.keys = keys
        self.window_s = window_s
        self.clock = clock
        self.env = environment()
        self.all_hosts = all_hosts  # other hosts' cards too (docs/protocol.md §15)
        self.workers = Workers()
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
        from handoffd.board import hosts

        try:
            entries = [e for e in hosts.read_all(network) if e.host != network.here]
        except ConnectionError as error:
            cards, notes = [], [f"other hosts: not shown, NATS cannot be reached ({error})"]
        else:
            cards = [card for entry in entries for card in entry.cards]
            notes = hosts.last_seen(entries, self.clock())
        self._others = (self.clock(), cards, notes)
        return cards, notes

    def project(self, include_green: bool) -> tuple[cards.Board, float]:
        """The board as `status` reads it (one scan, one projection: `status.board`), with
        its history for green cards, and the moment it stands for."""
        now = self.clock()
        try:
            return status.board(self.root, None, include_green, self.window_s, now), now
        except config.ConfigError as error:
            raise HTTPException(503, f"Cannot read the project: {error}") from None

    def render(
        self, template: str, status_code: int = 200, request: Request | None = None, **values: Any
    ) -> HTMLResponse:
        act = self.acting(request) if request is not None else None
        note = self.key_note(request) if request is not None else ""
        notes = {"read_note": self.read_note(request), "done_note": self.done_note(request)}
        html = self.env.get_template(template).render(root=self.root, act=act, key_note=note,
                                                      **{**notes, **values})  # fmt: skip
        return HTMLResponse(html, status_code, headers={"Cache-Control": "no-store"})

    def read_note(self, request: Request | None) -> str:
        """The one line a page without forms says (docs/protocol.md §15): that the board is
        read-only, and how to get the URL with its key ('' with the key, or no key at all)."""
        if request is None or self.keys is None or self.keys.stale(request.scope):
            return ""  # (a browser with an old key is told so by `key_note`)
        if self.actions is None:
            return ("Read-only: this board was started with --read-only; act with the "
                    "handoffd commands (answer, block, retry…).")  # fmt: skip
        hint = HOW.replace("`", "")  # a page is no terminal: no quoting marks
        return "" if self.keys.held(request.scope) else f"Read-only: to act on cards, {hint}."

    def done_note(self, request: Request | None) -> str:
        """`Answered <card>` on the page an action's form landed on: the action and card of
        the redirect's query, signed by the board's key so no link can say it falsely."""
        if request is None or self.keys is None or self.actions is None:
            return ""
        action, card = request.query_params.get("done", ""), request.query_params.get("card", "")
        signed = request.query_params.get("sig", "")
        if action not in (*self.actions.names, SEND) or not hmac.compare_digest(
            signed.encode("utf-8", "replace"), self.keys.sign(action, card).encode()
        ):
            return ""
        return views.done_line(action, card)

    def refusal(self, status_code: int, message: str) -> Response:
        """A refusal as a page of the board, with the way back to the open cards; off
        loopback (every page needs the key there) it names no project."""
        root = self.root if self.loopback else ""
        html = self.env.get_template("error.html").render(
            root=root, act=None, key_note="", read_note="", done_note="", code=status_code,
            message=message, back="/", title=f"{status_code} — handoffd",
        )  # fmt: skip
        return HTMLResponse(html, status_code, headers={"Cache-Control": "no-store"})

    def acting(self, request: Request) -> Acting | None:
        """The forms this request's page shows: none without actions or the key's cookie."""
        if self.actions is None or self.keys is None or not self.keys.held(request.scope):
            return None
        return Acting(self.actions, self.keys.csrf)

    def key_note(self, request: Request) -> str:
        """Why a page that would carry forms shows none: the browser's key is an old one."""
        if self.actions is None or self.keys is None or not self.keys.stale(request.scope):
            return ""
        return STALE

    def chrome(self, board: cards.Board, now: float) -> dict[str, Any]:
        """What the header of every page shows: the daemon's state and the counts."""
        daemon, said = board.snapshot.daemon, board.snapshot.held
        line = status.daemon_line(daemon, now, said).removeprefix("daemon: ")
        held_up = bool(held.nats_line(said.link if said else None))  # no other host reached
        running = daemon is not None and daemon.running
        return {
            "daemon": line,
            "daemon_state": ("warn" if held_up else "up") if running else "down",
            "counts": board.counts(),
            "now": now,
        }

    # --- the open cards ----------------------------------------------------------------

    def live(
        self,
        board: cards.Board,
        now: float,
        act: Acting | None = None,
        key_note: str = "",
        read_note: str = "",
    ) -> str:
        """The part of `/` that updates itself: the header's facts and the three columns
        (and why there are no forms: read-only, or the board restarted with a new key)."""
        template = self.env.get_template("live.html")
        others, notes = self.others()
        return template.render(board=board, columns=views.columns(board), others=others,
                               roles=views.roles(board, now),  # as `status` shows them
                               host_notes=notes, act=act, key_note=key_note,
                               read_note=read_note, **self.chrome(board, now))  # fmt: skip

    def open_html(self, request: Request) -> str:
        """The whole open page: one scan, one projection, one render."""
        board, now = self.project(include_green=False)
        act = self.acting(request)
        live = self.live(board, now, act, self.key_note(request), self.read_note(request))
        template = self.env.get_template("open.html")
        waiting = len(views.for_you(board))
        return template.render(root=self.root, live=Markup(live), etag=_etag(live), act=act,
                               key_note="", read_note="",  # in the live part, which follows
                               done_note=self.done_note(request), board=board,
                               title=views.counts_title(board.counts(), waiting))  # fmt: skip

    def open_cards(self, request: Request) -> Response:
        return HTMLResponse(self.open_html(request), headers={"Cache-Control": "no-store"})

    def fragment(self, request: Request) -> Response:
        """The live part alone, or 304 when it has not changed since the page's copy."""
        board, now = self.project(include_green=False)
        live = self.live(board, now, self.acting(request), self.key_note(request),
                         self.read_note(request))  # fmt: skip
        tag = _etag(live)
        headers = {"ETag": tag, "Cache-Control": "no-store"}
        if tag in request.headers.get("if-none-match", ""):
            return Response(status_code=304, headers=headers)
        return HTMLResponse(live, headers=headers)

    # --- the archive, one card, the API --------------------------------------------------

    def archive(self, request: Request) -> Response:
        """Green cards, newest first by name, 50 a page: every green name is listed, but
        only the page's own files are read, so a page costs the same at 50 or 50,000."""
        number = views.page_number(request.query_params.get("page"))
        board, now = self.project(include_green=False)
        green = board.snapshot.green(self.green)
        shown, pages = views.page_of(green, number or 1)
        if number is None or number > pages:
            raise HTTPException(404, "No such page of the archive.")
        page = cards.green_cards(board.snapshot, board.snapshot.load_page(shown), now)
        dismissed = sum(1 for row in green if row[2] == scan.State.DISMISSED)
        return self.render("archive.html", request=request, cards=page, page=number,
                           pages=pages, completed=len(green) - dismissed, dismissed=dismissed,
                           title="Archive — handoffd", **self.chrome(board, now))  # fmt: skip

    def card(self, request: Request) -> Response:
        name = request.path_params["card"]
        if not views.valid_name(name):
            raise HTTPException(404, "No such card.")
        # open cards are named first, so a name found among them is the same with history
        card, board, snapshot, now = self.find(name)
        if card is None:
            raise HTTPException(404, "No such card.")
        headers, body = snapshot.file(card.path)
        history = [found for _, found in reversed(snapshot.report_files(card.role, card.id))
                   if found is not None]  # fmt: skip
        needed_by = [other for other in board.cards if card.id in other.depends_on]
        return self.render("card.html", request=request, card=card, file_headers=headers, body=body,
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

    # --- the swarm's numbers (docs/protocol.md §19) -------------------------------------

    def read_numbers(self) -> facts.Facts:
        try:
            return facts.gather(self.root, self.clock(), kept=self.kept)
        except config.ConfigError as error:
            raise HTTPException(503, f"Cannot read the project: {error}") from None

    def metrics(self, request: Request) -> Response:
        """The Prometheus text exposition, what `handoffd metrics` prints."""
        text = exposition.render(self.read_numbers())
        headers = {"Content-Type": exposition.CONTENT_TYPE, "Cache-Control": "no-store"}
        return Response(text, headers=headers)

    def numbers(self, request: Request) -> Response:
        """The last 24 hours' table and each role's charts, drawn here as SVG."""
        found = self.read_numbers()
        since = found.now - stats.UNIT["h"] * charts.HOURS
        rows = stats.rows(found, since, None, facts.spent(found, since))
        drawn = {role: [Markup(charts.svg(kind, values[kind], role)) for kind in charts.KINDS]
                 for role, values in charts.series(found).items()}  # fmt: skip
        assert found.board is not None
        return self.render("numbers.html", request=request, rows=rows, charts=drawn,
                           span=stats.DEFAULT_SPAN, title="Numbers — handoffd",
                           **self.chrome(found.board, found.now))  # fmt: skip

    # --- an operator's actions (docs/protocol.md §13) -------------------------------------

    async def act(self, request: Request) -> Response:
        """`POST /card/<card>/<action>`: the action's command on the card, then its page
        (303), or the command's refusal (409)."""
        name, action = request.path_params["card"], request.path_params["action"]
        if request.method != "POST":  # no page lives there (nor under a name with a `/`)
            raise HTTPException(404, "No such card.")
        if self.actions is None or self.keys is None:
            raise HTTPException(403, "This board takes no actions.")
        if not views.valid_name(name) or action not in self.actions.names:
            raise HTTPException(404, "No such action.")
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != FORM_TYPE:
            raise HTTPException(415, f"The board's forms are sent as {FORM_TYPE}, not "
                                f"{kind or 'without a Content-Type'}.")  # fmt: skip
        fields = await form_fields(request)
        if not self.keys.csrf_ok(fields.get("csrf", "")):
            raise HTTPException(403, "The form is stale or not this board's: reload the page.")
        given = {key: fields[key] for key in ("text", "reason") if key in fields}
        result = await self.workers.run(self.actions.run, action, name, given)
        if result is None or result.err.startswith(INBOX_BUSY + ":"):
            said = result.err.strip() if result is not None else BOARD_BUSY
            return PlainTextResponse(f"Service Unavailable: {said}\n", 503,
                                     headers={"Retry-After": "5"})  # fmt: skip
        if result.ok and "text/plain" in request.headers.get("accept", ""):
            return PlainTextResponse(views.done_line(action, name) + "\n")  # the open page's
        if result.ok:  # the card's page says it was done (a retried card may be gone: `/`)
            target = "/" if action == "retry" else views.card_url(name)
            query = urlencode({"done": action, "card": name, "sig": self.keys.sign(action, name)})
            return Response(status_code=303, headers={"Location": f"{target}?{query}"})
        message = (result.err or result.out).strip()
        card, moved = await run_in_threadpool(self.moved, name, action)
        if "text/plain" in request.headers.get("accept", ""):
            return PlainTextResponse("".join(f"{line}\n" for line in (message, moved) if line),
                                     409)  # fmt: skip
        back = views.card_url(name) if card is not None else "/"
        return self.render("error.html", 409, code=409, message=message, moved=moved,
                           back=back, title="409 — handoffd")  # fmt: skip

    async def send_work(self, request: Request) -> Response:
        """`POST /send`, the Send work form (docs/protocol.md §18): `handoffd send` on its
        fields, then the open cards (303) saying `Sent <card>` for each copy, or the
        command's refusal (409).  Guarded as every action is (key, CSRF, Origin)."""
        if self.actions is None or self.keys is None:
            raise HTTPException(403, "This board takes no actions.")
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != FORM_TYPE:
            raise HTTPException(415, f"The board's forms are sent as {FORM_TYPE}, not "
                                f"{kind or 'without a Content-Type'}.")  # fmt: skip
        pairs = await form_pairs(request)
        fields: dict[str, list[str]] = {}
        for key, value in pairs:
            fields.setdefault(key, []).append(value)
        if not self.keys.csrf_ok((fields.get("csrf") or [""])[0]):
            raise HTTPException(403, "The form is stale or not this board's: reload the page.")
        result = await self.workers.run(self.actions.send, fields)
        if result is None or result.err.startswith(INBOX_BUSY + ":"):
            said = result.err.strip() if result is not None else BOARD_BUSY
            return PlainTextResponse(f"Service Unavailable: {said}\n", 503,
                                     headers={"Retry-After": "5"})  # fmt: skip
        if not result.ok:
            message = (result.err or result.out).strip()
            return self.render("error.html", 409, code=409, message=message, back="/",
                               title="409 — handoffd")  # fmt: skip
        sent = ",".join(result.data.get("cards", []) if isinstance(result.data, dict) else [])
        query = urlencode({"done": SEND, "card": sent, "sig": self.keys.sign(SEND, sent)})
        return Response(status_code=303, headers={"Location": f"/?{query}"})

    def moved(self, name: str, action: str) -> tuple[cards.Card | None, str]:
        """The card as it is now, and what became of it when it no longer offers `action`
        (a form shown before it moved: a card answered, finished or taken meanwhile)."""
        card = self.find(name)[0]
        if card is None:
            return None, "No card of this name is in the queue now."
        if any(form.action == action for form in self.actions.forms(card)):
            return card, ""  # still offered: the refusal was about what the form said
        return card, (
            f"It is {views.BADGE[card.colour]} now ({views.since(card)}), and does not "
            f"offer {action.capitalize()}."
        )

    def find(self, name: str) -> tuple[cards.Card | None, cards.Board, Snapshot, float]:
        """The card called `name`, with the board and scan it was found in: the open cards
        first, so only a card not open costs the projection with history."""
        board, now = self.project(include_green=False)
        snapshot = board.snapshot
        if name not in board.by_card:
            snapshot.load_history()
            board = cards.project(snapshot, now, self.window_s, include_green=True)
        return board.by_card.get(name), board, snapshot, now

    async def error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return self.render("error.html", exc.status_code, request, code=exc.status_code, back="/",
                           message=exc.detail, title=f"{exc.status_code} — handoffd")  # fmt: skip


class Acting:
    """What a page's forms need: the forms each card offers, and the CSRF token."""

    def __init__(self, actions: Any, csrf: str) -> None:
        self.actions = actions
        self.csrf = csrf

    def forms(self, card: cards.Card) -> list[Any]:
        return list(self.actions.forms(card))


async def form_fields(request: Request) -> dict[str, str]:
    """An url-encoded form's fields (the first of each name), read to `FORM_LIMIT`."""
    fields: dict[str, str] = {}
    for key, value in await form_pairs(request):
        fields.setdefault(key, value)
    return fields


async def form_pairs(request: Request) -> list[tuple[str, str]]:
    """An url-encoded form's fields in order, a name as often as it was given, read to
    `FORM_LIMIT`.  A client that goes before its whole body came is answered 400 (to
    nobody), quietly: a dropped connection is no error of the board's, and leaves no
    traceback."""
    body = b""
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > FORM_LIMIT:
                raise HTTPException(413, "The form is too large.")
    except ClientDisconnect:
        raise HTTPException(400, "The form was not sent whole: the connection closed.") from None
    # bytes that are not UTF-8 are kept (as lone surrogates) for the action to refuse with
    # the command's message, never turned into U+FFFD and stored
    text = body.decode("utf-8", "surrogateescape")
    return parse_qsl(text, keep_blank_values=True, errors="surrogateescape")


def _etag(text: str) -> str:
    return '"' + hashlib.blake2b(text.encode(), digest_size=12).hexdigest() + '"'


def create_app(
    root: str,
    window_s: float = limits.LIVENESS_WINDOW,
    clock: Callable[[], float] = time.time,
    host: str = "127.0.0.1",
    port: int = 8765,
    all_hosts: bool = False,
    actions: Any = None,
    key: str | None = None,
    writable: bool = True,
    loopback: bool = True,
) -> Starlette:
    """The board of the project at `root` behind the `Guard`; `host` and `port` are where
    it listens, the only names its requests may carry as `Host`.  With `actions` and a
    `key` a person holding the key acts through forms, unless not `writable`
    (`--read-only`); off `loopback` every request needs the key."""
    keys = Keys(key, port, root) if key else None
    pages = Board(root, window_s, clock, all_hosts, actions if writable else None, keys, loopback)
    routes = [
        Route("/", pages.open_cards),
        Route("/fragment", pages.fragment),
        Route("/archive", pages.archive),
        Route("/card/{card}", pages.card),
        Route("/card/{card}/{action}", pages.act, methods=["GET", "POST"]),
        Route("/send", pages.send_work, methods=["POST"]),
        Route("/api/cards", pages.api_cards),
        Route("/metrics", pages.metrics),
        Route("/numbers", pages.numbers),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: pages.error})
    rule = read_only if not writable else methods
    guard = key_check(keys, host, port, loopback, pages.refusal, writable)
    checks = [host_check(host, port), rule, guard]
    app.add_middleware(Guard, checks=checks)
    return app
