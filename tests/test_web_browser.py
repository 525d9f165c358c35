"""The web board in a real headless Chromium, driven by Playwright (docs/protocol.md §9):
colours against `status --json`, a live change without a reload, the detail page,
payloads that must not run, 404/405, the archive's pages."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from handoffd.web import views
from tests.conftest import Project
from tests.daemon_support import handoffd
from tests.test_web import completed, hostile
from tests.web_support import KEY, colourful, ident, put, serving

CHROMIUM = "/usr/bin/chromium"
LIVE_S = 2.0  # the contract: a change on disk shows within 2 s, without a reload

sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed")


POST_S = 30.0  # an action's own work (fsyncs, a lock) is no part of the 2 s: a loaded machine


def posted(page: Any, button: Any) -> None:
    """Click `button` and wait for its form's answer: the 2 s a change takes to show run
    from there, not from the click."""
    with page.expect_response(lambda r: r.request.method == "POST", timeout=POST_S * 1000):
        button.click()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for this module's tests (Debian's; never a downloaded one).
    Not one per session: while Playwright's sync API is started, its event loop counts as
    running in the main thread, so any other test calling `asyncio.run` (the NATS tests)
    would fail. Closed when a worker moves on to another module, it is started about once
    per worker, as the tests of a module run together."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page that records every dialog (a payload's `alert` would open one); at
    the end, no page it showed may have had anything refused by the CSP (our own script
    and stylesheet must live within it)."""
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    tab = context.new_page()
    tab.dialogs = []
    tab.on("dialog", lambda dialog: (tab.dialogs.append(dialog.message), dialog.dismiss()))
    console: list[str] = []
    tab.on("console", lambda message: console.append(message.text))
    yield tab
    context.close()
    assert not [text for text in console if "Content Security Policy" in text]


def status_json(project: Project, *args: str) -> list[dict[str, Any]]:
    result = handoffd("status", "--json", "--root", str(project.root), *args)
    assert result.returncode == 0, result.stderr
    cards: list[dict[str, Any]] = json.loads(result.stdout)
    return cards


def count(page: Any, colour: str) -> int:
    return int(page.locator(f"[data-card][data-color={colour}]").count())


def test_the_colours_on_the_pages_match_status_json(project: Project, page: Any) -> None:
    colourful(project)
    every = status_json(project, "--all")
    with serving(project.root) as url:
        page.goto(url + "/")
        for colour in ("red", "yellow", "orange"):
            expected = sum(1 for card in every if card["color"] == colour)
            assert count(page, colour) == expected > 0, colour
        assert count(page, "green") == 0
        for card in every:  # each open card once, in its colour
            if card["color"] != "green":
                element = page.locator(f'[data-card="{card["card"]}"]')
                assert element.count() == 1
                assert element.get_attribute("data-color") == card["color"]
        deps = page.locator("[data-dep]")
        colours = {card["card"]: card["color"] for card in every}
        assert deps.count() == 2
        for n in range(deps.count()):
            dep = deps.nth(n)
            assert dep.get_attribute("data-color") == colours[dep.get_attribute("data-dep")]
        page.goto(url + "/archive")
        assert count(page, "green") == sum(1 for card in every if card["color"] == "green")


def test_a_card_turns_from_orange_to_yellow_live_when_its_role_takes_it(
    project: Project, page: Any
) -> None:
    put(project, 1, "QA")
    name = f"{ident(1)}@QA"
    with serving(project.root) as url:
        page.goto(url + "/")
        assert page.locator(f'[data-card="{name}"]').get_attribute("data-color") == "orange"
        page.evaluate("window.__same_document = true")
        taken = project.run("ready_for_next", role="QA")
        assert taken.code == 0 and taken.out.startswith("TASK:"), taken.err
        # the helper has returned, the change is on disk: the page must show it within 2 s
        page.wait_for_selector(f'[data-card="{name}"][data-color="yellow"]', timeout=LIVE_S * 1000)
        assert page.evaluate("window.__same_document") is True  # no reload happened
        assert "yellow 1" in " ".join(page.locator(".count-yellow").inner_text().split())


