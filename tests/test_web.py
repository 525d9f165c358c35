"""The web board over HTTP (docs/protocol.md §9): the API, the headers, the read-only
guard, malformed names, escaping, the live fragment's ETag, the archive's pages, the
command itself; and the pure wording of `views`."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from starlette.testclient import TestClient

from handoffd.board import cards, status
from handoffd.core import handoff as hf
from handoffd.core import limits
from handoffd.web import views
from handoffd.web.app import CSP, create_app
from handoffd.web.command import is_loopback
from tests.conftest import Project
from tests.daemon_support import handoffd
from tests.swarm_support import command_env
from tests.web_support import PAST, colourful, ident, put, report, serving

NOW = time.time()


def client(project: Project, now: float | None = None) -> TestClient:
    """A client of the board as served on its default address (a `Host` it answers to)."""
    app = create_app(str(project.root), clock=lambda: now or time.time())
    return TestClient(app, base_url="http://127.0.0.1:8765")


# --- the API ---------------------------------------------------------------------------


def test_api_cards_is_status_json_all_at_the_same_moment(project: Project) -> None:
    colourful(project)
    # the moment the files were laid (the module's NOW may be minutes old in a long run, and
    # a heartbeat over a minute ahead of the clock counts as none: no yellow card)
    now = time.time()
    answer = client(project, now).get("/api/cards")
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    board = status.board(str(project.root), None, True, limits.LIVENESS_WINDOW, now)
    assert answer.json() == [card.to_json() for card in board.cards]
    assert {card["color"] for card in answer.json()} == {"red", "yellow", "orange", "green"}


def test_api_cards_matches_the_status_command(project: Project) -> None:
    colourful(project)
    printed = handoffd("status", "--json", "--all", "--root", str(project.root))
    assert printed.returncode == 0, printed.stderr
    served = client(project).get("/api/cards").json()
    pairs = [(card["card"], card["color"], card["state"]) for card in json.loads(printed.stdout)]
    assert [(card["card"], card["color"], card["state"]) for card in served] == pairs


# --- headers and the read-only guard ---------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/fragment", "/archive", "/api/cards", "/card/x@QA",
                                  "/static/board.js", "/no/such/page"])  # fmt: skip
def test_every_answer_carries_a_csp_that_allows_only_our_own_script(
    project: Project, path: str
) -> None:
    answer = client(project).get(path)
    assert answer.headers["content-security-policy"] == CSP
    assert "script-src 'self';" in CSP and "unsafe-inline" not in CSP
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["x-frame-options"] == "DENY"


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH", "OPTIONS"])
@pytest.mark.parametrize("path", ["/", "/api/cards", "/card/x@QA", "/static/board.css", "/nope"])
def test_any_method_but_get_head_and_post_is_405(project: Project, method: str, path: str) -> None:
    answer = client(project).request(method, path)
    assert answer.status_code == 405
    assert answer.headers["allow"] == "GET, HEAD, POST"
    assert answer.headers["content-security-policy"] == CSP


@pytest.mark.parametrize("path", ["/", "/api/cards", "/card/x@QA/answer", "/nope"])
def test_a_post_without_the_boards_key_is_403(project: Project, path: str) -> None:
    answer = client(project).post(path, data={"text": "hi"})
    assert answer.status_code == 403
    assert answer.headers["content-security-policy"] == CSP


def test_head_answers_like_get_without_a_body(project: Project) -> None:
    colourful(project)
    answer = client(project).head("/")
    assert answer.status_code == 200 and answer.content == b""


# --- card names ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["%2e%2e", "..%2F..%2Fetc%2Fpasswd", "a%2Fb@QA", "a%00b@QA", "%00", "x" * 4096,
     "x" * 4000 + "@QA", f"{ident(1)}@nobody", f"{ident(99)}@QA", "@QA", f"{ident(1)}"],
)  # fmt: skip
def test_an_unknown_or_malformed_card_name_is_a_404(project: Project, name: str) -> None:
    colourful(project)
    answer = client(project).get(f"/card/{name}")
    assert answer.status_code == 404
    assert "root:x:0:0" not in answer.text


@pytest.mark.parametrize("path", ["/card/..", "/card/../../etc/passwd", "/card/a\x00b@QA",
                                  "/card/../api/cards"])  # fmt: skip
def test_a_raw_path_no_client_would_send_is_a_404(project: Project, path: str) -> None:
    """Clients resolve `..` before sending; the server must not rely on it."""
    colourful(project)
    assert raw_status(create_app(str(project.root)), path) == 404


def raw_status(app: Any, path: str) -> int:
    """The status the ASGI `app` answers to a GET of `path`, exactly as given."""
    scope = {"type": "http", "http_version": "1.1", "method": "GET", "path": path,
             "raw_path": path.encode(), "root_path": "", "scheme": "http",
             "query_string": b"", "headers": [(b"host", b"127.0.0.1:8765")],
             "client": ("127.0.0.1", 1), "server": None}  # fmt: skip
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return int(sent[0]["status"])


def test_a_known_card_is_found_open_or_completed(project: Project) -> None:
    names = colourful(project)
    web = client(project)
    for key in ("red", "yellow", "orange", "green", "inherited"):
        answer = web.get(views.card_url(names[key]))
        assert answer.status_code == 200, key
        assert f'data-card="{names[key]}" data-color="{key if key != "inherited" else "red"}"' in (
            answer.text
        )


@pytest.mark.parametrize(
    ("name", "valid"),
    [("20260101T000000Z_000001_from_coder@QA", True), ("a b@QA", True), ("a@b", True),
     ("a\\r.handoff@QA", True), ("a..b.handoff@QA", True),  # a hand-made file's own name
     ("", False), ("@QA", False), ("noat", False), ("a/b@QA", False), ("a\x00b@QA", False),
     ("a\nb@QA", False), ("a\rb@QA", False), ("x" * 5000 + "@QA", False)],
)  # fmt: skip
def test_valid_name_refuses_what_no_card_can_be_called(name: str, valid: bool) -> None:
    """Names are looked up among the cards, never joined to a path: whatever a card can be
    called passes, and nothing a card is never called (a slash, a control character)."""
    assert views.valid_name(name) is valid


# --- escaping --------------------------------------------------------------------------

SCRIPT = "<script>window.__xss = 1</script>"
IMG = '<img src="x" onerror="window.__xss = 1">'


def hostile(project: Project) -> str:
    """A card whose every file-derived text is a payload; its name."""
    put(project, 1, "QA", box="inbox/in_process", task=IMG, blocked_reason=SCRIPT,
        message=IMG)  # fmt: skip
    path = project.box("QA", "inbox/in_process") / f"50_{ident(1)}_to_QA.handoff"
    path.write_text(path.read_text().replace("Do the thing.", f"{SCRIPT}\n{IMG}"))
    text = f"# Done\n\n{SCRIPT}\n\n{IMG}\n\n[click](javascript:alert(1))\n"
    report(project, 1, "QA", "BLOCKED", text, NOW)
    return f"{ident(1)}@QA"


def test_file_derived_text_is_escaped_on_every_page(project: Project) -> None:
    name = hostile(project)
    web = client(project)
    for path in ("/", "/fragment", views.card_url(name)):
        text = web.get(path).text
        assert "<script>window" not in text and "<img src" not in text, path
        assert "&lt;script&gt;window.__xss = 1&lt;/script&gt;" in text, path
    detail = web.get(views.card_url(name)).text
    assert "javascript:" not in detail.replace("[click](javascript:alert(1))", "")
    assert "<h1>Done</h1>" in detail  # the Markdown itself is rendered


# --- the live fragment -----------------------------------------------------------------


def test_the_fragment_is_304_until_the_disk_changes(project: Project) -> None:
    put(project, 1, "QA")
    web = client(project, NOW)
    first = web.get("/fragment")
    tag = first.headers["etag"]
    assert first.status_code == 200 and 'data-color="orange"' in first.text
    assert web.get("/fragment", headers={"If-None-Match": tag}).status_code == 304
    put(project, 2, "QA", blocked_reason="no key")
    again = web.get("/fragment", headers={"If-None-Match": tag})
    assert again.status_code == 200 and again.headers["etag"] != tag
    assert 'data-color="red"' in again.text


def test_the_open_page_holds_no_green_card_and_the_header_counts(project: Project) -> None:
    names = colourful(project)
    text = client(project).get("/").text
    assert f'data-card="{names["green"]}"' not in text  # a dependency badge only
    assert f'data-dep="{names["green"]}" data-color="green"' in text
    assert "daemon NOT RUNNING" in text
    assert "red <b>2</b>" in text and "yellow <b>1</b>" in text and "orange <b>2</b>" in text


def test_a_card_named_in_a_detail_is_called_by_its_title(project: Project) -> None:
    names = colourful(project)
    text = client(project).get("/").text
    assert "inherits from “task-1” @QA: needs the staging password" in text
    detail = client(project).get(views.card_url(names["inherited"])).text
    assert 'class="why">inherits from “task-1” @QA: needs the staging password<' in detail


def test_an_orange_card_waiting_on_another_says_on_which_by_its_title(project: Project) -> None:
    """The board says what holds a card back, as `status` does (docs/protocol.md §8)."""
    put(project, 7, "QA")
    put(project, 8, "coder", depends_on=ident(7))
    text = client(project, NOW).get("/").text
    assert "on “task-7” @QA" in text


def test_a_dependency_the_queue_does_not_hold_shows_without_a_colour(project: Project) -> None:
    put(project, 1, "QA", depends_on=ident(42))
    text = client(project).get("/").text
    assert f'data-dep-missing="{ident(42)}"' in text
    assert "data-dep=" not in text


def test_each_state_words_its_age(project: Project) -> None:
    put(project, 1, "QA")
    put(project, 2, "QA", box="inbox/in_process", dequeued_at=PAST)
    text = client(project, (cards.epoch(PAST) or 0.0) + 7380).get("/").text
    assert "waiting 2 h 03 min" in text and "taken 2 h 03 min ago" in text


def test_a_role_that_does_not_answer_shows_red_with_why_like_any_red(project: Project) -> None:
    """docs/protocol.md §14: three wake-ups in the daemon's log, nothing taken since."""
    put(project, 1, "QA")
    log = project.root / ".swarmforge" / "daemon" / "handoffd.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("".join(
        json.dumps({"event": "wake", "role": "QA", "submitted": True,
                    "timestamp": hf.iso_now(NOW - ago)}) + "\n"
        for ago in (300, 180, 60)
    ))  # fmt: skip
    text = client(project, NOW).get("/").text
    assert 'data-color="red"' in text and "not taken after 3 wake-ups over 4m" in text


