"""The web board acts (docs/protocol.md §13): the forms the table's operations make
(handoffd/adapters/web.py), each POST running the command's own function, and every rule
that guards a write — the key and its cookie, the CSRF token, the Origin, the Host,
`--read-only` — each shown to change nothing when it refuses."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import socket
import stat
import threading
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from handoffd.adapters.web import Actions, forms
from handoffd.web.app import Keys, create_app
from tests.conftest import Project, make_project, snapshot
from tests.daemon_support import handoffd
from tests.test_operator import inbox_locked
from tests.test_web import serve, status_for, stop
from tests.web_support import KEY, colourful, ident, name, serving

BASE = "http://127.0.0.1:8765"
CSRF = Keys(KEY, 8765, "/").csrf


def board(
    project: Project,
    writable: bool = True,
    loopback: bool = True,
    port: int = 8765,
    key: str = KEY,
) -> TestClient:
    app = create_app(str(project.root), actions=Actions(str(project.root), by="ann"), key=key,
                     writable=writable, loopback=loopback, port=port)  # fmt: skip
    return TestClient(app, base_url=f"http://127.0.0.1:{port}", follow_redirects=False)


def keys_of(project: Project, port: int = 8765) -> Keys:
    return Keys(KEY, port, str(project.root))


def keyed(project: Project, **options: bool) -> TestClient:
    client = board(project, **options)
    keys = keys_of(project)
    client.cookies.set(keys.cookie, keys.value)
    return client


def actions_on(html: str, card: str) -> list[str]:
    """The actions the page offers on `card`, by the forms' targets."""
    return re.findall(rf'action="/card/{re.escape(card)}/(\w+)"', html)


def web_log(project: Project) -> list[dict[str, str]]:
    path = project.root / ".swarmforge" / "daemon" / "web.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# --- the key -------------------------------------------------------------------------------


def test_the_key_in_the_url_becomes_an_httponly_strict_cookie_and_leaves_the_url(
    project: Project,
) -> None:
    answer = board(project).get(f"/?key={KEY}")
    assert (answer.status_code, answer.headers["location"]) == (303, "/")
    cookie = answer.headers["set-cookie"]
    keys = keys_of(project)
    assert cookie.startswith(f"{keys.cookie}={keys.value};") and KEY not in cookie
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    kept = board(project).get(f"/archive?page=2&key={KEY}")
    assert kept.headers["location"] == "/archive?page=2"
    assert board(project).get("/?key=wrong").status_code == 403


def test_two_boards_in_one_browser_keep_their_own_cookies(project: Project, tmp_path: Path) -> None:
    """Cookies ignore the port: each board names its own (its port, its project), so the
    second board's key never replaces the first's and both keep their forms."""
    names = colourful(project)
    (tmp_path / "other").mkdir()
    other = make_project(tmp_path.resolve() / "other")
    first, second = board(project), board(other, port=8767, key="s" * 32)
    first.get(f"/?key={KEY}")
    second.cookies = first.cookies  # one browser: every cookie of 127.0.0.1, whatever the port
    second.get(f"/?key={'s' * 32}")
    first.cookies = second.cookies
    assert actions_on(first.get(f"/card/{names['red']}").text, names["red"])
    done = first.post(f"/card/{names['red']}/unblock", data={"csrf": CSRF})
    assert done.status_code == 303
    assert keys_of(project).cookie != keys_of(other, 8767).cookie != keys_of(project, 8767).cookie


def test_a_cookie_holding_the_key_itself_is_not_the_boards(project: Project) -> None:
    """The cookie's value is derived from the key, never the key: the key is taken only
    in the URL, so what the browser sends to every local port is not the key."""
    names = colourful(project)
    client = board(project)
    client.cookies.set(keys_of(project).cookie, KEY)
    before = snapshot(project.root / ".swarmforge")
    assert client.post(f"/card/{names['red']}/unblock", data={"csrf": CSRF}).status_code == 403
    assert snapshot(project.root / ".swarmforge") == before


HOW = "open the URL with ?key= that `handoffd web` printed when it started"


