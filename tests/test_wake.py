"""Wake-ups (docs/protocol.md §5.5): one line per recipient per pass, typed into exactly its
tmux session on a real tmux server, lossy and never in the way of delivery; and the
pure re-notify schedule."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from handoffd.core import limits
from handoffd.wakeups import panes, wakeup
from handoffd.wakeups.wake import (
    REFUSED,
    TEXT,
    asked_problem,
    is_label,
    label,
    send_keys,
    told_already,
)
from handoffd.wakeups.waker import Renotifier, Unanswered, Waker
from tests.conftest import HANG, HOSTILE, SAID, Project, plant, wait_for
from tests.daemon_support import (
    HANDOFFD,
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
    assert limits.RENOTIFY_CAP == 960 and gaps == [240, 480, 960, 960, 960]


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

    assert project.run("ready_for_next", role="cleaner").code == 0  # answers its wake-up
    queue(project, "QA", ["cleaner"])  # so a later pass with mail wakes it again
    daemon.step(1001.0)
    assert daemon.waker.drain(10)
    assert (tmux.wakes("cleaner"), tmux.wakes("QA")) == (2, 1)
    daemon.close()


def test_a_request_for_mail_the_daemon_announced_since_is_not_typed_again(
    project: Project, tmux: Tmux
) -> None:
    """`up` asks the daemon (`H/wake`, the mail line) to wake a role it started with mail
    waiting; the daemon's own wake-up for that mail may be typed before it takes the
    request.  Then the request is dropped (`wake_coalesced`): one mail, one wake-up.  The
    same line asked after that wake-up is typed."""
    sessions(tmux, project, "cleaner")
    queue(project, "coder", ["cleaner"])
    daemon = open_daemon(project, record=False)
    try:
        daemon.step(1000.0)
        assert daemon.waker.drain(10) and tmux.wakes("cleaner") == 1
        woken_at = daemon.panes.woken_at("cleaner")
        assert woken_at is not None
        request = project.handoffs("cleaner") / wakeup.WAKE
        wakeup.ask_wake(str(request.parent), TEXT)
        os.utime(request, (woken_at - 1, woken_at - 1))  # asked before, taken after it
        daemon.step(1001.0)
        assert daemon.waker.drain(10) and tmux.wakes("cleaner") == 1
        assert [e["role"] for e in events(project, "wake_coalesced")] == ["cleaner"]
        wakeup.ask_wake(str(request.parent), TEXT)  # asked after the wake-up
        daemon.step(1002.0)
        assert daemon.waker.drain(10) and tmux.wakes("cleaner") == 2
    finally:
        daemon.close()


def test_told_already_drops_only_the_mail_line_asked_before_the_last_wake_up() -> None:
    answered = "An operator answered you on parse. Run ready_for_next.sh to see it."
    assert told_already(TEXT, 10.0, 10.5) and told_already(TEXT, 10.0, 10.0)
    assert not told_already(TEXT, 10.0, 9.9) and not told_already(TEXT, 10.0, None)
    assert not told_already(answered, 10.0, 10.5)  # an answer says something new


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


@pytest.mark.parametrize("what", HOSTILE)
def test_a_socket_file_that_is_no_regular_file_fails_the_wake_up_at_once_not_the_delivery(
    project: Project, tmp_path: Path, what: str
) -> None:
    """`run --once` waits for its wake-ups: one blocked on a FIFO (or reading /dev/zero to
    its end) would keep it past the deadline.  Refused at once instead, and logged."""
    plant(project.root / ".swarmforge" / "tmux-socket", what, tmp_path)
    path = queue(project, "coder", ["QA"])
    done = subprocess.run(
        [HANDOFFD, "run", "--once", str(project.root)],
        capture_output=True, text=True, timeout=HANG, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert inbox(project, "QA") == [path.name]
    [failed] = events(project, "wake_failed")
    assert f"{SAID[what]}, not a regular file" in failed["error"]


def test_up_refuses_a_socket_file_that_is_a_fifo_in_one_line(project: Project) -> None:
    socket_file = project.root / ".swarmforge" / "tmux-socket"
    plant(socket_file, "fifo", project.root)
    result = project.run("handoffd", "up", str(project.root), role=None, cwd=project.root,
                         timeout=HANG)  # fmt: skip
    assert result.code == 1
    assert result.err == (
        f"Error: {socket_file}: a FIFO, not a regular file; it was not read; `handoffd init` "
        "writes it again\n"
    )


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


def wake_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name.startswith("wake-")]


def test_the_waker_keeps_no_thread_when_idle_nor_after_close(project: Project) -> None:
    daemon = open_daemon(project, record=False)
    daemon.waker.wake([("QA", "QA")])  # no socket file: fails at once
    assert daemon.waker.drain(10)
    wait_for(lambda: not wake_threads(), what="the wake-up thread to end")
    daemon.close()
    daemon.waker.wake([("QA", "QA")])  # after close: nothing is sent, no thread starts
    assert daemon.waker.drain(1) and not wake_threads()
    assert len(events(project, "wake_failed")) == 1


# --- one wake-up per burst (pure, then real tmux) -------------------------------------------


def test_an_unanswered_wake_up_holds_the_next_until_the_role_takes_something() -> None:
    unanswered = Unanswered()
    assert unanswered.due("QA", (1, 100))
    unanswered.woken("QA", (1, 100))
    assert not unanswered.due("QA", (1, 100))  # nothing taken since
    assert unanswered.due("cleaner", (1, 100))  # another role is not held
    assert unanswered.due("QA", (1, 200))  # in_process changed: it took work
    assert unanswered.due("QA", None)  # cannot tell: wake rather than stay silent
    unanswered.forget("QA")  # the wake-up never arrived
    assert unanswered.due("QA", (1, 100))


def test_three_handoffs_queued_back_to_back_type_one_wake_up_until_the_role_takes_one(
    project: Project, tmux: Tmux
) -> None:
    sessions(tmux, project, "QA")
    daemon = open_daemon(project, record=False)
    for second in range(3):  # each its own pass, as events would bring them
        queue(project, "coder", ["QA"])
        daemon.step(1000.0 + second)
        assert daemon.waker.drain(10)
    assert len(inbox(project, "QA")) == 3
    assert tmux.wakes("QA") == 1 and len(events(project, "wake")) == 1

    assert project.run("ready_for_next", role="QA").code == 0  # the wake-up is answered
    queue(project, "coder", ["QA"])
    daemon.step(1003.0)
    assert daemon.waker.drain(10)
    assert tmux.wakes("QA") == 2
    daemon.close()


def test_a_held_wake_up_leaves_the_renotify_clock_running(project: Project) -> None:
    """Mail keeps arriving for a role that never answers: it is woken again when re-notify
    is due, not later (a held wake-up does not restart the clock)."""
    queue(project, "coder", ["QA"])
    daemon = open_daemon(project, renotify_after=10)
    daemon.step(0)
    for now in range(1, 10):
        queue(project, "coder", ["QA"])
        daemon.step(float(now))
    assert daemon.waker.woken() == ["QA"]  # type: ignore[attr-defined]
    daemon.step(10.0)
    assert daemon.waker.woken() == ["QA", "QA"]  # type: ignore[attr-defined]
    assert [e["role"] for e in events(project, "renotify")] == ["QA"]


# --- the sender of a refused handoff -----------------------------------------------------------


def test_a_sender_is_told_once_per_pass_that_its_handoffs_were_refused(project: Project) -> None:
    queue(project, "coder", ["QA"], data=b"not a handoff\n")
    queue(project, "coder", ["nobody"])
    queue(project, "cleaner", ["QA"])  # a good one: cleaner is not told anything
    daemon = open_daemon(project)

    daemon.step(1000.0)

    failed = project.box("coder", "failed")
    assert len([n for n in os.listdir(failed) if n.endswith(".error")]) == 2
    assert daemon.waker.texts == [("coder", REFUSED.format(failed=failed))]  # type: ignore[attr-defined]
    daemon.step(1001.0)  # a pass without refusals tells nobody
    assert len(daemon.waker.texts) == 1  # type: ignore[attr-defined]


def test_the_refusal_line_is_typed_into_the_senders_session(project: Project, tmux: Tmux) -> None:
    sessions(tmux, project, "coder")
    queue(project, "coder", ["QA"], data=b"not a handoff\n")
    daemon = open_daemon(project, record=False)

    daemon.step(1000.0)
    assert daemon.waker.drain(10)

    line = REFUSED.format(failed=project.box("coder", "failed"))
    assert tmux.typed("coder", line) == 1 and tmux.wakes("coder") == 0
    [woke] = events(project, "wake")
    assert woke["role"] == "coder" and woke["refused"] is True
    daemon.close()


def test_the_log_says_refused_only_of_the_line_that_tells_a_sender(
    project: Project, tmux: Tmux
) -> None:
    """`refused: true` marks the refusal line alone, never a line a command asked for (an
    answer's, which the daemon takes from `H/wake`) nor the mail line."""
    sessions(tmux, project, "coder")
    daemon = open_daemon(project, record=False)
    asked = "An operator answered you on parse. Run ready_for_next.sh to see it."
    for text in (asked, TEXT, REFUSED.format(failed="/x/failed")):
        daemon.waker.wake([("coder", "coder")], text)
        assert daemon.waker.drain(10)
    daemon.close()
    assert [e["refused"] for e in events(project, "wake")] == [False, False, True]


# --- the line typed is text, never keys -------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "shown"),
    [("task-1-cave-setup", "task-1-cave-setup"), ("évolution du parseur", "évolution du parseur"),
     ("evil\x1b[2J\x1b]0;t\x07 clear", "evil__2J__0_t_ clear"), ("a\nb\rc\u202ed", "a_b_c_d"),
     ("$(rm -rf ~); `id` | x > y", "__rm -rf ___ _id_ _ x _ y"), ("x" * 81, "x" * 79 + "…"),
     ("x" * 80, "x" * 80)],
)  # fmt: skip
def test_a_name_shown_in_a_wake_up_line_keeps_nothing_a_terminal_or_a_shell_obeys(
    name: str, shown: str
) -> None:
    assert label(name) == shown


