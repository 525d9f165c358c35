"""The daemon's side of an agent's hooks (docs/protocol.md §16): a Stop hook that told its
agent of mail is a wake-up, counted and logged `via: hook`, and the line the waker would
have typed for it is taken back.  Stepped in process, with the time as a parameter."""

from __future__ import annotations

import json

from handoffd.harness import marks
from tests.conftest import Project
from tests.daemon_support import RecordingWaker, events, open_daemon, queue

NAME = "50_20260101T000000Z_000001_from_QA_to_coder.handoff"


def test_a_stop_hooks_announcement_is_a_wake_up_via_hook_counted_on_the_card(
    project: Project,
) -> None:
    project.put("coder", NAME)
    daemon = open_daemon(project)
    waker = daemon.waker
    assert isinstance(waker, RecordingWaker)
    daemon.step(1000.0)  # the first look only learns where each role stands
    assert [e for e in events(project, "wake") if e.get("via") == "hook"] == []

    marks.announce(str(project.handoffs("coder")), f"{NAME}\n-\n")  # as the Stop hook does
    daemon.step(1003.0)
    [told] = [e for e in events(project, "wake") if e.get("via") == "hook"]
    assert (told["role"], told["submitted"]) == ("coder", True)
    assert waker.cancelled == ["coder"]  # the typed line is not needed any more
    daemon.step(1006.0)  # unchanged since: no second wake-up
    assert len([e for e in events(project, "wake") if e.get("via") == "hook"]) == 1

    status = json.loads(project.run("handoffd", "status", "--json", role="coder").out)
    [card] = [c for c in status if c["role"] == "coder"]
    assert card["wakes"]["sent"] == 1 and card["wakes"]["via"] == "hook"


def test_new_mail_after_an_announcement_waits_for_re_notify_as_after_a_typed_wake_up(
    project: Project,
) -> None:
    """The telling is the wake-up: mail arriving while it stands unanswered (nothing
    taken since) wakes no one again at once (docs/protocol.md §5)."""
    daemon = open_daemon(project)
    waker = daemon.waker
    assert isinstance(waker, RecordingWaker)
    daemon.step(1000.0)
    marks.announce(str(project.handoffs("cleaner")), "x\n-\n")
    daemon.step(1003.0)
    queue(project, "QA", ["cleaner"])
    daemon.step(1003.5)
    assert "cleaner" not in waker.woken()