# --- the archive -----------------------------------------------------------------------


def completed(project: Project, count: int) -> list[str]:
    """`count` completed cards @QA, the last one completed most recently; names newest first."""
    names = []
    for n in range(1, count + 1):
        at = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(NOW - 10_000 + n))
        put(project, n, "QA", box="inbox/completed", completed_at=at)
        names.append(f"{ident(n)}@QA")
    return names[::-1]


def test_the_archive_is_newest_first_fifty_a_page(project: Project) -> None:
    newest_first = completed(project, 120)
    web = client(project, NOW)
    shown = []
    for page, size in ((1, 50), (2, 50), (3, 20)):
        text = web.get(f"/archive?page={page}").text
        rows = [part.split('"')[0] for part in text.split('data-card="')[1:]]
        assert len(rows) == size, page
        shown += rows
    assert shown == newest_first
    assert web.get("/archive").text == web.get("/archive?page=1").text


@pytest.mark.parametrize("page", ["0", "4", "-1", "abc", "1.5", "9" * 20])
def test_a_page_past_the_archive_or_not_a_number_is_a_404(project: Project, page: str) -> None:
    completed(project, 120)
    assert client(project, NOW).get(f"/archive?page={page}").status_code == 404


def test_the_archive_marks_a_dismissed_card_and_counts_it_apart(project: Project) -> None:
    """docs/protocol.md §15: a refusal put aside is green but not done: the archive says
    `dismissed` (who, when, why) on its row, its age runs from the dismissal, and the
    count keeps it apart from the completed cards."""
    completed(project, 2)
    ident9 = "20260101T000000Z_000009_from_coder"
    aside = project.put("coder", f"50_{ident9}_to_nobody.handoff", box="failed/dismissed",
                        id=ident9)  # fmt: skip
    when = hf.iso_now(NOW - 300)
    Path(f"{aside}.dismissed").write_text(f"dismissed by ann at {when}: sent in error\n")
    text = client(project, NOW).get("/archive").text
    assert "2 completed, 1 dismissed · newest first" in text
    row = text.split('data-card="20260101T000000Z_000009_from_coder@coder"')[1].split("</tr>")[0]
    assert (
        'data-state="dismissed"' in row and '<span class="mark">dismissed</span> 5 min ago' in row
    )
    assert f"dismissed by ann at {when}: sent in error" in row