@pytest.mark.parametrize("name", ["task-1-cave-setup", "évolution du parseur",
                                  "$(rm -rf ~); `id`", "x" * 200, " a" * 60, "", "  "])  # fmt: skip
def test_every_label_the_daemon_makes_is_one_it_would_type(name: str) -> None:
    """`is_label` accepts whatever `label` makes of any name, cut ones included."""
    assert is_label(label(name))


FAILED = "/p/.swarmforge/handoffs/failed"
ANSWERED_ON = "An operator answered you on {}. Run ready_for_next.sh to see it."


@pytest.mark.parametrize(
    ("text", "problem"),
    [(TEXT, ""), (REFUSED.format(failed=FAILED), ""), (ANSWERED_ON.format("parse"), ""),
     (ANSWERED_ON.format("évolution du parseur"), ""),
     (ANSWERED_ON.format("x" * 79 + "…"), ""), (ANSWERED_ON.format(""), ""),
     (ANSWERED_ON.format("x" * 79 + "… y"), "label"), (ANSWERED_ON.format("x" * 81), "label"),
     (ANSWERED_ON.format("$(touch /tmp/PWNED)"), "label"),
     (ANSWERED_ON.format("a`id`"), "label"), (ANSWERED_ON.format("a; rm -rf ~"), "label"),
     (ANSWERED_ON.format(" padded"), "label"), (ANSWERED_ON.format("x…"), "label"),
     ("touch /tmp/PWNED $(id)", "not a line"), (TEXT + " && curl evil | sh", "not a line"),
     ("rm -rf ~ # " + TEXT, "not a line"), (REFUSED.format(failed="/elsewhere/failed"),
      "not a line"), ("An operator answered you on . Run ready_for_next.sh", "not a line"),
     ("An operator answered you on  Run ready_for_next.sh to see it.", "not a line")],
)  # fmt: skip
def test_h_wake_types_only_a_line_the_daemon_builds_itself(text: str, problem: str) -> None:
    """docs/protocol.md §15, Part III: from `H/wake`, anyone's to write, the daemon types
    only the fixed lines of §5 and §13 (the role's own `failed/` in the refusal line), an
    answer's with a label `label` could have made; anything else is refused, saying why."""
    said = asked_problem(text, FAILED)
    assert (said == "") if not problem else (problem in said), said


