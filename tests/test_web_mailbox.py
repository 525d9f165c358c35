"""The operator on the web board (docs/protocol.md §18): the Send work form posting to
`/send` under §13's guards, the "For you" section above the columns, counted in the title
and notified, and Reply and Acknowledge on the operator's cards — over HTTP, then in a
real headless Chromium (with screenshots a person looks at)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from handoffd.core import handoff as hf
from tests.conftest import Project
from tests.daemon_support import handoffd
from tests.test_mailbox import box, deliver, from_agent
from tests.test_web_actions import CSRF, board, keyed, web_log
from tests.web_support import KEY, serving

FORM = {"content-type": "application/x-www-form-urlencoded"}
SHOTS = Path(os.environ.get("HANDOFFD_SHOTS", "/tmp/handoffd-shots"))


def post(client: Any, path: str, fields: list[tuple[str, str]], **headers: str) -> Any:
    from urllib.parse import urlencode

    return client.post(path, content=urlencode(fields), headers={**FORM, **headers})


def for_operator(project: Project) -> str:
    """cleaner hands a note to the operator, delivered; its card."""
    from_agent(project, "cleaner", "Needs human review: the release notes")
    deliver(project)
    [copy] = box(project, "inbox/new")
    return f"{hf.path_id(str(copy))}@operator"


# --- over HTTP -----------------------------------------------------------------------------


def test_send_work_queues_the_commands_original_and_lands_on_the_board_saying_sent(
    project: Project,
) -> None:
    client = keyed(project)
    page = client.get("/").text
    assert 'action="/send"' in page and 'value="coder"' in page and 'value="all"' in page
    fields = [("csrf", CSRF), ("to", "coder"), ("to", "QA"), ("task", "style-guide"),
              ("priority", "30"), ("text", "Read the style guide.\nThen apply it.")]  # fmt: skip
    answer = post(client, "/send", fields)
    assert answer.status_code == 303
    [original] = box(project, "outbox")
    handoff = hf.parse(original.read_bytes(), original.name)
    assert (handoff.get("to"), handoff.get("task"), handoff.get("priority")) == (
        "coder,QA", "style-guide", "30"
    )  # fmt: skip
    assert handoff.get("sent_by") == "ann" and handoff.get("from") == "operator"
    ident = hf.path_id(str(original))
    query = parse_qs(urlsplit(answer.headers["location"]).query)
    assert query["card"] == [f"{ident}@coder,{ident}@QA"]
    landed = client.get(answer.headers["location"]).text
    assert f"Sent {ident}@coder · Sent {ident}@QA" in landed
    assert web_log(project)[-1]["action"] == "send" and web_log(project)[-1]["result"] == "ok"


def test_send_work_names_dependencies_by_their_cards(project: Project) -> None:
    card = for_operator(project)
    fields = [("csrf", CSRF), ("to", "coder"), ("depends_on", card), ("text", "After that.")]
    assert post(keyed(project), "/send", fields).status_code == 303
    [original] = box(project, "outbox")
    assert hf.parse(original.read_bytes(), original.name).get("depends_on") == card.split("@")[0]


def test_a_refused_send_is_409_with_the_commands_words_and_queues_nothing(
    project: Project,
) -> None:
    answer = post(keyed(project), "/send", [("csrf", CSRF), ("to", "nobody"), ("text", "x")])
    assert answer.status_code == 409
    assert "HANDOFF INVALID: handoffd send" in answer.text
    assert "Unknown recipient role &#39;nobody&#39;." in answer.text
    assert box(project, "outbox") == []


@pytest.mark.parametrize("how", ["no key", "no csrf", "wrong csrf", "other origin"])
def test_send_work_is_guarded_as_every_action(project: Project, how: str) -> None:
    client = board(project) if how == "no key" else keyed(project)
    token = {"no csrf": None, "wrong csrf": "x" * 64}.get(how, CSRF)
    fields = [("to", "coder"), ("text", "work"), *([("csrf", token)] if token else [])]
    headers = {"origin": "http://evil.example"} if how == "other origin" else {}
    assert post(client, "/send", fields, **headers).status_code == 403
    assert box(project, "outbox") == []


def test_a_read_only_board_shows_no_send_form_and_refuses_the_post(project: Project) -> None:
    client = keyed(project, writable=False)
    assert 'action="/send"' not in client.get("/").text
    assert (
        post(client, "/send", [("csrf", CSRF), ("to", "coder"), ("text", "w")]).status_code == 405
    )
    assert 'action="/send"' not in board(project).get("/").text  # without the key, no form


def test_for_you_is_above_the_columns_counted_in_the_title_with_reply_and_acknowledge(
    project: Project,
) -> None:
    card = for_operator(project)
    page = keyed(project).get("/").text
    assert page.index('class="for-you"') < page.index('class="columns"')
    assert page.count(f'data-card="{card}"') == 1  # shown once: in For you, not a column
    assert re.search(r"<title>\(1\) handoffd", page)
    actions = re.findall(rf'action="/card/{re.escape(card)}/(\w+)"', page)
    assert actions == ["reply", "ack"]  # never Block or Release: no agent takes it
    card_page = keyed(project).get(f"/card/{card}").text
    assert ">Reply</button>" in card_page and ">Acknowledge</button>" in card_page


def test_reply_and_acknowledge_from_the_card_page(project: Project) -> None:
    card = for_operator(project)
    client = keyed(project)
    answer = post(client, f"/card/{card}/reply", [("csrf", CSRF), ("text", "Approved.")])
    assert answer.status_code == 303, answer.text
    [reply] = box(project, "outbox")
    sent = hf.parse(reply.read_bytes(), reply.name)
    assert (sent.get("to"), sent.get("in_reply_to")) == ("cleaner", card.split("@")[0])
    assert f"Replied to {card}" in client.get(answer.headers["location"]).text
    again = post(client, f"/card/{card}/ack", [("csrf", CSRF)])
    assert again.status_code == 409 and f"UNKNOWN_CARD: {card}" in again.text
    second = for_operator(project)
    assert post(client, f"/card/{second}/ack", [("csrf", CSRF)]).status_code == 303
    [done] = [p for p in box(project, "inbox/completed") if second.split("@")[0] in p.name]
    assert hf.read(str(done)).get("acked_by") == "ann"


# --- in Chromium -----------------------------------------------------------------------------

sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed")
CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    tab = context.new_page()
    console: list[str] = []
    tab.on("console", lambda message: console.append(message.text))
    yield tab
    context.close()
    assert not [text for text in console if "Content Security Policy" in text]


def test_a_new_card_for_you_shows_live_is_counted_and_notified(project: Project, page: Any) -> None:
    page.add_init_script(
        "window.__shown = [];"
        "window.Notification = function (title, options) {"
        "  window.__shown.push(options.body); };"
        "window.Notification.permission = 'granted';"
    )
    with serving(project.root, key=KEY) as url:
        page.goto(f"{url}/?key={KEY}")
        assert page.locator("[data-for-you]").count() == 0
        card = for_operator(project)
        page.wait_for_selector(f'[data-for-you] [data-card="{card}"]', timeout=2000)
        assert page.evaluate("window.__shown") == [card]
        assert page.title().startswith("(1) handoffd")
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "for-you.png"), full_page=True)
        section = page.locator("[data-for-you]")
        section.locator("form.act-reply textarea").fill("Approved, ship it.")
        with page.expect_response(lambda r: r.request.method == "POST", timeout=30000):
            section.locator("form.act-reply button").click()
        page.wait_for_selector("[data-for-you]", state="detached", timeout=2000)
        assert page.locator("#done").inner_text() == f"Replied to {card}"
    [reply] = box(project, "outbox")
    assert hf.parse(reply.read_bytes(), reply.name).body.endswith("Approved, ship it.\n")


def test_the_send_work_form_gives_work_that_an_agent_takes(project: Project, page: Any) -> None:
    with serving(project.root, key=KEY) as url:
        page.goto(f"{url}/?key={KEY}")
        page.click("#send-work summary")
        form = page.locator("form.send")
        form.locator('input[name=to][value="QA"]').check()
        form.locator("input[name=task]").fill("release-notes")
        form.locator("textarea[name=text]").fill("Write the release notes for 0.4.\nKeep it short.")
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.locator("#send-work").screenshot(path=str(SHOTS / "send-work.png"))
        form.locator("button[type=submit]").click()
        page.wait_for_selector("#done:not([hidden])", timeout=30000)
        [original] = box(project, "outbox")
        card = f"{hf.path_id(str(original))}@QA"
        assert page.locator("#done").inner_text() == f"Sent {card}"
    assert handoffd("run", "--once", str(project.root)).returncode == 0
    taken = project.run("ready_for_next", role="QA").out
    assert "TASK_NAME: release-notes\nSENT_BY: ann\n" in taken
    assert taken.endswith("Write the release notes for 0.4.\nKeep it short.\n")