def test_an_empty_archive_has_one_page(project: Project) -> None:
    answer = client(project).get("/archive")
    assert answer.status_code == 200 and "No completed cards yet." in answer.text


# --- pure wording ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "?"), (0, "0 s"), (59.9, "59 s"), (60, "1 min"), (720, "12 min"),
     (7380, "2 h 03 min"), (86400 * 3 + 3600 * 4, "3 d 4 h"), (-5, "0 s")],
)  # fmt: skip
def test_duration_reads_as_a_person_says_it(seconds: float | None, text: str) -> None:
    assert views.duration(seconds) == text


def test_ago_reads_a_report_time() -> None:
    now = cards.epoch("2026-01-01T00:12:00Z") or 0.0
    assert views.ago("2026-01-01T00:00:00Z", now) == "12 min ago"
    assert views.ago("2026-01-01T00:12:00Z", now) == "just now"
    assert views.ago("not a time", now) == "at an unknown time"


@pytest.mark.parametrize(
    ("text", "page"), [(None, 1), ("", 1), ("1", 1), ("3", 3), ("0", None), ("x", None)]
)
def test_page_number(text: str | None, page: int | None) -> None:
    assert views.page_number(text) == page


def test_counts_title_leads_with_the_reds() -> None:
    assert views.counts_title({"red": 2, "yellow": 1, "orange": 3, "green": 9}) == (
        "(2) handoffd — 6 open"
    )
    assert views.counts_title({"red": 0, "yellow": 0, "orange": 1, "green": 0}) == (
        "handoffd — 1 open"
    )


