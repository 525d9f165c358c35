"""Reclaiming (docs/protocol.md §17): the daemon gives back what a pool member that stopped
answering held — on an expired heartbeat, or a session gone a minute — never direct mail,
and the member that comes back is told, with nothing moved."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time

import pytest

from handoffd.core import config, limits
from handoffd.core import handoff as hf
from handoffd.daemon.reclaim import Keeper, add_note
from handoffd.ops import queue
from handoffd.ops.context import Context
from handoffd.queue import heartbeat, inbox, lock, pool
from testbed.project import helper_env, make_pool_project
from tests.fault_support import RecordingLog
from tests.test_pool import COMPLETED, IN_PROCESS, NEW, pool_copy, pool_inbox, run_as


def claimed(tmp_path, mode="task"):
    proj = make_pool_project(tmp_path / "p", mode=mode)
    copy = pool_copy(proj, 1)
    assert run_as(proj, "cleaner-2", "ready_for_next")[0] == 0
    return proj, copy


def age_heartbeat(proj, member, seconds):
    beat = proj.handoffs(member) / "heartbeat"
    then = time.time() - seconds
    os.utime(beat, (then, then))


def log_events(proj, event):
    lines = (proj.root / ".swarmforge" / "daemon" / "handoffd.log").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e.get("event") == event]


@pytest.mark.parametrize("mode", ["task", "batch"])
def test_an_expired_heartbeat_gives_the_claim_back_to_the_pool(tmp_path, mode):
    proj, copy = claimed(tmp_path, mode)
    age_heartbeat(proj, "cleaner-2", 120)
    run = proj.run("handoffd", "run", "--once", "--reclaim-after", "60", role=None, cwd=proj.root)
    assert run.code == 0, run.err
    assert copy.exists() and not list(proj.box("cleaner-2", IN_PROCESS).rglob("*.handoff"))
    headers = hf.read(str(copy))
    assert headers.get("reclaimed_from") == "cleaner-2" and headers.get("reclaimed_at")
    assert headers.get("dequeued_at") is None and headers.get("claimed_by") is None
    (event,) = log_events(proj, "reclaimed")
    card = f"{hf.name_id(copy.name)}@cleaner"
    assert (event["card"], event["member"], event["why"]) == (card, "cleaner-2", pool.EXPIRED)


def test_a_fresh_heartbeat_keeps_the_claim(tmp_path):
    proj, copy = claimed(tmp_path)
    run = proj.run("handoffd", "run", "--once", "--reclaim-after", "60", role=None, cwd=proj.root)
    assert run.code == 0 and not copy.exists()
    assert len(list(proj.box("cleaner-2", IN_PROCESS).iterdir())) == 1


@pytest.mark.parametrize("mode", ["task", "batch"])
def test_the_member_that_comes_back_is_told_and_nothing_moves(tmp_path, mode):
    proj, copy = claimed(tmp_path, mode)
    roles = config.load_roles(str(proj.root))
    at = time.time()
    Keeper(str(proj.root), RecordingLog()).give_back(
        roles["cleaner-2"], roles["cleaner"], pool.SESSION_GONE, at
    )
    before = sorted(p for p in proj.root.rglob("*.handoff"))
    code, out, err = run_as(proj, "cleaner-2", "done_with_current")
    token = "NO_CURRENT_TASK" if mode == "task" else "NO_CURRENT_BATCH"
    card = f"{hf.name_id(copy.name)}@cleaner"
    assert code == 1 and out == ""
    assert err == f"{token}\nRECLAIMED: {card} went back to cleaner at {hf.iso_now(at)} " \
                  "(session gone)\n"  # fmt: skip
    assert sorted(p for p in proj.root.rglob("*.handoff")) == before
    assert not list(proj.box("cleaner-2", COMPLETED).rglob("*.handoff"))
    assert run_as(proj, "cleaner-2", "done_with_current")[2] == f"{token}\n"  # said once


@pytest.mark.parametrize("mode", ["task", "batch"])
def test_a_note_of_a_reclaim_cut_off_before_the_move_is_dropped_once_the_member_finishes_it(
    tmp_path, mode
):
    """The daemon writes the note line, then dies before the copy moves: the member still
    holds it and finishes it.  Its line goes then; another card's line stays, told once."""
    proj, copy = claimed(tmp_path, mode)
    card = f"{hf.name_id(copy.name)}@cleaner"
    at = hf.iso_now()
    add_note(str(proj.handoffs("cleaner-2")), pool.note_line(card, "cleaner", at, pool.EXPIRED))
    other = pool.note_line("20260101T000000Z_000099_from_coder@cleaner", "cleaner", at,
                           pool.SESSION_GONE)  # fmt: skip
    add_note(str(proj.handoffs("cleaner-2")), other)
    code, out, _ = run_as(proj, "cleaner-2", "done_with_current")
    assert code == 0 and "COMPLETED" in out
    token = "NO_CURRENT_TASK" if mode == "task" else "NO_CURRENT_BATCH"
    code, _, err = run_as(proj, "cleaner-2", "done_with_current")
    assert code == 1 and err == f"{token}\n{pool.reclaimed_lines(other)[0]}\n"