@pytest.mark.parametrize("text", ["clear\x1b[2J", "two\nlines", "bell\x07", ""])
def test_send_keys_types_nothing_of_a_line_that_is_not_one_line_of_text(
    tmux: Tmux, text: str
) -> None:
    tmux.session("coder")
    before = tmux.capture("coder")
    with pytest.raises(ValueError, match="not typed"):
        send_keys(tmux.socket, "coder", text)
    assert tmux.capture("coder") == before


# --- the wake-up thread survives anything --------------------------------------------------


@pytest.mark.parametrize("garbage", [b"\xff\xfe\x80 not utf-8\n", b"/tmp/\x00nul\n"])
def test_garbage_in_the_socket_file_is_a_wake_failed_line_and_the_next_wake_up_works(
    project: Project, tmux: Tmux, garbage: bytes
) -> None:
    sessions(tmux, project, "QA")
    socket_file = project.root / ".swarmforge" / "tmux-socket"
    socket_file.write_bytes(garbage)
    queue(project, "coder", ["QA"])
    daemon = open_daemon(project, record=False)

    daemon.step(1000.0)
    assert daemon.waker.drain(10)
    [failed] = events(project, "wake_failed")
    assert failed["role"] == "QA" and failed["error"]

    use_socket(project, tmux.socket)
    queue(project, "coder", ["QA"])
    daemon.step(1001.0)
    assert daemon.waker.drain(10)
    assert tmux.wakes("QA") == 1 and [e["role"] for e in events(project, "wake")] == ["QA"]
    daemon.close()


