"""Waking one member, not all (docs/protocol.md §17): a pool's mail wakes one member per
pass, on a real tmux server: the idle one idle longest, then the next on each wake-up."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from handoffd.core import handoff as hf
from handoffd.queue import pool
from testbed.project import make_pool_project
from tests.daemon_support import Tmux, events, open_daemon, queue, tmux_server, use_socket

MEMBERS = ("cleaner-1", "cleaner-2", "cleaner-3")


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    yield from tmux_server()


def test_each_pool_handoff_wakes_one_member_and_the_next_goes_to_the_next(tmp_path, tmux):
    proj = make_pool_project(tmp_path.resolve() / "p")
    for name in ("coder", *MEMBERS):
        tmux.session(name)
    use_socket(proj, tmux.socket)
    daemon = open_daemon(proj, record=False)
    try:
        for n in range(3):
            queue(proj, "coder", ["cleaner"], name=f"50_2026010{n + 1}T000000Z_00000{n}"
                  f"_from_coder_to_cleaner.handoff")  # fmt: skip
            daemon.step(1000.0 + n)
            assert daemon.waker.drain(10)
            assert sum(tmux.wakes(m) for m in MEMBERS) == n + 1  # one wake-up per handoff
        assert [tmux.wakes(m) for m in MEMBERS] == [1, 1, 1]  # each member once, in turn
        assert tmux.wakes("coder") == 0
        woken = [e["role"] for e in events(proj, "wake")]
        assert sorted(woken) == sorted(MEMBERS)
    finally:
        daemon.close()


def test_the_wake_order_is_idle_longest_first_then_woken_least_recently():
    names = ["a-1", "a-2", "a-3", "a-4"]
    assert pool.wake_order(names, {"a-3": 50.0, "a-2": 10.0}, {}) == ["a-2", "a-3", "a-1", "a-4"]
    assert pool.wake_order(names, {}, {"a-1": 5.0, "a-2": 1.0, "a-3": 3.0}) == [
        "a-4", "a-2", "a-3", "a-1"
    ]  # fmt: skip
    # the one woken last goes last, idle or not: a re-notify rotates
    assert pool.wake_order(names, {"a-2": 10.0, "a-3": 50.0}, {"a-2": 99.0}) == [
        "a-3", "a-1", "a-4", "a-2"
    ]  # fmt: skip


def test_a_hooked_member_ending_its_turn_is_told_of_its_pools_mail(tmp_path):
    from tests.test_hooks import stop
    from tests.test_pool import pool_copy

    proj = make_pool_project(tmp_path.resolve() / "p")
    copy = pool_copy(proj, 1)
    said = json.loads(stop(proj, role="cleaner-2"))
    assert said["decision"] == "block"
    assert said["reason"].startswith("You have 1 handoff(s) waiting (first: ")
    assert hf.name_id(copy.name) in said["reason"]
    assert stop(proj, role="coder") == ""  # not a member: the pool's mail is not its own


def test_a_killed_session_is_reclaimed_a_minute_after_the_daemon_saw_it_gone(tmp_path, tmux):
    """Real tmux: cleaner-2 holds a pool copy; its session is killed while the server
    answers; the daemon's look sees it gone, and 60 s later (the clock is a parameter) the
    copy is back in the pool, logged `session gone`."""
    import time

    from handoffd.core import config
    from handoffd.wakeups import panes
    from tests.conftest import wait_for
    from tests.test_pool import pool_copy, run_as

    proj = make_pool_project(tmp_path.resolve() / "p")
    for name in ("coder", *MEMBERS):
        tmux.session(name)
    use_socket(proj, tmux.socket)
    copy = pool_copy(proj, 1)
    assert run_as(proj, "cleaner-2", "ready_for_next")[0] == 0
    daemon = open_daemon(proj, record=False)
    try:
        tmux.run("kill-session", "-t", "=cleaner-2")
        roles = config.load_roles(str(proj.root))
        daemon.waker.look([("cleaner-2", "cleaner-2")])
        wait_for(lambda: daemon.panes.state("cleaner-2") == panes.GONE, 10)
        now = time.time()
        daemon._reclaim(roles, now)
        assert not copy.exists()  # gone, but not for a minute yet
        daemon._reclaim(roles, now + 59)
        assert not copy.exists()
        daemon._reclaim(roles, now + 60)
        assert copy.exists() and hf.read(str(copy)).get("reclaimed_from") == "cleaner-2"
        (event,) = events(proj, "reclaimed")
        assert (event["member"], event["why"]) == ("cleaner-2", pool.SESSION_GONE)
    finally:
        daemon.close()