# --- the command -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.1.2.3", True), ("::1", True), ("[::1]", True),
     ("localhost", True), ("0.0.0.0", False), ("::", False), ("192.168.1.4", False),
     ("example.org", False)],
)  # fmt: skip
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def serve(project: Project, *args: str) -> tuple[subprocess.Popen[str], str]:
    """`handoffd web ROOT --port 0 ARGS` as a process; it and the URL it prints."""
    command = [sys.executable, "-m", "handoffd", "web", str(project.root), "--port", "0", *args]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=command_env())  # fmt: skip
    assert process.stdout is not None
    line = process.stdout.readline()
    assert " on http://" in line, line + (process.stderr.read() if process.stderr else "")
    return process, line.split(" on ", 1)[1].split()[0]


def stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=15)
    return err


def test_the_command_serves_on_loopback_without_a_warning(project: Project) -> None:
    put(project, 1, "QA", enqueued_at=PAST)
    process, url = serve(project)
    try:
        assert url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(url + "api/cards", timeout=10) as answer:
            assert [card["color"] for card in json.load(answer)] == ["orange"]
    finally:
        err = stop(process)
    assert "WARNING" not in err
    assert process.returncode == 0


def test_any_other_host_warns_that_anyone_who_reaches_it_reads_the_mail(
    project: Project,
) -> None:
    process, url = serve(project, "--host", "0.0.0.0")
    err = stop(process)
    assert "anyone who can reach it reads the swarm's mail" in err
    assert url.startswith("http://0.0.0.0:")


def test_a_port_in_use_is_a_one_line_error(project: Project) -> None:
    process, url = serve(project)
    try:
        port = url.rstrip("/").rsplit(":", 1)[1]
        taken = handoffd("web", str(project.root), "--port", port)
    finally:
        stop(process)
    assert taken.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in taken.stderr
    assert "Traceback" not in taken.stderr