def test_without_the_key_a_refusal_says_how_to_get_it(project: Project) -> None:
    names = colourful(project)
    done = board(project).post(f"/card/{names['red']}/unblock", data={"csrf": CSRF})
    assert done.status_code == 403 and HOW in done.text and "--key-file" in done.text
    wrong = board(project).get("/?key=wrong")  # a page of the board: no terminal quoting
    assert wrong.status_code == 403 and HOW.replace("`", "") in wrong.text
    closed = board(project, loopback=False).get("/")
    assert closed.status_code == 403 and HOW in closed.text


def test_an_old_key_after_a_restart_shows_on_every_page_how_to_get_the_new_one(
    project: Project,
) -> None:
    """A browser holding the cookie of a board that restarted with a new key sees why its
    forms are gone, and a POST from a page rendered before the restart says the same."""
    names = colourful(project)
    client = board(project)
    client.cookies.set(keys_of(project).cookie, Keys("o" * 32, 8765, str(project.root)).value)
    for page in ("/", "/fragment", f"/card/{names['red']}", "/archive", "/card/x@QA"):
        html = client.get(page).text
        assert html.count("This browser holds an old key of this board") == 1, page
        assert HOW in html, page
        assert "<form" not in html
    done = client.post(f"/card/{names['red']}/unblock", data={"csrf": CSRF})
    assert done.status_code == 403 and "an old key of this board" in done.text
    assert "old key" not in board(project).get("/").text  # no cookie at all: nothing to say
    assert "old key" not in keyed(project).get("/").text


def test_forms_appear_only_for_whoever_holds_the_key(project: Project) -> None:
    names = colourful(project)
    page = f"/card/{names['red']}"
    assert "<form" not in board(project).get(page).text
    html = keyed(project).get(page).text
    assert actions_on(html, names["red"]) == ["answer", "block", "unblock"]
    assert f'name="csrf" value="{CSRF}"' in html
    assert actions_on(keyed(project).get("/").text, names["red"]) == ["answer", "block", "unblock"]


def test_each_card_offers_the_actions_its_state_allows(project: Project) -> None:
    names = colourful(project)
    client = keyed(project)
    offered = {what: actions_on(client.get(f"/card/{card}").text, card)
               for what, card in names.items()}  # fmt: skip
    assert offered == {
        "red": ["answer", "block", "unblock"],
        "yellow": ["release", "block"],
        "orange": ["block"],
        "orange-note": ["block"],
        "green": ["reopen"],
        "inherited": ["answer", "block"],
    }


def test_read_only_serves_no_form_and_answers_every_post_405(project: Project) -> None:
    names = colourful(project)
    client = keyed(project, writable=False)
    assert "<form" not in client.get(f"/card/{names['red']}").text + client.get("/").text
    before = snapshot(project.root / ".swarmforge")
    done = client.post(f"/card/{names['red']}/unblock", data={"csrf": CSRF})
    assert done.status_code == 405
    assert snapshot(project.root / ".swarmforge") == before


def test_off_loopback_every_request_needs_the_key(project: Project) -> None:
    colourful(project)
    assert board(project, loopback=False).get("/").status_code == 403
    assert board(project, loopback=False).get("/api/cards").status_code == 403
    assert keyed(project, loopback=False).get("/").status_code == 200


# --- acting --------------------------------------------------------------------------------


def test_answer_from_the_board_stores_it_unblocks_and_logs_the_action(project: Project) -> None:
    names = colourful(project)
    card = names["red"]
    done = keyed(project).post(
        f"/card/{card}/answer", data={"csrf": CSRF, "text": "Use staging-2."}
    )
    assert done.status_code == 303 and done.headers["location"].startswith(f"/card/{card}?done=")
    copy = project.box("QA", "inbox/new") / f"50_{ident(1)}_to_QA.handoff"
    assert "blocked_reason" not in copy.read_text()
    [report] = (project.handoffs("QA") / "reports" / ident(1)).iterdir()
    assert report.name.endswith("_ANSWER.md") and "agent: ann" in report.read_text()
    [line] = web_log(project)
    assert {k: line[k] for k in ("event", "action", "card", "by", "result")} == {
        "event": "web_action", "action": "answer", "card": card, "by": "ann", "result": "ok",
    }  # fmt: skip
    assert "timestamp" in line