def test_the_detail_page_renders_the_latest_report_and_lists_the_history(
    project: Project, page: Any
) -> None:
    names = colourful(project)
    with serving(project.root) as url:
        page.goto(url + views.card_url(names["yellow"]))
        latest = page.locator("#latest-report")
        assert latest.locator("li").all_inner_texts() == ["lexer done", "parse() next"]
        assert latest.locator("code").inner_text() == "parse()"
        history = page.locator("#history li")
        assert history.count() == 2
        newest, oldest = history.nth(0).inner_text(), history.nth(1).inner_text()
        assert newest.startswith("RUNNING") and "agent-cleaner" in newest
        assert "Half way:" in newest and "Started on the **parser**." in oldest
        assert "10 min ago" in oldest
        page.goto(url + views.card_url(names["orange"]))
        row = page.locator(f'tr[data-dep="{names["green"]}"]')
        assert row.get_attribute("data-color") == "green"
        row.locator("a").click()
        page.wait_for_url("**" + views.card_url(names["green"]))
        assert page.locator("[data-card]").get_attribute("data-color") == "green"


def test_payloads_in_files_show_as_text_and_never_run(project: Project, page: Any) -> None:
    name = hostile(project)
    with serving(project.root) as url:
        for path in ("/", views.card_url(name)):
            page.goto(url + path)  # returns after `load`: every <img> has failed by then
            if path == "/":  # a change on disk: the live refresh swaps the payloads in again
                put(project, 2, "QA")
                page.wait_for_selector(f'[data-card="{ident(2)}@QA"]', timeout=5000)
                page.evaluate("new Promise(done => requestAnimationFrame(() => done(0)))")
            assert page.evaluate("typeof window.__xss") == "undefined", path
            assert page.dialogs == [], path
            assert "<script>window.__xss = 1</script>" in page.locator("main").inner_text()
        assert page.locator("#latest-report a[href^='javascript']").count() == 0
        assert page.locator("main img").count() == 0


def test_unknown_and_malformed_names_are_404_and_writes_without_the_key_refused(
    project: Project, page: Any
) -> None:
    colourful(project)
    with serving(project.root) as url:
        for name in (f"{ident(99)}@QA", "a..b@QA", "a%2Fb@QA", "a%00b@QA", "x" * 4096):
            answer = page.goto(f"{url}/card/{name}")
            assert answer is not None and answer.status == 404, name[:20]
            assert page.locator("h1").inner_text() == "404"
        for method, code in (("post", 403), ("put", 405), ("delete", 405), ("patch", 405)):
            answer = getattr(page.request, method)(url + "/api/cards")
            assert answer.status == code, method


def test_the_archive_pages_newest_first(project: Project, page: Any) -> None:
    newest_first = completed(project, 120)
    with serving(project.root) as url:
        page.goto(url + "/archive")
        seen: list[str] = []
        for size in (50, 50, 20):
            rows = page.locator("[data-card][data-color=green]")
            assert rows.count() == size
            seen += [rows.nth(n).get_attribute("data-card") for n in range(size)]
            older = page.locator("a[rel=next]")
            if older.count():
                older.click()
                page.wait_for_load_state()
        assert seen == newest_first
        assert page.url.endswith("/archive?page=3")
        assert page.locator("a[rel=next]").count() == 0


# --- the operator acts (docs/protocol.md §13) -------------------------------------------------

QUESTION = "Should f(a,) and f(a, ) parse the same?"


def web_command(project: Project) -> tuple[Any, str]:
    """`handoffd web --port 0` as a process, and the keyed URL it printed on stderr."""
    import subprocess
    import sys

    from tests.swarm_support import command_env

    command = [sys.executable, "-m", "handoffd", "web", str(project.root), "--port", "0"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=command_env())  # fmt: skip
    assert process.stderr is not None and process.stdout is not None
    said = process.stderr.readline()
    assert "?key=" in said, said
    process.stdout.readline()  # it serves
    return process, said.split("open ", 1)[1].split()[0]


def blocked_agent(project: Project) -> str:
    """coder holds work it blocked with a question; its card."""
    put(project, 1, "coder", task="trailing-commas")
    assert project.run("ready_for_next", role="coder").code == 0
    assert project.run("handoffd", "block", "--reason", QUESTION, role="coder").code == 0
    return f"{ident(1)}@coder"


@pytest.fixture
def tmux() -> Iterator[Any]:
    from tests.daemon_support import tmux_server

    yield from tmux_server()


