"""The daemon's look at every pane at once (handoffd/harness/listing.py): one `list-panes`
call for all of them, a pane read again only when it printed since its last read; the
pure rule, and the real thing on a private tmux server."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from handoffd.harness import listing, pane
from tests.conftest import wait_for
from tests.daemon_support import Tmux, tmux_server

LINE = ("%1\t4242\t0\t1700000000\t200x50\tclaude", 1_700_000_100)


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    yield from tmux_server()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The sessions whose pane was read (one `capture-pane` each), in order."""
    made: list[str] = []
    real = pane.read

    def counted(socket: str, session: str, timeout: float) -> pane.Pane:
        made.append(session)
        return real(socket, session, timeout)

    monkeypatch.setattr(pane, "read", counted)
    return made


def kept(line: tuple[str, int], read_at: float) -> listing.Kept:
    return listing.Kept(pane.parse("0 1 0 |t\nhello"), line, read_at)


# --- the pure part ----------------------------------------------------------------------


def test_a_listing_keeps_the_active_pane_of_each_sessions_current_window() -> None:
    row = "\t".join(["11", "%1", "4242", "1700000100", "0", "1700000000", "200x50", "", "coder"])
    other = row.replace("11\t%1", "01\t%2").replace("coder", "coder")  # an inactive window's
    found = listing.parse("\n".join([row, other, "garbage", "11\t%3\tx", ""]))
    assert found == {"coder": ("%1\t4242\t0\t1700000000\t200x50\t", 1_700_000_100)}


def test_a_session_name_with_a_tab_stays_whole() -> None:
    row = "\t".join(["11", "%1", "1", "5", "0", "1", "80x24", "generic", "odd\tname"])
    assert list(listing.parse(row)) == ["odd\tname"]


def test_a_pane_is_unchanged_only_with_the_same_line_and_no_output_since_its_read() -> None:
    read = kept(LINE, 1_700_000_102.5)  # read at second ...102: activity ...100 is older
    assert listing.unchanged(read, LINE)
    assert not listing.unchanged(None, LINE)  # never read
    assert not listing.unchanged(read, (LINE[0], LINE[1] + 1))  # printed since the listing
    assert not listing.unchanged(read, (LINE[0].replace("200x50", "80x24"), LINE[1]))  # resized
    assert not listing.unchanged(read, (LINE[0].replace("claude", "codex"), LINE[1]))
    # output within a second of the read may have missed it: read again (errs that way)
    assert not listing.unchanged(kept(LINE, 1_700_000_101.2), LINE)


# --- on a real tmux server --------------------------------------------------------------


def test_a_quiet_pane_is_not_read_again_and_one_that_printed_is(tmux: Tmux, reads) -> None:
    tmux.session("coder")
    tmux.session("QA")
    screens = listing.Screens(timeout=5.0)
    first = screens.read(tmux.socket, "coder")
    assert first[1] and first[0] is not None and "READY" in first[0].content
    time.sleep(2.2)  # past the second of the start's output, and SLACK
    screens.read(tmux.socket, "coder")  # read once more: its output was near the first read
    reads.clear()
    for _ in range(3):
        again, answers = screens.read(tmux.socket, "coder")
        assert answers and again is not None and "READY" in again.content
    assert reads == []  # nothing printed: nothing read, three times
    tmux.run("send-keys", "-t", "=coder:", "-l", "--", "hello")
    tmux.run("send-keys", "-t", "=coder:", "Enter")  # cat prints it back
    seen = wait_for(lambda: (lambda p: p if p and "hello" in p.content else None)(
        screens.read(tmux.socket, "coder")[0]), what="the new line")  # fmt: skip
    assert "hello" in seen.content and reads[-1] == "coder"