def test_help_never_imports_the_web_stack(tmp_path: Path) -> None:
    probe = (
        "import sys\nfrom handoffd import cli\n"
        "try:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'starlette', 'uvicorn', 'jinja2', 'markdown_it', 'handoffd.board'}))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            cwd=tmp_path, env=command_env(), timeout=30, check=True)  # fmt: skip
    assert "web" in result.stdout  # the command is listed...
    assert result.stdout.strip().splitlines()[-1] == "[]"  # ...and nothing of it imported


# --- the Host header (docs/protocol.md §9: DNS rebinding) -------------------------------------


def status_for(url: str, path: str, host: str, method: str = "GET") -> int:
    """The status a real server at `url` answers to `path` sent with this `Host` header."""
    address = url.removeprefix("http://").rstrip("/")
    connection = http.client.HTTPConnection(address, timeout=10)
    try:
        connection.putrequest(method, path, skip_host=True)
        connection.putheader("Host", host)
        connection.endheaders()
        return connection.getresponse().status
    finally:
        connection.close()


PAGES = ["/", "/fragment", "/archive", "/api/cards", "/card/x@QA", "/static/board.css", "/nope"]


@pytest.mark.parametrize("method", ["GET", "HEAD", "POST"])
@pytest.mark.parametrize(
    "host", ["attacker.example", "attacker.example:{port}", "127.0.0.1", "127.0.0.1:1",
             "localhost.:{port}", "127.0.0.1:{port}.attacker.example", ""],
)  # fmt: skip
def test_a_host_that_does_not_name_the_server_is_421_on_every_request(
    project: Project, host: str, method: str
) -> None:
    colourful(project)
    with serving(project.root) as url:
        port = url.rsplit(":", 1)[1]
        for path in PAGES:
            assert status_for(url, path, host.format(port=port), method) == 421, path


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST:{port}",
                                  "[::1]:{port}"])  # fmt: skip
def test_the_servers_own_address_is_answered(project: Project, host: str) -> None:
    names = colourful(project)
    with serving(project.root) as url:
        port = url.rsplit(":", 1)[1]
        for path in ["/", "/api/cards", f"/card/{names['red']}", "/static/board.css"]:
            assert status_for(url, path, host.format(port=port)) == 200, path


def test_the_command_answers_to_the_host_it_was_given_and_to_no_other(project: Project) -> None:
    process, url = serve(project, "--host", "127.0.0.2")
    try:
        port = url.rstrip("/").rsplit(":", 1)[1]
        assert status_for(url, "/api/cards", f"127.0.0.2:{port}") == 200
        assert status_for(url, "/api/cards", f"localhost:{port}") == 200
        assert status_for(url, "/api/cards", f"attacker.example:{port}") == 421
    finally:
        stop(process)


# --- hostile files (docs/protocol.md Part II) -------------------------------------------------

SECRET = "TOP-SECRET-LINE"


def test_a_report_or_error_linked_outside_never_reaches_a_page(
    project: Project, tmp_path: Path
) -> None:
    (tmp_path / "secret.md").write_text(f"---\nstatus: RUNNING\n---\n{SECRET}\n")
    (tmp_path / "secret.txt").write_text(f"{SECRET}\n")
    failed = project.put("coder", "50_20260101T000000Z_000009_from_coder_to_nobody.handoff",
                         box="failed", id=ident(9), to="nobody")  # fmt: skip
    (failed.parent / f"{failed.name}.error").symlink_to(tmp_path / "secret.txt")
    put(project, 2, "QA")
    folder = project.handoffs("QA") / "reports" / ident(2)
    folder.mkdir(parents=True)
    (folder / "20260101T000001.000000Z_RUNNING.md").symlink_to(tmp_path / "secret.md")
    with serving(project.root) as url:
        for path in ["/", "/api/cards", f"/card/{ident(9)}@coder", f"/card/{ident(2)}@QA"]:
            with urllib.request.urlopen(url + path, timeout=10) as answer:
                assert SECRET not in answer.read().decode(), path