# --- what the pages say (docs/protocol.md §15, "The web board guides") --------------------


def test_an_action_that_succeeded_says_so_on_the_page_it_lands_on(project: Project) -> None:
    names = colourful(project)
    card = names["red"]
    client = keyed(project)
    done = client.post(f"/card/{card}/answer", data={"csrf": CSRF, "text": "Use staging-2."})
    landed = client.get(done.headers["location"])
    assert landed.status_code == 200
    assert f'<p class="done-note" role="status">Answered {card}</p>' in landed.text
    forged = done.headers["location"].replace("done=answer", "done=dismiss")
    assert "done-note" not in client.get(forged).text  # a link cannot say it falsely
    assert "done-note" not in client.get(f"/card/{card}").text
    plain = {"Accept": "text/plain"}  # as the open page sends it
    blocked = client.post(f"/card/{names['orange']}/block", data={"csrf": CSRF, "reason": "why"},
                          headers=plain)  # fmt: skip
    assert (blocked.status_code, blocked.text) == (200, f"Blocked {names['orange']}\n")


def test_a_retry_lands_on_the_open_board_saying_retried(project: Project) -> None:
    """A retried original may be delivered at once, and its card gone: the open cards are
    where it lands, saying what was done."""
    from tests.daemon_support import queue

    original = queue(project, "QA", ["coder"])
    target = project.box("QA", "failed") / original.name
    target.parent.mkdir(parents=True, exist_ok=True)
    os.rename(original, target)
    Path(f"{target}.error").write_text("was refused once\n")
    card = f"{original.name.split('_', 1)[1].split('_to_')[0]}@QA"
    client = keyed(project)
    done = client.post(f"/card/{card}/retry", data={"csrf": CSRF})
    assert done.status_code == 303 and done.headers["location"].startswith("/?done=retry&")
    page = client.get(done.headers["location"]).text
    assert f'role="status">Retried {card}</p>' in page


def test_without_the_key_every_page_says_in_one_line_it_is_read_only_and_how_to_act(
    project: Project,
) -> None:
    colourful(project)
    hint = "Read-only: to act on cards, open the URL with ?key= that handoffd web printed"
    for path in ("/", "/archive", f"/card/{ident(1)}@QA"):
        assert board(project).get(path).text.count(hint) == 1, path
        assert hint not in keyed(project).get(path).text, path
    shown = board(project, writable=False).get("/").text
    assert "Read-only: this board was started with --read-only" in shown and hint not in shown


def test_a_wrong_key_is_a_page_of_the_board_with_a_way_back(project: Project) -> None:
    answer = board(project).get("/?key=wrong")
    assert answer.status_code == 403
    assert answer.headers["content-type"].startswith("text/html")
    assert "Forbidden: not the board&#39;s key; open the URL with ?key=" in answer.text
    assert '<a href="/">Back to the open cards</a>' in answer.text
    assert str(project.root) in answer.text  # on loopback the board is readable anyway
    off = board(project, loopback=False).get("/?key=wrong")
    assert off.status_code == 403 and str(project.root) not in off.text  # it names nothing


@pytest.mark.parametrize(
    ("what", "action", "fields", "said"),
    [("red", "answer", {"text": ""}, "INVALID_ANSWER: the answer is empty; give its text"),
     ("orange", "retry", {}, "NOT_FAILED: {card}"),
     ("orange", "dismiss", {}, "NOT_FAILED: {card}"),
     ("orange", "reopen", {}, "NOT_COMPLETED: {card}"),
     ("orange", "release", {}, "NO_CURRENT_TASK"),
     ("orange", "block", {"reason": ""}, "INVALID_REASON: a blocked reason is one line of 1 "
      "to 200 characters."),
     ("green", "answer", {"text": "late"}, "UNKNOWN_CARD: {card}"),
     ("green", "block", {"reason": "no"}, "UNKNOWN_CARD: {card}")],
)  # fmt: skip
def test_a_refused_action_is_409_with_the_commands_message_and_changes_nothing(
    project: Project, what: str, action: str, fields: dict[str, str], said: str
) -> None:
    names = colourful(project)
    card = names[what]
    name = f"50_{ident(3)}_to_QA.handoff"
    before = snapshot(project.root / ".swarmforge" / "handoffs")
    client = keyed(project)
    done = client.post(f"/card/{card}/{action}", data={"csrf": CSRF, **fields})
    message = said.format(card=card, name=name)
    assert done.status_code == 409 and message in done.text
    plain = client.post(f"/card/{card}/{action}", data={"csrf": CSRF, **fields},
                        headers={"Accept": "text/plain"})  # fmt: skip
    assert (plain.status_code, plain.text.splitlines()[0]) == (409, message)
    assert snapshot(project.root / ".swarmforge" / "handoffs") == before
    assert web_log(project)[-1]["result"] == message