def test_a_session_gone_a_minute_while_tmux_answers_is_reclaimed(tmp_path):
    proj, copy = claimed(tmp_path)
    roles = config.load_roles(str(proj.root))
    keeper, t0 = Keeper(str(proj.root), RecordingLog()), time.time()
    keeper.seen("cleaner-2", gone=True, answers=True, now=t0)
    assert keeper.tick(roles, t0 + 59) == [] and not copy.exists()
    keeper.seen("cleaner-2", gone=True, answers=False, now=t0 + 30)  # no answer: no clock
    assert keeper.tick(roles, t0 + 90) == [] and not copy.exists()
    keeper.seen("cleaner-2", gone=True, answers=True, now=t0 + 91)
    assert keeper.tick(roles, t0 + 151) == [f"{hf.name_id(copy.name)}@cleaner"]
    assert copy.exists()


def test_direct_mail_to_a_member_is_never_reclaimed(tmp_path):
    proj = make_pool_project(tmp_path / "p")
    own = proj.put("cleaner-2", "40_x_to_cleaner-2.handoff", recipient="cleaner-2")
    assert run_as(proj, "cleaner-2", "ready_for_next")[0] == 0
    age_heartbeat(proj, "cleaner-2", 7200)
    run = proj.run("handoffd", "run", "--once", role=None, cwd=proj.root)
    assert run.code == 0
    assert (proj.box("cleaner-2", IN_PROCESS) / own.name).exists()
    assert not list(proj.box("cleaner", NEW).iterdir()) and not log_events(proj, "reclaimed")


def test_a_reclaimed_copy_is_claimed_again_by_another_member(tmp_path):
    proj, copy = claimed(tmp_path)
    roles = config.load_roles(str(proj.root))
    Keeper(str(proj.root), RecordingLog()).give_back(
        roles["cleaner-2"], roles["cleaner"], pool.EXPIRED, time.time()
    )
    code, out, _ = run_as(proj, "cleaner-3", "ready_for_next")
    assert code == 0 and "cleaner-3" in out.splitlines()[0]
    taken = hf.read(str(proj.box("cleaner-3", IN_PROCESS) / copy.name))
    assert taken.get("claimed_by") == "cleaner-3" and taken.get("reclaimed_from") == "cleaner-2"


def test_the_default_reclaim_after_is_the_liveness_window():
    assert limits.RECLAIM_AFTER == limits.LIVENESS_WINDOW