def test_an_operator_answers_a_red_card_from_the_board_and_the_agent_reads_the_answer(
    project: Project, page: Any, tmux: Any
) -> None:
    """The loop of docs/protocol.md §13 end to end: an agent blocked with a question, the
    operator answers on the web board, the agent's session is woken, `ready_for_next`
    shows the answer and the card is yellow again."""
    import signal

    from tests.daemon_support import use_socket

    card = blocked_agent(project)
    use_socket(project, tmux.socket)
    tmux.session("coder")
    process, keyed_url = web_command(project)
    try:
        page.goto(keyed_url)
        assert "?key=" not in page.url  # the key became a cookie and left the address bar
        shown = page.locator(f'[data-card="{card}"]')
        assert shown.get_attribute("data-color") == "red"
        page.evaluate("window.__same_document = true")
        shown.locator("form.act-answer textarea").fill("Yes: both parse as f(a).")
        posted(page, shown.locator("form.act-answer button"))
        page.wait_for_selector(f'[data-card="{card}"][data-color="yellow"]', timeout=LIVE_S * 1000)
        assert page.evaluate("window.__same_document") is True  # no reload happened
        assert page.locator("#done").inner_text() == f"Answered {card}"  # and it says so
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=15)
    woken = "An operator answered you on trailing-commas. Run ready_for_next.sh to see it."
    assert tmux.typed("coder", woken) == 1
    taken = project.run("ready_for_next", role="coder")
    assert "ANSWER: Yes: both parse as f(a). (" in taken.out, taken.out
    assert "BLOCKED_REASON" not in taken.out


def test_the_title_counts_the_reds_and_a_new_red_card_raises_a_notification(
    project: Project, page: Any
) -> None:
    put(project, 1, "QA")
    page.add_init_script(
        "window.__shown = [];"
        "window.Notification = function (title, options) {"
        "  window.__shown.push(options.body); };"
        "window.Notification.permission = 'granted';"
    )  # the operator allowed notifications on the page
    with serving(project.root) as url:
        page.goto(url + "/")
        assert not page.title().startswith("(")
        done = project.run("handoffd", "block", ident(1), "--reason", "which API?", role="QA")
        assert done.code == 0, done.err
        page.wait_for_selector(f'[data-card="{ident(1)}@QA"][data-color="red"]',
                               timeout=LIVE_S * 1000)  # fmt: skip
        assert page.evaluate("window.__shown") == [f"{ident(1)}@QA"]
        assert page.title().startswith("(1) handoffd")


def test_a_refused_action_shows_the_commands_words_on_the_board_and_on_the_card_page(
    project: Project, page: Any
) -> None:
    card = blocked_agent(project)
    with serving(project.root, key=KEY) as url:
        page.goto(f"{url}/?key={KEY}")
        form = page.locator(f'[data-card="{card}"] form.act-answer')
        form.locator("textarea").fill("too late")  # typing holds the live part still
        assert project.run("done_with_current", role="coder").code == 0  # green meanwhile
        posted(page, form.locator("button"))
        refusal = page.locator(f'[data-actions="{card}"] .refusal')
        refusal.wait_for(state="visible", timeout=LIVE_S * 1000)
        lines = refusal.inner_text().splitlines()  # the command's words, then the board's
        said, moved = lines[0], lines[-1]
        assert said == f"UNKNOWN_CARD: {card}" and "is completed" in lines[1]
        assert moved.startswith("It is GREEN now (completed") and "not offer Answer" in moved
        page.goto(url + views.card_url(card))  # green now: its page offers Reopen
        assert project.run("handoffd", "reopen", card, "--root", str(project.root),
                           role=None, cwd=project.root).code == 0  # fmt: skip
        page.locator("form.act-reopen button").click()  # a plain form: the answer is a page
        assert page.locator("p.refusal").inner_text() == f"NOT_COMPLETED: {card}"
        assert page.locator("p.moved").inner_text().startswith("It is ORANGE now (waiting")
        page.get_by_text("Back to the card").click()
        assert page.url.endswith(views.card_url(card))


def test_two_boards_opened_in_one_browser_both_keep_their_forms(
    project: Project, page: Any, tmp_path: Any
) -> None:
    """A browser sends 127.0.0.1's cookies to every port: each board's key cookie has its
    own name, so opening a second board never takes the first one's forms away."""
    from tests.conftest import make_project

    (tmp_path / "other").mkdir()
    other = make_project(tmp_path.resolve() / "other")
    card = blocked_agent(project)
    with serving(project.root, key=KEY) as first, serving(other.root, key="b" * 32) as second:
        page.goto(f"{first}/?key={KEY}")
        page.goto(f"{second}/?key={'b' * 32}")
        page.goto(first + views.card_url(card))
        assert page.locator("form.act-unblock").count() == 1  # the first board's key still held
        page.locator("form.act-unblock button").click()
        assert page.locator(f'[data-card="{card}"]').get_attribute("data-color") == "yellow"