def test_a_retry_from_the_board_that_would_be_refused_again_is_still_invalid(
    project: Project,
) -> None:
    """The board offers no force (docs/protocol.md §13): a file certain to be refused again
    stays put, and the page says why and how to move it anyway from the command line."""
    failed = project.put("coder", name(7, "nobody"), box="failed", id=ident(7), to="nobody")
    Path(f"{failed}.error").write_text("unknown recipient role 'nobody' (not in roles.tsv)\n")
    card = f"{ident(7)}@coder"
    before = snapshot(failed.parent)
    done = keyed(project).post(f"/card/{card}/retry", data={"csrf": CSRF, "force": "1"})
    assert done.status_code == 409
    assert "STILL_INVALID: unknown recipient role &#39;nobody&#39; (not in roles.tsv)" in done.text
    assert f"handoffd retry --force {card}" in done.text
    assert snapshot(failed.parent) == before
    assert not (project.box("coder", "outbox") / failed.name).exists()


@pytest.mark.parametrize(("action", "field"), [("answer", "text"), ("block", "reason")])
def test_a_field_that_is_not_utf8_is_refused_as_the_command_refuses_it(
    project: Project, action: str, field: str
) -> None:
    """Bytes that are not UTF-8 in a form are the command's refusal (409), never stored
    with U+FFFD in their place, never a 500."""
    card = colourful(project)["red"]
    before = snapshot(project.root / ".swarmforge" / "handoffs")
    done = keyed(project).post(
        f"/card/{card}/{action}", content=f"csrf={CSRF}&{field}=ok%C3".encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded", "Accept": "text/plain"},
    )  # fmt: skip
    token = "INVALID_ANSWER: the text" if action == "answer" else "INVALID_REASON: --reason"
    assert (done.status_code, done.text) == (
        409, f"{token} is not UTF-8 (it holds the byte 0xc3); give it as UTF-8 text\n",
    )  # fmt: skip
    assert snapshot(project.root / ".swarmforge" / "handoffs") == before


def test_a_csrf_token_that_is_not_utf8_is_403_like_any_wrong_one(project: Project) -> None:
    card = colourful(project)["red"]
    done = keyed(project).post(
        f"/card/{card}/answer", content=f"csrf={CSRF[:-2]}%C3&text=ok".encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )  # fmt: skip
    assert done.status_code == 403


@pytest.mark.parametrize(
    ("action", "said"),
    [("block", "INVALID_REASON: a blocked reason is one line of 1 to 200 characters."),
     ("answer", "INVALID_ANSWER: the answer is empty; give its text")],
)  # fmt: skip
def test_a_form_without_its_field_is_refused_as_the_empty_field(
    project: Project, action: str, said: str
) -> None:
    """A required field left out of the POST is the command's refusal (409), not a crash."""
    names = colourful(project)
    before = snapshot(project.root / ".swarmforge" / "handoffs")
    done = keyed(project).post(f"/card/{names['red']}/{action}", data={"csrf": CSRF},
                               headers={"Accept": "text/plain"})  # fmt: skip
    assert (done.status_code, done.text) == (409, said + "\n")
    assert snapshot(project.root / ".swarmforge" / "handoffs") == before
    assert web_log(project)[-1]["result"] == said


def test_release_of_a_card_not_in_process_names_the_card(project: Project) -> None:
    """The role holds other work: the refusal names the card the person chose, not a file."""
    from tests.web_support import put

    colourful(project)
    put(project, 7, "cleaner")
    card = f"{ident(7)}@cleaner"
    done = keyed(project).post(f"/card/{card}/release", data={"csrf": CSRF},
                               headers={"Accept": "text/plain"})  # fmt: skip
    assert done.status_code == 409
    assert done.text.splitlines()[0] == f"NOT_IN_PROCESS: {card}"