# --- the cadence, read byte by byte in a real pane ----------------------------------------------

RECORDER = """
import os, sys, time, tty
out = open(sys.argv[1], "w", buffering=1)
tty.setraw(0)
os.write(1, b"READY")
while True:
    byte = os.read(0, 1)
    if not byte:
        break
    out.write(f"{time.monotonic_ns()} {byte[0]}\\n")
"""


def recorder(tmux: Tmux, name: str) -> Path:
    """A session whose terminal is raw, running a program that writes `<ns> <byte>` for
    each byte it receives to the returned file."""
    path = Path(tmux.dir) / f"{name}.bytes"
    tmux.run("new-session", "-d", "-s", name, "-x", "200", "-y", "50",
             sys.executable, "-c", RECORDER, str(path))  # fmt: skip
    wait_for(lambda: "READY" in tmux.capture(name), what=f"recorder {name} to start")
    return path


def received(path: Path, count: int) -> list[tuple[float, int]]:
    """The first `count` bytes the recorder saw, each with its time in seconds."""

    def read() -> list[tuple[float, int]]:
        lines = path.read_text().splitlines() if path.exists() else []
        return [(int(t) / 1e9, int(b)) for t, b in (line.split() for line in lines)]

    return wait_for(lambda: (lambda got: got if len(got) >= count else [])(read()))[:count]


def assert_cadence(got: list[tuple[float, int]]) -> tuple[float, float]:
    """The text arrived whole, then CR at least 100 ms after its last byte, then LF; the
    times of its first byte and of the CR."""
    text, (cr_at, cr), (lf_at, lf) = got[:-2], got[-2], got[-1]
    assert bytes(b for _, b in text).decode() == TEXT
    assert (cr, lf) == (13, 10)
    assert cr_at - text[-1][0] >= 0.100, f"CR {cr_at - text[-1][0]:.3f}s after the text"
    assert lf_at > cr_at
    return text[0][0], cr_at


def test_the_wake_up_is_typed_then_submitted_at_the_older_tools_cadence(
    project: Project, tmux: Tmux
) -> None:
    path = recorder(tmux, "QA")
    use_socket(project, tmux.socket)
    queue(project, "coder", ["QA"])
    daemon = open_daemon(project, record=False)

    daemon.step(1000.0)
    assert daemon.waker.drain(10)

    assert_cadence(received(path, len(TEXT) + 2))
    daemon.close()