def test_reclaim_decisions():
    why = pool.reclaim_why  # (heartbeat_at, taken_at, gone_since, now, after)
    assert why(80.0, None, None, 100.0, 10.0) == pool.EXPIRED
    assert why(95.0, None, None, 100.0, 10.0) is None
    assert why(95.0, None, 40.0, 100.0, 10.0) == pool.SESSION_GONE
    assert why(95.0, None, 41.0, 100.0, 10.0) is None
    assert why(80.0, 99.0, None, 100.0, 10.0) == pool.EXPIRED  # a heartbeat that counts rules
    # no heartbeat: the claim expires `after` its taking; nothing known of it, at once
    assert why(None, 95.0, None, 100.0, 10.0) is None
    assert why(None, 80.0, None, 100.0, 10.0) == pool.NO_HEARTBEAT
    assert why(None, None, None, 100.0, 10.0) == pool.NO_HEARTBEAT
    # a heartbeat more than a minute ahead of the clock counts as none; one less does
    assert why(161.0, 95.0, None, 100.0, 10.0) is None
    assert why(161.0, 80.0, None, 100.0, 10.0) == pool.AHEAD
    assert why(161.0, 161.0, None, 100.0, 10.0) == pool.AHEAD  # a taking from the future too
    assert why(159.0, 10.0, None, 100.0, 10.0) is None


FUTURE = 1893456000.0  # 2030-01-01T00:00:00Z: `touch -d 2030-01-01`, or a clock stepped back


@pytest.mark.parametrize(
    ("beat", "taken_ago", "colour", "detail", "why"),
    [
        ("none", 0, "YELLOW", r"agent@cleaner-2, no heartbeat, taken \ds ago", None),
        ("none", 120, "ORANGE", r"claim expired: agent@cleaner-2, no heartbeat, taken 2m ago",
         "no heartbeat"),
        ("future", 0, "YELLOW",
         r"agent@cleaner-2, heartbeat \d+d \d\dh in the future, taken \ds ago", None),
        ("future", 120, "ORANGE",
         r"claim expired: agent@cleaner-2, heartbeat \d+d \d\dh in the future, taken 2m ago",
         "heartbeat in the future"),
        ("near future", 120, "YELLOW", r"agent@cleaner-2, heartbeat 0s ago", None),
        ("old", 0, "ORANGE", r"claim expired: agent@cleaner-2, heartbeat 2m ago",
         "heartbeat expired"),
    ],
)  # fmt: skip
def test_what_the_board_says_of_a_claim_is_what_the_daemon_does(
    tmp_path, beat, taken_ago, colour, detail, why
):
    """A claim with no heartbeat lives `--reclaim-after` from its `dequeued_at`; one whose
    heartbeat is from the future (more than a minute ahead) counts as having none.  The
    board (its window as long as the daemon's --reclaim-after) says yellow for exactly the
    claims the daemon keeps, and its detail says why."""
    proj, copy = claimed(tmp_path)
    held = proj.box("cleaner-2", IN_PROCESS) / copy.name
    beat_file = proj.handoffs("cleaner-2") / "heartbeat"
    if taken_ago:
        handoff = hf.read(str(held))
        handoff.set(hf.DEQUEUED_AT, hf.iso_now(time.time() - taken_ago))
        held.write_bytes(handoff.render())
    if beat == "none":
        beat_file.unlink()
    elif beat == "future":
        os.utime(beat_file, (FUTURE, FUTURE))
    elif beat == "near future":
        os.utime(beat_file, (time.time() + 30, time.time() + 30))
    elif beat == "old":
        age_heartbeat(proj, "cleaner-2", 120)
    board = proj.run("handoffd", "status", "--window", "1", role=None, cwd=proj.root)
    card = f"{hf.name_id(copy.name)}@cleaner"
    (row,) = [line for line in board.out.splitlines() if card in line]
    assert row.startswith(colour) and re.search(detail + "$", row), row
    run = proj.run("handoffd", "run", "--once", "--reclaim-after", "60", role=None, cwd=proj.root)
    assert run.code == 0, run.err
    if why is None:
        assert held.exists() and not copy.exists() and not log_events(proj, "reclaimed")
    else:
        assert copy.exists() and not held.exists()
        assert [e["why"] for e in log_events(proj, "reclaimed")] == [why]