def test_a_form_not_url_encoded_is_415_saying_how_to_send_it(project: Project) -> None:
    names = colourful(project)
    before = snapshot(project.root / ".swarmforge")
    done = keyed(project).post(f"/card/{names['red']}/unblock", data={"csrf": CSRF},
                               files={"note": ("a.txt", b"x")})  # fmt: skip
    assert done.status_code == 415
    assert "application/x-www-form-urlencoded" in done.text and "stale" not in done.text
    assert snapshot(project.root / ".swarmforge") == before


def test_a_stale_form_says_what_became_of_the_card(project: Project) -> None:
    """An answer posted from a page shown before the card turned green: the command's
    refusal, then what the card is now, and a way back to it."""
    names = colourful(project)
    card = names["green"]
    client = keyed(project)
    page = client.post(f"/card/{card}/answer", data={"csrf": CSRF, "text": "late"})
    assert page.status_code == 409 and f"UNKNOWN_CARD: {card}" in page.text
    assert "It is GREEN now (completed" in page.text and "and does not offer Answer" in page.text
    assert 'href="/card/' in page.text and "Back to the card" in page.text
    plain = client.post(f"/card/{card}/answer", data={"csrf": CSRF, "text": "late"},
                        headers={"Accept": "text/plain"})  # fmt: skip
    # the command's lines (its token, and that the card is completed), then the board's
    first, *_, last = plain.text.splitlines()
    assert first == f"UNKNOWN_CARD: {card}" and last.startswith("It is GREEN now (completed")
    gone = client.post(f"/card/{ident(99)}@QA/answer", data={"csrf": CSRF, "text": "x"})
    assert gone.status_code == 409 and "No card of this name is in the queue now." in gone.text
    assert "Back to the open cards" in gone.text


@pytest.mark.parametrize(
    ("cookie", "csrf", "origin"),
    [(None, CSRF, None), ("wrong", CSRF, None), (KEY, None, None), (KEY, "0" * 64, None),
     (KEY, CSRF, "http://attacker.example"), (KEY, CSRF, "null"),
     (KEY, CSRF, "http://127.0.0.1:9999")],
)  # fmt: skip
def test_a_post_without_the_cookie_the_csrf_or_from_another_origin_is_403_and_changes_nothing(
    project: Project, cookie: str | None, csrf: str | None, origin: str | None
) -> None:
    names = colourful(project)
    client = board(project)
    if cookie:
        client.cookies.set(keys_of(project).cookie, keys_of(project).value if cookie == KEY
                           else cookie)  # fmt: skip
    before = snapshot(project.root / ".swarmforge")
    data = {"text": "hi", **({"csrf": csrf} if csrf else {})}
    headers = {"Origin": origin} if origin else {}
    done = client.post(f"/card/{names['red']}/answer", data=data, headers=headers)
    assert done.status_code == 403
    assert snapshot(project.root / ".swarmforge") == before


def test_the_boards_own_origin_is_taken(project: Project) -> None:
    names = colourful(project)
    done = keyed(project).post(f"/card/{names['red']}/unblock", data={"csrf": CSRF},
                               headers={"Origin": BASE})  # fmt: skip
    assert done.status_code == 303


def test_a_post_with_a_foreign_host_is_421_and_changes_nothing(project: Project) -> None:
    names = colourful(project)
    before = snapshot(project.root / ".swarmforge")
    with serving(project.root, key=KEY) as url:
        port = url.rsplit(":", 1)[1]
        path = f"/card/{names['red']}/unblock"
        assert status_for(url, path, f"attacker.example:{port}", "POST") == 421
    assert snapshot(project.root / ".swarmforge") == before