def test_roles_are_woken_concurrently_each_at_its_own_cadence(project: Project, tmux: Tmux) -> None:
    """Every role's text arrives before any role's carriage return: one role's wake-up
    (and so one role's hung tmux) never waits for another's."""
    paths = {name: recorder(tmux, name) for name in ("coder", "cleaner", "QA")}
    use_socket(project, tmux.socket)
    daemon = open_daemon(project, record=False)

    daemon.waker.wake((name, name) for name in paths)
    assert daemon.waker.drain(10)

    times = [assert_cadence(received(path, len(TEXT) + 2)) for path in paths.values()]
    assert max(first for first, _ in times) < min(cr for _, cr in times)
    daemon.close()


def test_closing_the_waker_lets_the_wake_up_being_typed_finish(
    project: Project, tmux: Tmux
) -> None:
    """A stopping daemon never leaves a line typed into an agent's input but not submitted."""
    sessions(tmux, project, "QA")
    daemon = open_daemon(project, record=False)
    daemon.waker.wake([("QA", "QA")])
    # Typing has begun only once the text is on screen: a thread that is merely alive may
    # not have taken the request yet, and close() rightly drops a request not yet begun.
    wait_for(lambda: TEXT in tmux.capture("QA"), what="the wake-up to be typed")

    daemon.close()  # returns once the C-m and C-j are sent, not half-way through

    assert [e["role"] for e in events(project, "wake")] == ["QA"]
    assert tmux.wakes("QA") == 1


# --- idle first, and checked for submission (docs/protocol.md §14) ------------------------------

REDRAWER = """
import os, sys, threading, time, tty
out = open(sys.argv[1], "w", buffering=1)
stop = sys.argv[2]  # once this file exists the screen stands still
tty.setraw(0)
def redraw():
    n = 0
    while not os.path.exists(stop):
        n += 1
        os.write(1, f"\\rredrawing {n} ".encode())
        time.sleep(0.2)
threading.Thread(target=redraw, daemon=True).start()
while True:
    byte = os.read(0, 1)
    if not byte:
        break
    out.write(f"{time.monotonic_ns()} {byte[0]}\\n")
"""

# A TUI's input line: it shows what is typed and takes the line only at the `needs`-th
# carriage return (0: never), then prints it back below and moves on to a new line.
LINE_EDITOR = """
import os, sys, time, tty
out = open(sys.argv[1], "w", buffering=1)
needs = int(sys.argv[2])
tty.setraw(0)
os.write(1, b"READY\\r\\n> ")
typed, returns = b"", 0
while True:
    byte = os.read(0, 1)
    if not byte:
        break
    out.write(f"{time.monotonic_ns()} {byte[0]}\\n")
    if byte == b"\\r":
        returns += 1
        if returns == needs:
            os.write(1, b"\\r\\ntaken: " + typed + b"\\r\\n> ")
            typed = b""
    elif byte != b"\\n":
        typed += byte
        os.write(1, byte)
"""


def program(tmux: Tmux, name: str, source: str, *args: str) -> Path:
    """A session `name` running `source` with its byte record file (returned) and `args`."""
    path = Path(tmux.dir) / f"{name}.bytes"
    tmux.run("new-session", "-d", "-s", name, "-x", "200", "-y", "50",
             sys.executable, "-c", source, str(path), *args)  # fmt: skip
    return path


def first_byte_at(path: Path, timeout: float = 10.0) -> float:
    return wait_for(lambda: received_now(path)[:1], timeout, what="a wake-up byte")[0][0]


def received_now(path: Path) -> list[tuple[float, int]]:
    lines = path.read_text().splitlines() if path.exists() else []
    return [(int(t) / 1e9, int(b)) for t, b in (line.split() for line in lines)]