def test_a_pools_inbox_left_a_link_is_said_once_not_at_every_rescan(tmp_path):
    """`reclaim_failed` was logged at every rescan while a pool's inbox was a link (79
    lines in 8 s): it is said once per cause, and again once the failure has cleared."""
    proj, copy = claimed(tmp_path)
    age_heartbeat(proj, "cleaner-2", 7200)
    roles, log = config.load_roles(str(proj.root)), RecordingLog()
    keeper = Keeper(str(proj.root), log, after=60.0)
    inbox_dir = proj.handoffs("cleaner") / "inbox"
    aside = tmp_path / "elsewhere"

    def linked() -> None:
        inbox_dir.rename(aside)
        inbox_dir.symlink_to(aside)

    def failed() -> list[str]:
        return [fields["member"] for event, fields in log.events if event == "reclaim_failed"]

    linked()
    for _ in range(5):
        assert keeper.tick(roles, time.time()) == []
    assert failed() == ["cleaner-2"]
    inbox_dir.unlink()
    aside.rename(inbox_dir)
    assert keeper.tick(roles, time.time()) == [f"{hf.name_id(copy.name)}@cleaner"]
    assert run_as(proj, "cleaner-2", "ready_for_next")[0] == 0  # it claims the copy again
    age_heartbeat(proj, "cleaner-2", 7200)
    linked()
    for _ in range(3):
        keeper.tick(roles, time.time())
    assert failed() == ["cleaner-2", "cleaner-2"]  # cleared in between: said again, once


def test_a_note_line_torn_or_planted_is_never_said():
    good = pool.note_line("a@c", "c", "2026-01-01T00:00:00Z", "session\tgone\n")
    assert pool.reclaimed_lines(good + "torn\tline") == [
        "RECLAIMED: a@c went back to c at 2026-01-01T00:00:00Z (session gone )"
    ]
    assert pool.reclaimed_lines("a\x1b[2J\tc\tt\tw\n") == []


# --- a claim is fresh (docs/protocol.md §17, "Part IV under hostile use") ---------------


def idle_member(tmp_path):
    """A pool project whose member cleaner-2 has a heartbeat two hours old: it has been
    idle that long (only its helpers renew it), and now claims."""
    proj = make_pool_project(tmp_path / "p")
    assert run_as(proj, "cleaner-2", "ready_for_next")[1] == "NO_TASK\n"
    return proj, config.load_roles(str(proj.root))