def test_an_answers_markup_is_shown_as_text_never_run(project: Project) -> None:
    names = colourful(project)
    payload = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    client = keyed(project)
    assert (
        client.post(
            f"/card/{names['red']}/answer", data={"csrf": CSRF, "text": payload}
        ).status_code
        == 303
    )
    html = client.get(f"/card/{names['red']}").text
    assert "<script>alert(1)" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_the_forms_are_made_from_the_table() -> None:
    """One form per operation with a `form`, its field the operation's own parameter."""
    from handoffd.adapters.web import FORMS

    assert sorted(FORMS) == ["ack", "answer", "block", "dismiss", "release", "reopen", "reply",
                             "retry", "unblock"]  # fmt: skip
    assert [f.name for f in FORMS["reply"].fields] == ["text"] and FORMS["ack"].fields == []
    assert [f.name for f in FORMS["answer"].fields] == ["text"]
    assert [f.name for f in FORMS["block"].fields] == ["reason"]
    assert FORMS["retry"].fields == [] and callable(forms)


# --- the command ---------------------------------------------------------------------------


def test_the_command_prints_the_keyed_url_once_and_keeps_the_key_in_a_0600_file(
    project: Project, tmp_path: Path
) -> None:
    key_file = tmp_path / "board.key"
    process, _ = serve(project, "--key-file", str(key_file))
    err = stop(process)
    key = key_file.read_text().strip()
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600 and len(key) >= 22
    assert err.count(f"?key={key}") == 1
    again, _ = serve(project, "--key-file", str(key_file))
    assert stop(again).count(f"?key={key}") == 1  # the same key, kept


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620])
def test_a_key_file_other_users_can_open_is_refused_saying_chmod_600(
    project: Project, tmp_path: Path, mode: int
) -> None:
    key_file = tmp_path / "board.key"
    key_file.write_text("a" * 32 + "\n")
    key_file.chmod(mode)
    refused = handoffd("web", str(project.root), "--port", "0", "--key-file", str(key_file),
                       timeout=10)  # fmt: skip
    assert refused.returncode == 1 and refused.stdout == ""
    [line] = refused.stderr.splitlines()
    assert f"chmod 600 {key_file}" in line and oct(mode)[2:] in line


def test_an_optional_box_left_empty_is_not_given(project: Project) -> None:
    """Reopen's reason is optional: an empty box reopens, as the command without --reason."""
    names = colourful(project)
    done = keyed(project).post(f"/card/{names['green']}/reopen", data={"csrf": CSRF, "reason": ""})
    assert done.status_code == 303
    assert (project.box("QA", "inbox/new") / f"50_{ident(5)}_to_QA.handoff").exists()


# --- a held inbox lock (docs/protocol.md §15, Part III) ------------------------------------

POSTS = 45  # more than the pages' thread pool (40): each used to hold one for ever


@pytest.mark.slow  # ~11 s: two rounds of the 5-s wait
def test_posts_waiting_on_a_held_lock_are_503_and_never_hang_a_page(project: Project) -> None:
    """A process holds QA's inbox lock while 45 operators unblock QA's red card at once:
    every page still answers at once (no page waits on a lock, and the actions wait on
    threads of their own); each POST is 503 after the 5 s wait, the lock's holder named,
    never held longer; nothing changes."""
    names = colourful(project)
    before = snapshot(project.handoffs("QA"))
    with serving(project.root, key=KEY) as url, inbox_locked(project, "QA"):
        port = int(url.rsplit(":", 1)[1])
        keys = Keys(KEY, port, str(project.root))
        answers: list[tuple[int, str]] = []
        posts = [threading.Thread(target=lambda: answers.append(unblock(port, keys, names["red"])))
                 for _ in range(POSTS)]  # fmt: skip
        for post in posts:
            post.start()
        pages = [page(port, path) for path in ("/", "/fragment", f"/card/{names['red']}")]
        for post in posts:
            post.join(timeout=60)
    assert [status for status, _ in pages] == [200, 200, 200]
    assert len(answers) == POSTS and {status for status, _ in answers} == {503}
    said = {body.splitlines()[0] for _, body in answers}
    assert (
        "Service Unavailable: INBOX_BUSY: QA's inbox is locked by another process; try "
        "again" in said
    ), said
    assert snapshot(project.handoffs("QA")) == before