def busy_with_mail(project: Project, tmux: Tmux, stop: str) -> Path:
    """QA's pane redrawing until the file `stop` exists, and mail queued for QA; the file
    where QA's program timestamps what is typed into it."""
    path = program(tmux, "QA", REDRAWER, stop)
    wait_for(lambda: "redrawing 3" in tmux.capture("QA"), what="the redrawing to start")
    use_socket(project, tmux.socket)
    queue(project, "coder", ["QA"])
    return path


def test_a_pane_that_keeps_redrawing_gets_no_wake_up_until_it_stops(
    project: Project, tmux: Tmux
) -> None:
    stop = Path(tmux.dir) / "stop"
    path = busy_with_mail(project, tmux, str(stop))
    daemon = open_daemon(project, record=False, idle_after=1.0)

    daemon.step(1000.0)
    time.sleep(2.5)  # the pane stays busy all along: nothing may be typed into it
    assert received_now(path) == [] and events(project, "wake") == []
    stopped_at = time.monotonic()
    stop.touch()

    arrived = first_byte_at(path)
    assert stopped_at < arrived < stopped_at + 0.2 + 1.0 + 1.0  # a last redraw, idle-after, 1 s
    assert daemon.waker.drain(10)
    [woke] = events(project, "wake")
    assert woke["submitted"] is True and woke["forced"] is False
    assert events(project, "wake_forced") == []
    daemon.close()


def test_a_pane_that_never_goes_quiet_gets_the_wake_up_after_idle_wait_logged_forced(
    project: Project, tmux: Tmux
) -> None:
    path = busy_with_mail(project, tmux, str(Path(tmux.dir) / "never"))
    daemon = open_daemon(project, record=False, idle_after=1.0, idle_wait=2.0)

    asked_at = time.monotonic()
    daemon.step(1000.0)

    assert first_byte_at(path) - asked_at >= 2.0
    assert daemon.waker.drain(10)
    [forced] = events(project, "wake_forced")
    [woke] = events(project, "wake")
    assert forced["role"] == "QA" and forced["waited"] >= 2.0 and woke["forced"] is True
    daemon.close()


def test_marking_itself_idle_lets_a_pane_that_just_changed_be_woken_at_once(
    project: Project, tmux: Tmux
) -> None:
    stop = Path(tmux.dir) / "stop"
    path = busy_with_mail(project, tmux, str(stop))
    daemon = open_daemon(project, record=False, idle_after=8.0)
    daemon.step(1000.0)
    stop.touch()
    time.sleep(0.6)  # the turn's last output is on screen, then the end-of-turn hook runs
    result = project.run("handoffd", "idle", role="QA")
    assert result.code == 0 and result.out == f"IDLE: {project.handoffs('QA') / 'idle'}\n"
    marked_at = time.monotonic()

    assert first_byte_at(path) - marked_at < 1.0  # not the 8 s the pane would need otherwise
    daemon.close()


def test_closing_the_waker_never_waits_out_an_idle_wait(project: Project, tmux: Tmux) -> None:
    program(tmux, "QA", REDRAWER, str(Path(tmux.dir) / "never"))
    use_socket(project, tmux.socket)
    daemon = open_daemon(project, record=False, idle_after=1.0, idle_wait=60.0)
    daemon.waker.wake([("QA", "QA")])
    wait_for(wake_threads, what="the wake-up thread to start")
    time.sleep(0.5)

    started = time.monotonic()
    daemon.close()
    assert time.monotonic() - started < 1.5
    assert events(project, "wake") == [] and not wake_threads()
    [dropped] = events(project, "wake_failed")  # never lost without a word
    assert dropped["role"] == "QA" and dropped["error"] == "stopped before the pane went quiet"


def test_a_tui_that_ignores_the_first_return_gets_one_more_and_the_wake_up_is_submitted(
    project: Project, tmux: Tmux
) -> None:
    path = program(tmux, "QA", LINE_EDITOR, "2")
    wait_for(lambda: "READY" in tmux.capture("QA"), what="the editor to start")
    use_socket(project, tmux.socket)
    daemon = open_daemon(project, record=False)

    daemon.waker.wake([("QA", "QA")])
    assert daemon.waker.drain(10)

    assert f"taken: {TEXT}" in tmux.capture("QA")
    got = received_now(path)
    returns = [at for at, byte in got if byte == 13]
    assert len(returns) == 2 and returns[1] - returns[0] >= 0.5
    [woke] = events(project, "wake")
    assert woke["submitted"] is True and events(project, "wake_unsubmitted") == []
    daemon.close()