def test_one_listing_serves_every_pane_and_a_gone_session_is_said_gone(tmux: Tmux, reads):
    for name in ("a", "b", "c"):
        tmux.session(name)
    screens = listing.Screens(timeout=5.0)
    listed = screens.listing(tmux.socket)
    assert set(listed.lines) == {"a", "b", "c"} and listed.answers
    assert [screens.read(tmux.socket, n, listed)[0] is not None for n in "abc"] == [True] * 3
    tmux.run("kill-session", "-t", "=b")
    reads.clear()
    assert screens.read(tmux.socket, "b") == (None, True)  # the server answers: gone
    assert reads == []  # known from the listing, no read tried
    tmux.kill()
    assert screens.read(tmux.socket, "a") == (None, False)  # no server: unknown


def test_threads_that_ask_together_share_one_listing(tmux: Tmux, monkeypatch) -> None:
    tmux.session("a")
    calls: list[float] = []
    real = listing._list

    def slow(socket: str, timeout: float) -> listing.Listed:
        calls.append(time.monotonic())
        time.sleep(0.3)
        return real(socket, timeout)

    monkeypatch.setattr(listing, "_list", slow)
    screens = listing.Screens(timeout=5.0)
    import threading

    asked = time.monotonic()
    threads = [threading.Thread(target=screens.listing, args=(tmux.socket, asked))
               for _ in range(5)]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1  # begun after each asked: one listing is as fresh as any
    screens.listing(tmux.socket)
    assert len(calls) == 2  # asked after it began: a listing of its own


def test_a_listing_that_fails_on_a_live_server_falls_back_to_reading_each_pane(
    tmux: Tmux, reads, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No server is no server (nothing read); any other failure reads each pane alone."""
    tmux.session("a")
    screens = listing.Screens(timeout=5.0)
    monkeypatch.setattr(listing, "_list", lambda socket, timeout: listing.Listed(
        {}, False, time.monotonic(), fallback=True))  # fmt: skip
    seen, answers = screens.read(tmux.socket, "a")
    assert answers and seen is not None and "READY" in seen.content and reads == ["a"]
    monkeypatch.undo()
    tmux.kill()
    gone = listing._list(tmux.socket, 5.0)
    assert not gone.answers and not gone.fallback


def test_the_daemons_look_at_every_pane_is_one_listing_and_reads_only_what_printed(
    project, tmux: Tmux, reads, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`Waker.look`, each rescan's glance at every role: one tmux listing on one thread for
    all the roles, no read of a pane that printed nothing since, and the states `status`
    shows (panes.json) as they were."""
    from handoffd.core import log as logging
    from handoffd.wakeups import panes
    from handoffd.wakeups.waker import Waker
    from tests.daemon_support import use_socket

    roles = [("coder", "coder"), ("cleaner", "cleaner"), ("QA", "QA")]
    for _, session in roles:
        tmux.session(session)
    use_socket(project, tmux.socket)
    listings: list[str] = []
    real = listing._list
    monkeypatch.setattr(listing, "_list", lambda s, t: listings.append(s) or real(s, t))
    (project.root / ".swarmforge" / "daemon").mkdir(exist_ok=True)
    log = logging.configure(str(project.root / ".swarmforge" / "daemon" / "h.log"), console=False)
    waker = Waker(str(project.root), log, idle_after=0.5)
    try:
        time.sleep(2.2)  # past the second of the sessions' start and SLACK
        waker.look(roles)  # the first look reads each pane
        wait_for(lambda: not waker._glancing, what="the look")
        reads.clear()
        listings.clear()
        waker.look(roles)
        wait_for(lambda: not waker._glancing, what="the look")
        assert (len(listings), reads) == (1, [])  # three panes: one call, nothing read
        assert {role: waker.panes.state(role) for role, _ in roles} == dict.fromkeys(
            ("coder", "cleaner", "QA"), panes.IDLE)  # fmt: skip
        tmux.run("kill-session", "-t", "=QA")
        waker.look(roles)
        wait_for(lambda: waker.panes.state("QA") == panes.GONE, what="QA gone")
    finally:
        waker.close()