def test_every_page_answers_with_fifos_where_files_should_be(project: Project) -> None:
    """A FIFO report, heartbeat or `.error` must not hold a worker thread: the pages (and the
    static files after them) answer within the 10 s a hang is given."""
    names = colourful(project)
    handoffs = project.handoffs("cleaner")
    (handoffs / "heartbeat").unlink()
    os.mkfifo(handoffs / "heartbeat")
    os.mkfifo(handoffs / "reports" / ident(2) / "20260101T000002.000000Z_RUNNING.md")
    failed = project.put("coder", "50_20260101T000000Z_000009_from_coder_to_nobody.handoff",
                         box="failed", id=ident(9), to="nobody")  # fmt: skip
    os.mkfifo(failed.parent / f"{failed.name}.error")
    pages = ["/", "/fragment", "/archive", "/api/cards", f"/card/{names['yellow']}",
             f"/card/{ident(9)}@coder", "/static/board.css"]  # fmt: skip
    with serving(project.root) as url:
        for path in pages * 3:
            with urllib.request.urlopen(url + path, timeout=10) as answer:
                assert answer.status == 200, path


# --- every file in failed/ is a card, and every link resolves ----------------------------


class Links(HTMLParser):
    """Every `href` on a page, and every `data-card` with its colour."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.cards: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("href"):
            self.hrefs.append(str(found["href"]))
        if found.get("data-card"):
            self.cards[str(found["data-card"])] = str(found.get("data-color"))


def links(base: str, path: str) -> Links:
    with urllib.request.urlopen(base + path, timeout=10) as answer:
        parser = Links()
        parser.feed(answer.read().decode())
    return parser


def odd_files(project: Project) -> list[Path]:
    """Hand-made files a board must still show and link: a CRLF file with a CR in its name,
    names with characters a URL must encode, a refused original whose id is a delivered
    copy's and an archived duplicate beside it; the same oddities in history."""
    put(project, 1, "QA")
    new = project.box("QA", "inbox/new")
    (new / "by-hand\r.handoff").write_bytes(
        b"from: coder\r\ntype: note\r\nmessage: hi\r\n\r\nb\r\n"
    )
    for odd in ("sp ace %41 #frag ?q=1 é.handoff", "dots..and\\back.handoff"):
        project.put("QA", odd, id=odd.removesuffix(".handoff"))
    failed = project.box("coder", "failed")
    failed.mkdir(parents=True)
    refused = [failed / f"50_20260101T000000Z_{n:06d}_from_coder_to_QA{tail}.handoff"
               for n, tail in ((2, ""), (2, ".2"), (3, ""))]  # fmt: skip
    for path in refused:
        path.write_text(f"id: {ident(1)}\nfrom: coder\nto: QA\ntype: note\n\nb\n")
        Path(f"{path}.error").write_text("refused\n")
    done = project.box("QA", "inbox/completed")
    done.mkdir(parents=True)
    (done / "done\r by hand.handoff").write_bytes(
        b"id: x\r\ncompleted_at: 2026-01-01T00:00:00Z\r\n\r\n"
    )
    (done / "done%2F.handoff").write_text("id: a/b\ncompleted_at: 2026-01-01T00:00:00Z\n\nb\n")
    return refused


def test_every_refused_file_is_a_card_and_every_link_on_every_page_resolves(
    project: Project,
) -> None:
    refused = odd_files(project)
    with serving(project.root) as base:
        open_page, archive = links(base, "/"), links(base, "/archive")
        assert sum(1 for c in open_page.cards.values() if c == "red") == len(refused)
        assert len(open_page.cards) == len(refused) + 4  # the copies in QA's new/
        assert len(archive.cards) == 2
        hrefs = {h for page in (open_page, archive) for h in page.hrefs if h.startswith("/")}
        assert sum(h.startswith("/card/") for h in hrefs) == len(refused) + 6
        for href in sorted(hrefs):
            with urllib.request.urlopen(base + href, timeout=10) as answer:
                assert answer.status == 200, href
                if href.startswith("/card/"):
                    shown = links(base, href).cards
                    assert list(shown) and unquote(href.removeprefix("/card/")) in shown