def test_a_program_that_never_takes_the_line_is_logged_unsubmitted(
    project: Project, tmux: Tmux
) -> None:
    program(tmux, "QA", LINE_EDITOR, "0")
    wait_for(lambda: "READY" in tmux.capture("QA"), what="the editor to start")
    use_socket(project, tmux.socket)
    daemon = open_daemon(project, record=False)

    daemon.waker.wake([("QA", "QA")])
    assert daemon.waker.drain(10)

    [woke] = events(project, "wake")
    [unsubmitted] = events(project, "wake_unsubmitted")
    assert woke["submitted"] is False and unsubmitted["role"] == "QA"
    daemon.close()


def test_a_line_a_program_printed_back_after_reading_it_counts_as_submitted(
    project: Project, tmux: Tmux
) -> None:
    """`cat` shows the wake-up's text on its last line once it has read it: the cursor
    below it says it was taken."""
    sessions(tmux, project, "QA")
    daemon = open_daemon(project, record=False)
    daemon.waker.wake([("QA", "QA")])
    assert daemon.waker.drain(10)
    [woke] = events(project, "wake")
    assert woke["submitted"] is True and tmux.wakes("QA") == 1
    daemon.close()


def test_a_pane_whose_program_exited_gets_no_wake_up_and_says_why(
    project: Project, tmux: Tmux
) -> None:
    """tmux takes keys for a dead pane (kept by remain-on-exit) and drops them: that is a
    failed wake-up, never a `wake`."""
    tmux.run("new-session", "-d", "-s", "QA", "sleep 0.3", ";",
             "set-option", "-g", "remain-on-exit", "on")  # fmt: skip
    wait_for(lambda: tmux.run("display-message", "-p", "-t", "=QA:", "#{pane_dead}")
             .stdout.strip() == "1", what="the pane's program to exit")  # fmt: skip
    use_socket(project, tmux.socket)
    daemon = open_daemon(project, record=False)

    daemon.waker.wake([("QA", "QA")])
    assert daemon.waker.drain(10)

    [failed] = events(project, "wake_failed")
    assert failed["role"] == "QA" and "has exited" in failed["error"]
    assert events(project, "wake") == []
    daemon.close()


# --- a person's text in a known harness's box (docs/protocol.md §17) -----------------------

# A stand-in for Claude Code's screen: its conversation, then its input box between two
# rules.  What is typed shows in the box; Enter moves it into the conversation; C-u
# empties it.  Every byte it reads is timestamped.
BOXED = r"""
import os, sys, time, tty
out = open(sys.argv[1], "w", buffering=1)
tty.setraw(0)
said, box = [], ""
def draw():
    rule = "\u2500" * 40
    rows = [" Claude Code (a stand-in)", *(f"\u276f {line}" for line in said), "", rule,
            f"\u276f {box}" if box else "\u276f\u00a0", rule]
    os.write(1, ("\x1b[H\x1b[2J" + "\r\n".join(rows)).encode())
draw()
while True:
    byte = os.read(0, 1)
    if not byte:
        break
    out.write(f"{time.monotonic_ns()} {byte[0]}\n")
    if byte == b"\r":
        said, box = (said + [box], "") if box else (said, box)
    elif byte == b"\x15":
        box = ""
    elif byte >= b" ":
        box += byte.decode("latin-1")
    draw()
"""
HALF = "please refactor the par"


def status_of(project: Project, *args: str) -> Any:
    return json.loads(project.run("handoffd", "status", *args, "--json", role="QA").out)


