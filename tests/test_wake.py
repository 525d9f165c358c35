"""Wake-ups (PROTOCOL.md §5.5): one line per recipient per pass, typed into exactly its
tmux session on a real tmux server, lossy and never in the way of delivery; and the
pure re-notify schedule."""

from __future__ import annotations

import itertools
import os
import signal
import time
from collections.abc import Iterator

import pytest

from handoffd.wake import RENOTIFY_CAP, Renotifier, Waker
from tests.conftest import Project
from tests.daemon_support import (
    Tmux,
    events,
    inbox,
    open_daemon,
    queue,
    tmux_server,
    use_socket,
    wait_event,
)


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    yield from tmux_server()


# --- Renotifier (pure) ----------------------------------------------------------------


def due_times(renotifier: Renotifier, until: float, step: float = 1.0) -> list[float]:
    """The times a role that stays idle with mail is due, observed every `step` seconds."""
    due, now = [], 0.0
    while now <= until:
        if renotifier.observe("QA", True, now):
            due.append(now)
        now += step
    return due


def test_renotify_fires_after_the_interval_then_doubles() -> None:
    assert due_times(Renotifier(10), until=160) == [10, 30, 70, 150]


def test_renotify_interval_stops_doubling_at_the_cap() -> None:
    assert due_times(Renotifier(10, cap=25), until=90) == [10, 30, 55, 80]


def test_renotify_default_cap_is_sixteen_minutes() -> None:
    times = due_times(Renotifier(120), until=120 + 240 + 480 + 960 * 3, step=10)
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert RENOTIFY_CAP == 960 and gaps == [240, 480, 960, 960, 960]


def test_renotify_never_fires_for_a_busy_role_or_one_without_mail() -> None:
    renotifier = Renotifier(10)
    assert not any(renotifier.observe("QA", False, now) for now in range(0, 1000, 5))


def test_renotify_resets_to_the_first_interval_once_the_role_takes_work() -> None:
    renotifier = Renotifier(10)
    assert due_times(renotifier, until=30) == [10, 30]  # the interval is now 40
    assert not renotifier.observe("QA", False, 31)  # took work
    assert not renotifier.observe("QA", True, 32)  # mail waits again: the clock restarts
    assert not renotifier.observe("QA", True, 41.9)
    assert renotifier.observe("QA", True, 42)


def test_a_regular_wake_up_restarts_the_renotify_clock() -> None:
    renotifier = Renotifier(10)
    assert not renotifier.observe("QA", True, 0)
    renotifier.woken("QA", 8)
    assert not renotifier.observe("QA", True, 17.9)
    assert renotifier.observe("QA", True, 18)


def test_renotify_keeps_a_separate_clock_per_role() -> None:
    renotifier = Renotifier(10)
    assert not renotifier.observe("QA", True, 0)
    assert not renotifier.observe("cleaner", True, 5)
    assert renotifier.observe("QA", True, 10) and not renotifier.observe("cleaner", True, 10)
    assert renotifier.observe("cleaner", True, 15)


# --- real tmux ------------------------------------------------------------------------


def sessions(tmux: Tmux, project: Project, *names: str) -> None:
    for name in names:
        tmux.session(name)
    use_socket(project, tmux.socket)


def test_several_handoffs_in_one_pass_wake_each_recipient_exactly_once(
    project: Project, tmux: Tmux
) -> None:
    sessions(tmux, project, "coder", "cleaner", "QA")
    for _ in range(3):
        queue(project, "coder", ["cleaner"])
    for _ in range(2):
        queue(project, "coder", ["cleaner", "QA"])
    daemon = open_daemon(project, record=False)

    daemon.step(1000.0)
    assert daemon.waker.drain(10)

    assert len(inbox(project, "cleaner")) == 5 and len(inbox(project, "QA")) == 2
    assert (tmux.wakes("cleaner"), tmux.wakes("QA"), tmux.wakes("coder")) == (1, 1, 0)
    assert sorted(e["role"] for e in events(project, "wake")) == ["QA", "cleaner"]

    queue(project, "QA", ["cleaner"])  # a later pass with mail wakes again
    daemon.step(1001.0)
    assert daemon.waker.drain(10)
    assert (tmux.wakes("cleaner"), tmux.wakes("QA")) == (2, 1)
    daemon.close()