def unblock(port: int, keys: Keys, card: str) -> tuple[int, str]:
    """POST the Unblock form as the operator holding the key does."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Cookie": f"{keys.cookie}={keys.value}", "Accept": "text/plain",
               "Content-Type": "application/x-www-form-urlencoded"}  # fmt: skip
    connection.request("POST", f"/card/{card}/unblock", body=f"csrf={keys.csrf}", headers=headers)
    answer = connection.getresponse()
    return answer.status, answer.read().decode()


def page(port: int, path: str) -> tuple[int, str]:
    """GET a page: its status and text (one that waits 3 s is a page that hangs: it fails)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=3)
    connection.request("GET", path)
    answer = connection.getresponse()
    return answer.status, answer.read().decode()


# --- odds and ends (docs/protocol.md §15, Part III) ----------------------------------------


def raw_get(port: int, target: str) -> list[bytes]:
    """The status line and headers of `GET <target>` sent byte for byte (a client library
    would read `//host/` as another host, which is the point)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close"
                     "\r\n\r\n".encode())  # fmt: skip
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data.split(b"\r\n\r\n", 1)[0].split(b"\r\n")


@pytest.mark.parametrize(
    ("path", "location"),
    [("//evil.example/", "/evil.example/"), ("/\\evil", "/%5Cevil"), ("///evil", "/evil"),
     ("/%2F%2Fevil.example", "/evil.example"), ("/%5C%5Cevil", "/%5C%5Cevil")],
)  # fmt: skip
def test_the_keys_redirect_never_leaves_the_board(
    project: Project, path: str, location: str
) -> None:
    """The key traded for its cookie redirects to the URL without it: a path that a browser
    reads as another host (`//host/`, `/\\host`) is a path on the board instead."""
    with serving(project.root, key=KEY) as url:
        head = raw_get(int(url.rsplit(":", 1)[1]), f"{path}?key={KEY}")
    assert head[0] == b"HTTP/1.1 303 See Other"
    assert f"location: {location}".encode() in head


def test_a_client_that_drops_its_form_half_way_leaves_no_traceback(
    project: Project, tmp_path: Path
) -> None:
    names = colourful(project)
    key_file = tmp_path / "board.key"
    key_file.write_text(f"{KEY}\n")
    key_file.chmod(0o600)
    process, url = serve(project, "--key-file", str(key_file))
    try:
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        keys = Keys(KEY, port, str(project.root))
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(f"POST /card/{names['red']}/unblock HTTP/1.1\r\nHost: 127.0.0.1:"
                         f"{port}\r\nCookie: {keys.cookie}={keys.value}\r\nContent-Type: "
                         "application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\n"
                         f"csrf={keys.csrf}".encode())  # fmt: skip
        assert page(port, "/")[0] == 200  # served on, and the dropped form went by
    finally:
        err = stop(process)
    assert "Traceback" not in err and "ClientDisconnect" not in err, err


def test_a_read_only_board_says_it_is_read_only_and_never_speaks_of_a_key(
    project: Project,
) -> None:
    """`--read-only` on loopback prints no key URL: its refusal of a POST says the board
    is read-only, and a `?key=` it was never given is dropped, not refused as wrong."""
    names = colourful(project)
    client = board(project, writable=False)
    done = client.post(f"/card/{names['red']}/unblock", data={"csrf": CSRF})
    assert done.status_code == 405 and "read-only" in done.text and "key" not in done.text
    traded = client.get(f"/card/{names['red']}?key=not-this-boards")
    assert traded.status_code == 303 and traded.headers["location"] == f"/card/{names['red']}"
    assert "set-cookie" not in traded.headers


def test_web_log_is_never_written_through_a_linked_daemon_folder(
    project: Project, tmp_path: Path
) -> None:
    """`.swarmforge/daemon/` replaced by a link to a folder outside: an action from the
    board writes no `web.log` there (the action itself stands)."""
    names = colourful(project)
    outside = tmp_path / "outside"
    outside.mkdir()
    daemon = project.root / ".swarmforge" / "daemon"
    shutil.rmtree(daemon, ignore_errors=True)
    daemon.symlink_to(outside)
    done = keyed(project).post(f"/card/{names['red']}/unblock", data={"csrf": CSRF})
    assert done.status_code == 303
    assert os.listdir(outside) == []