def test_a_persons_text_in_the_box_holds_the_wake_up_counted_until_they_clear_it(
    project: Project, tmux: Tmux
) -> None:
    """A box holding text handoffd did not type is never typed into, past --idle-wait (1 s
    here) or not; the wait is a wake-up for re-notify and stalls (each re-notify due
    counts one more), `status` says so, and once the person empties the box the line is
    typed, replacing the last attempt that waited."""
    path = program(tmux, "QA", BOXED)
    tmux.run("set-option", "-t", "=QA:", "@handoffd-harness", "claude")
    wait_for(lambda: "\u276f\u00a0" in tmux.run("capture-pane", "-p", "-t", "=QA:").stdout,
             what="the stand-in's box")  # fmt: skip
    tmux.run("send-keys", "-t", "=QA:", "-l", "--", HALF)  # a person, mid-sentence
    wait_for(lambda: len(received_now(path)) == len(HALF), what="the person's keys")
    use_socket(project, tmux.socket)
    queue(project, "coder", ["QA"])
    daemon = open_daemon(project, record=False, idle_wait=1.0, renotify_after=10.0)

    daemon.step(1000.0)
    waited = wait_event(project, "wake", where=lambda e: e.get("held") is True)
    assert (waited["role"], waited["submitted"], waited["harness"]) == ("QA", False, "claude")
    time.sleep(1.5)  # past --idle-wait: still nothing typed
    daemon.step(1011.0)  # the re-notify clock runs while the line waits
    daemon.step(1022.0)
    assert [e["role"] for e in events(project, "renotify")] == ["QA"]
    assert len([e for e in events(project, "wake") if e.get("held")]) == 2
    assert len(received_now(path)) == len(HALF) and events(project, "wake_forced") == []
    daemon.panes.save(str(project.root))  # what `status` shows of the pane, while it runs
    assert (panes.load(str(project.root))["QA"]["held"], daemon.panes.state("QA")) == (True, "busy")
    [card] = status_of(project)
    assert card["wakes"]["sent"] == 2 and card["wakes"]["submitted"] is False

    cleared_at = time.monotonic()
    tmux.run("send-keys", "-t", "=QA:", "C-u")  # the person empties the box
    assert first_key_after_clear(path) - cleared_at < 3.0
    typed = wait_event(project, "wake", where=lambda e: e.get("after_held") is True)
    assert typed["submitted"] is True and not typed.get("held")
    assert f"\u276f {TEXT}" in tmux.run("capture-pane", "-p", "-t", "=QA:").stdout
    daemon.panes.save(str(project.root))
    assert panes.load(str(project.root))["QA"]["held"] is False
    [card] = status_of(project)
    assert card["wakes"]["sent"] == 2 and card["wakes"]["submitted"] is True
    daemon.close()


def first_key_after_clear(path: Path) -> float:
    """When the first byte after the person's C-u (byte 21) arrived: the wake-up's."""

    def after_clear() -> list[float]:
        got = received_now(path)
        clear = next((i for i, (_, byte) in enumerate(got) if byte == 21), None)
        return [] if clear is None else [at for at, _ in got[clear + 1 :]]

    return wait_for(after_clear, 10, what="a key after the box was emptied")[0]


def test_handoffds_own_line_left_unsent_in_the_box_gets_only_its_enter(
    project: Project, tmux: Tmux
) -> None:
    """A box holding exactly the mail line (typed by a daemon stopped before its Enter) is
    no person's: the wake-up sends the Enter it owes, not the text a second time."""
    path = program(tmux, "QA", BOXED)
    tmux.run("set-option", "-t", "=QA:", "@handoffd-harness", "claude")
    wait_for(lambda: "\u276f\u00a0" in tmux.run("capture-pane", "-p", "-t", "=QA:").stdout,
             what="the stand-in's box")  # fmt: skip
    tmux.run("send-keys", "-t", "=QA:", "-l", "--", TEXT)
    wait_for(lambda: len(received_now(path)) == len(TEXT), what="the line left in the box")
    use_socket(project, tmux.socket)
    daemon = open_daemon(project, record=False)

    daemon.waker.wake([("QA", "QA")])
    assert daemon.waker.drain(10)
    assert [byte for _, byte in received_now(path)[len(TEXT) :]] == [13]  # one Enter
    [woke] = events(project, "wake")
    assert woke["submitted"] is True and not woke.get("held")
    daemon.close()