def test_an_answer_carrying_markup_never_runs_on_any_page(project: Project, page: Any) -> None:
    card = blocked_agent(project)
    payload = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
    with serving(project.root, key=KEY) as url:
        page.goto(f"{url}/?key={KEY}")
        form = page.locator(f'[data-card="{card}"] form.act-answer')
        form.locator("textarea").fill(payload)
        posted(page, form.locator("button"))
        page.wait_for_selector(f'[data-card="{card}"][data-color="yellow"]', timeout=LIVE_S * 1000)
        page.goto(url + views.card_url(card))
        assert payload in page.locator("#latest-report").inner_text()
        page.wait_for_timeout(300)
    assert page.dialogs == []


def test_the_numbers_page_draws_its_table_and_charts_with_no_script(
    project: Project, browser: Any, tmp_path: Any
) -> None:
    """`/numbers` at 1280x800 with scripts off: the table's rows and each role's three
    charts are on the page, drawn by the server (docs/protocol.md §19)."""
    import time

    from tests.numbers_support import day

    day(project, time.time())
    context = browser.new_context(viewport={"width": 1280, "height": 800},
                                  java_script_enabled=False)  # fmt: skip
    tab = context.new_page()
    with serving(project.root) as url:
        tab.goto(url + "/numbers")
        assert tab.locator("table.stats tbody tr").count() == 4  # three roles and the total
        assert tab.locator("tr[data-role=total] td[data-count=completed]").inner_text() == "54"
        charts = tab.locator("svg.chart")
        assert charts.count() == 9
        box = charts.first.bounding_box()
        assert box is not None and box["width"] >= 300 and box["height"] >= 100
        assert tab.locator("[data-charts=QA] svg[data-kind=completed] rect").count() == 24
        shot = tmp_path / "numbers.png"
        tab.screenshot(path=str(shot))
        assert shot.stat().st_size > 10_000
        if os.environ.get("HANDOFFD_SCREENSHOTS"):  # a person looks at it
            tab.screenshot(path=os.path.join(os.environ["HANDOFFD_SCREENSHOTS"], "numbers.png"))
    context.close()


def test_a_cards_page_shows_what_was_spent_on_it(project: Project, page: Any) -> None:
    """docs/protocol.md §19: the tokens its role's turns spent while holding the card."""
    from handoffd.core import usage
    from handoffd.core.tokens import Spend

    names = colourful(project)
    card = names["yellow"]
    role = card.rpartition("@")[2]
    for counts in ((1000, 300, 4000, 80), (200, 40, 1000, 0)):
        usage.append(str(project.handoffs(role)), Spend(time.time(), card, "claude", counts),
                     time.time())  # fmt: skip
    with serving(project.root) as url:
        page.goto(url + views.card_url(card))
        shown = page.locator("#tokens").inner_text()
        assert shown == "in 1,200 · out 340 · cache read 5,000 · cache write 80 (2 turns)"
        if os.environ.get("HANDOFFD_SCREENSHOTS"):
            page.screenshot(path=os.path.join(os.environ["HANDOFFD_SCREENSHOTS"], "tokens.png"))
        page.goto(url + views.card_url(names["orange"]))
        assert page.locator("#tokens").inner_text() == "none recorded"


def test_the_roles_panel_shows_each_role_and_the_pools_line_above_its_members(
    tmp_path: Any, page: Any
) -> None:
    """What `status` prints under its first line, on the open page (docs/protocol.md §14,
    §17), and a pool card's page names the member that finished it."""
    from handoffd.core import handoff as hf
    from testbed.project import make_pool_project
    from tests.test_pool import pool_copy, run_as

    proj = make_pool_project(tmp_path / "p")
    copy = pool_copy(proj, 1)
    assert run_as(proj, "cleaner-2", "ready_for_next")[0] == 0
    assert run_as(proj, "cleaner-2", "done_with_current")[0] == 0
    with serving(proj.root) as url:
        page.goto(url + "/")
        rows = page.locator(".roles .role-row")
        assert rows.evaluate_all("rows => rows.map(r => r.dataset.role)") == [
            "coder", "cleaner", "cleaner-1", "cleaner-2", "cleaner-3",
        ]  # fmt: skip
        pool = page.locator('.role-row[data-role="cleaner"]')
        assert pool.is_visible() and "pool of 3: 0 busy, 0 idle, 3 unknown" in pool.inner_text()
        page.goto(url + "/card/" + f"{hf.name_id(copy.name)}@cleaner")
        assert page.locator("[data-finished-by]").inner_text().startswith("cleaner-2")