def test_a_long_idle_member_keeps_the_copy_it_claims_while_the_daemon_steps_its_reclaim(
    tmp_path,
):
    """The real race: the daemon's reclaim stepped as fast as it goes while the member's
    real `ready_for_next` claims.  Before the fix every round lost its copy: the daemon
    read the old heartbeat, waited for the member's lock, and gave back what it had just
    claimed, for another member to take."""
    proj, roles = idle_member(tmp_path)
    keeper = Keeper(str(proj.root), RecordingLog(), after=60.0)
    for n in range(1, 21):
        pool_copy(proj, n)
        age_heartbeat(proj, "cleaner-2", 7200)
        helper = subprocess.Popen(["ready_for_next"], env=helper_env("cleaner-2"),
                                  cwd=proj.worktrees["cleaner-2"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)  # fmt: skip
        ticks = 0
        while helper.poll() is None:
            assert keeper.tick(roles, time.time()) == [], f"round {n}: the claim went back"
            ticks += 1
        out, err = helper.communicate()
        assert out.startswith(b"TASK:"), err
        assert keeper.tick(roles, time.time()) == [], f"round {n}: the claim went back"
        assert ticks > 0 and len(list(proj.box("cleaner-2", IN_PROCESS).iterdir())) == 1
        assert run_as(proj, "cleaner-2", "done_with_current")[0] == 0
    assert not list(proj.box("cleaner", NEW).iterdir())


def test_the_reclaim_is_decided_again_under_the_members_lock(tmp_path, monkeypatch):
    """Stepped: the member holds its lock and has claimed; the daemon reads the old
    heartbeat, sees the copy and waits for the lock; the member renews its heartbeat and
    lets the lock go; the daemon, holding the lock, reads the heartbeat again and gives
    nothing back."""
    proj, roles = idle_member(tmp_path)
    copy = pool_copy(proj, 1)
    age_heartbeat(proj, "cleaner-2", 7200)
    keeper, given = Keeper(str(proj.root), RecordingLog(), after=60.0), []
    waiting, real_hold = threading.Event(), lock.hold

    def hold(fd, seconds=lock.LOCK_WAIT):
        waiting.set()  # the daemon has looked at the heartbeat and waits for the lock
        return real_hold(fd, seconds)

    with pool_inbox(proj, "cleaner-2") as member:
        assert member.take_task() is not None  # the claim, its heartbeat still the old one
        monkeypatch.setattr(inbox, "hold", hold)
        daemon = threading.Thread(target=lambda: given.extend(keeper.tick(roles, time.time())))
        daemon.start()
        assert waiting.wait(10)
        heartbeat.renew(str(proj.handoffs("cleaner-2")), "agent", "")  # before the lock goes
    daemon.join(10)
    assert given == [] and not copy.exists()
    assert (proj.box("cleaner-2", IN_PROCESS) / copy.name).exists()


@pytest.mark.parametrize("mode", ["task", "batch"])
def test_a_claim_renews_the_heartbeat_before_its_rename(tmp_path, monkeypatch, mode):
    """The heartbeat is fresh at the instant the copy lands in the member's inbox, not
    only once the step is over: nothing that looks (a daemon, the board) ever sees the
    claim beside the heartbeat of the member's long idle."""
    proj = make_pool_project(tmp_path / "p", mode=mode)
    assert run_as(proj, "cleaner-2", "ready_for_next")[0] == 0
    age_heartbeat(proj, "cleaner-2", 7200)
    pool_copy(proj, 1)
    ages, real_claim = [], inbox._claim

    def claim(source, target):
        beat = heartbeat.read(str(proj.handoffs("cleaner-2")))
        ages.append(time.time() - beat.at if beat else None)
        return real_claim(source, target)

    monkeypatch.setattr(inbox, "_claim", claim)
    roles = config.load_roles(str(proj.root))
    result = queue.take(Context(str(proj.root), roles, roles["cleaner-2"]))
    assert result.code == 0 and "cleaner" in result.out
    assert ages and all(age is not None and age < 60 for age in ages)


def test_a_reclaim_is_no_take_of_the_dead_member(tmp_path):
    """The daemon's own rename out of a dead member's `in_process/` is not that member
    taking work: its "last take" stays as it was (docs/protocol.md §14, §17)."""
    from handoffd.daemon.daemon import Daemon

    proj, copy = claimed(tmp_path)
    age_heartbeat(proj, "cleaner-2", 120)
    saved = proj.root / ".swarmforge" / "daemon" / "panes.json"
    saved.parent.mkdir(parents=True, exist_ok=True)
    daemon = Daemon(str(proj.root), RecordingLog(), reclaim_after=60)
    daemon.open(watch=False)
    try:
        t0 = time.monotonic()
        daemon.step(t0)  # learns the stamps, then gives the copy back
        assert copy.exists()
        daemon.step(t0 + 10)  # the next rescan looks at in_process/ again
        daemon.step(t0 + 20)
    finally:
        daemon.close()
    rows = json.loads(saved.read_text()) if saved.exists() else {}
    assert rows.get("cleaner-2", {}).get("last_take_at") is None, rows