def test_a_session_whose_name_merely_extends_the_targets_gets_no_wake_up(
    project: Project, tmux: Tmux
) -> None:
    sessions(tmux, project, "cleaner-b")  # no session named exactly `cleaner` yet
    queue(project, "coder", ["cleaner"])
    daemon = open_daemon(project, record=False)

    daemon.step(1000.0)
    assert daemon.waker.drain(10)

    assert tmux.wakes("cleaner-b") == 0
    assert [e["role"] for e in events(project, "wake_failed")] == ["cleaner"]
    assert len(inbox(project, "cleaner")) == 1

    tmux.session("cleaner")  # with both there, only the exact one is woken
    queue(project, "coder", ["cleaner"])
    daemon.step(1001.0)
    assert daemon.waker.drain(10)
    assert (tmux.wakes("cleaner"), tmux.wakes("cleaner-b")) == (1, 0)
    daemon.close()


def test_a_missing_session_still_delivers_and_logs_wake_failed(
    project: Project, tmux: Tmux
) -> None:
    sessions(tmux, project, "cleaner")  # QA has no session
    queue(project, "coder", ["cleaner", "QA"])
    daemon = open_daemon(project, record=False)

    daemon.step(1000.0)
    assert daemon.waker.drain(10)

    assert len(inbox(project, "QA")) == 1 and len(inbox(project, "cleaner")) == 1
    [failed] = events(project, "wake_failed")
    assert failed["role"] == "QA" and failed["error"]
    assert tmux.wakes("cleaner") == 1
    daemon.close()


def test_a_missing_server_still_delivers_and_logs_wake_failed(project: Project, tmux: Tmux) -> None:
    use_socket(project, tmux.socket)  # no server was ever started on it
    path = queue(project, "coder", ["QA"])
    daemon = open_daemon(project, record=False)

    daemon.step(1000.0)
    assert daemon.waker.drain(10)

    assert inbox(project, "QA") == [path.name]
    assert (project.box("coder", "sent") / path.name).exists()
    [failed] = events(project, "wake_failed")
    assert failed["role"] == "QA" and failed["error"]
    daemon.close()


def test_a_missing_socket_file_still_delivers_and_logs_wake_failed(project: Project) -> None:
    path = queue(project, "coder", ["QA"])
    daemon = open_daemon(project, record=False)

    daemon.step(1000.0)
    assert daemon.waker.drain(10)

    assert inbox(project, "QA") == [path.name]
    assert [e["role"] for e in events(project, "wake_failed")] == ["QA"]
    daemon.close()


def test_a_hung_tmux_does_not_delay_delivery_and_is_logged_as_timed_out(
    project: Project, tmux: Tmux
) -> None:
    sessions(tmux, project, "QA")
    server = tmux.server_pid()
    daemon = open_daemon(project, record=False)
    daemon.waker.close()
    daemon.waker = Waker(str(project.root), daemon.log, timeout=2.0)
    path = queue(project, "coder", ["QA"])
    os.kill(server, signal.SIGSTOP)
    try:
        started = time.monotonic()
        daemon.step(1000.0)
        elapsed = time.monotonic() - started

        assert inbox(project, "QA") == [path.name]
        assert elapsed < 1.0, f"the pass took {elapsed:.2f}s with tmux hung"  # half the timeout
        failed = wait_event(project, "wake_failed", timeout=10)
        assert failed["role"] == "QA" and "timed out" in failed["error"]
        assert time.monotonic() - started >= 2.0  # it was the tmux call that gave up
    finally:
        os.kill(server, signal.SIGCONT)
    daemon.close()


def test_waker_close_without_requests_ends_its_thread(project: Project) -> None:
    daemon = open_daemon(project, record=False)
    waker = daemon.waker
    assert waker.drain(1)
    waker.close()
    waker._thread.join(timeout=5)  # type: ignore[attr-defined]
    assert not waker._thread.is_alive()  # type: ignore[attr-defined]
