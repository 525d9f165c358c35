"""A pool on the board and in `status` (docs/protocol.md §17): its cards are `<id>@<pool>`
wherever the copy is, the claim names the member, a reclaimed card says from whom and
why, and the pool's line sums its members'; `up` starts the members, never the pool."""

from __future__ import annotations

import json
import re

from handoffd.board import status
from handoffd.core import config
from handoffd.core import handoff as hf
from handoffd.snapshot.snapshot import take_snapshot
from testbed.project import make_pool_project
from tests.test_pool import pool_copy, run_as
from tests.test_reclaim import age_heartbeat


def board_rows(proj, *args):
    done = proj.run("handoffd", "status", *args, role=None, cwd=proj.root)
    assert done.code == 0, done.err
    return done.out


def test_a_claimed_pool_copy_is_the_pools_card_with_the_members_claim(tmp_path):
    proj = make_pool_project(tmp_path / "p")
    copy = pool_copy(proj, 1)
    card = f"{hf.name_id(copy.name)}@cleaner"
    assert card in board_rows(proj)  # waiting in the pool
    assert run_as(proj, "cleaner-2", "ready_for_next")[0] == 0
    out = board_rows(proj)
    row = next(line for line in out.splitlines() if card in line)
    assert row.startswith("YELLOW") and "agent@cleaner-2, heartbeat" in row
    data = json.loads(board_rows(proj, "--json"))
    (shown,) = data if isinstance(data, list) else data["cards"]
    assert shown["card"] == card and shown["claim"]["role"] == "cleaner-2"


def test_a_member_names_its_pools_card_as_its_own(tmp_path):
    proj = make_pool_project(tmp_path / "p")
    copy = pool_copy(proj, 1)
    assert run_as(proj, "cleaner-2", "ready_for_next")[0] == 0
    card = f"{hf.name_id(copy.name)}@cleaner"
    done = proj.run("handoffd", "release", card, role="cleaner-2")
    assert done.code == 0, done.err
    assert copy.exists()  # back in the pool's new/


def test_an_operator_naming_a_pools_card_acts_on_the_member_holding_it(tmp_path):
    proj = make_pool_project(tmp_path / "p")
    copy = pool_copy(proj, 1)
    assert run_as(proj, "cleaner-3", "ready_for_next")[0] == 0
    card = f"{hf.name_id(copy.name)}@cleaner"
    done = proj.run("handoffd", "block", card, "--reason", "needs a key", role=None,
                    cwd=proj.root)  # fmt: skip
    assert done.code == 0, done.err
    held = proj.box("cleaner-3", "inbox/in_process") / copy.name
    assert hf.read(str(held)).get("blocked_reason") == "needs a key"


def test_a_reclaimed_card_says_from_whom_how_long_ago_and_why(tmp_path):
    proj = make_pool_project(tmp_path / "p")
    copy = pool_copy(proj, 1)
    assert run_as(proj, "cleaner-2", "ready_for_next")[0] == 0
    age_heartbeat(proj, "cleaner-2", 120)
    run = proj.run("handoffd", "run", "--once", "--reclaim-after", "60", role=None, cwd=proj.root)
    assert run.code == 0, run.err
    row = next(line for line in board_rows(proj).splitlines() if hf.name_id(copy.name) in line)
    assert re.search(r"reclaimed from cleaner-2 \d+s ago \(heartbeat expired\)$", row), row


def test_status_prints_the_pools_line_above_its_members(tmp_path):
    proj = make_pool_project(tmp_path / "p")
    snapshot = take_snapshot(str(proj.root))
    snapshot.panes = {"cleaner-1": {"pane": "busy"}, "cleaner-2": {"pane": "idle"},
                      "cleaner-3": {"pane": "busy"}}  # fmt: skip
    lines = status.role_lines(status.roles(snapshot), 0.0)
    names = [line.split()[0] for line in lines]
    assert names == ["coder", "cleaner", "cleaner-1", "cleaner-2", "cleaner-3"]
    assert lines[1] == "cleaner    pool of 3: 2 busy, 1 idle"
    snapshot.panes = {"cleaner-1": {"pane": "gone"}}
    assert status.role_lines(status.roles(snapshot, "cleaner"), 0.0)[0] == (
        "cleaner    pool of 3: 0 busy, 0 idle, 1 gone, 2 unknown"
    )


def test_status_roles_json_gives_the_pool_with_its_members(tmp_path):
    proj = make_pool_project(tmp_path / "p")
    data = json.loads(board_rows(proj, "--roles", "--json"))
    pool = next(row for row in data if row["role"] == "cleaner")
    assert pool["pool"] == 3 and pool["members"] == ["cleaner-1", "cleaner-2", "cleaner-3"]
    assert pool["unknown"] == 3  # no daemon runs: no pane is known
    member = next(row for row in data if row["role"] == "cleaner-2")
    assert member["pool"] == "cleaner" and member["session"] == "cleaner-2"


def test_up_starts_every_member_and_no_session_for_the_pool(tmp_path):
    """`up` starts a session per member (the pool's row has none to start), `down` stops
    them all."""
    from handoffd.core import project as layout

    root = (tmp_path / "p").resolve()
    text = "window coder sh master task\npool cleaner 3 sh task\n"
    layout.init(str(root), layout.parse_swarm(text, "conf").windows, text)
    up = run_cli(root, "up", "--agent", "sh=sleep 600", "--check-after", "0")
    try:
        assert up.returncode == 0, up.stderr
        # the pool's own row has no session: no attach line for it (a broken `-t =`)
        assert not any(line.endswith("attach -t =") for line in up.stdout.splitlines())
        assert (
            "  cleaner      pool of 3: attach to its members (cleaner-1, cleaner-2, "
            "cleaner-3)" in up.stdout.splitlines()
        )
        socket = (root / ".swarmforge" / "tmux-socket").read_text().strip()
        listed = subprocess_out(["tmux", "-S", socket, "list-sessions", "-F", "#S"])
        assert sorted(listed.split()) == [
            "swarmforge-cleaner-1", "swarmforge-cleaner-2", "swarmforge-cleaner-3",
            "swarmforge-coder",
        ]  # fmt: skip
        assert config.load_roles(str(root))["cleaner"].session == ""
    finally:
        down = run_cli(root, "down")
    assert down.returncode == 0, down.stderr
    assert subprocess_code(["tmux", "-S", socket, "list-sessions"]) != 0


def run_cli(root, *args):
    import os
    import subprocess
    import sys

    handoffd = os.path.join(os.path.dirname(sys.executable), "handoffd")
    return subprocess.run([handoffd, *args, str(root)], capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip


def subprocess_out(argv):
    import subprocess

    return subprocess.run(argv, capture_output=True, text=True, timeout=10, check=True).stdout


def subprocess_code(argv):
    import subprocess

    return subprocess.run(argv, capture_output=True, timeout=10, check=False).returncode


def test_a_pools_waiting_card_counts_its_members_wake_ups_for_red(tmp_path):
    """Three wake-ups of members since a pool's card arrived, none of them taking anything:
    the card is red, as a role's is (docs/protocol.md §14)."""
    import time

    proj = make_pool_project(tmp_path / "p")
    copy = pool_copy(proj, 1)
    arrived = time.time() - 300
    hf.stamp(str(copy), "enqueued_at", hf.iso_now(arrived))
    log = proj.root / ".swarmforge" / "daemon" / "handoffd.log"
    log.parent.mkdir(parents=True)
    lines = [json.dumps({"event": "wake", "role": f"cleaner-{k}", "submitted": True,
                         "timestamp": hf.iso_now(arrived + 60 * k)})
             for k in (1, 2, 3)]  # fmt: skip
    log.write_text("\n".join(lines) + "\n")
    row = next(line for line in board_rows(proj).splitlines() if hf.name_id(copy.name) in line)
    assert row.startswith("RED") and "not taken after 3 wake-ups" in row, row


def test_status_of_the_pool_shows_its_cards_wherever_they_are(tmp_path):
    proj = make_pool_project(tmp_path / "p")
    first, second = pool_copy(proj, 1), pool_copy(proj, 2)
    assert run_as(proj, "cleaner-1", "ready_for_next")[0] == 0
    out = board_rows(proj, "--role", "cleaner")
    assert hf.name_id(first.name) in out and hf.name_id(second.name) in out
    mine = board_rows(proj, "--role", "cleaner-1")
    assert hf.name_id(first.name) in mine and hf.name_id(second.name) not in mine


def detail_with_panes(proj, copy, panes):
    """The card of `copy` as the board shows it, the daemon having seen `panes`."""
    import time

    from handoffd.board import cards

    snapshot = take_snapshot(str(proj.root))
    snapshot.panes = panes
    board = cards.project(snapshot, time.time())
    (card,) = [c for c in board.cards if c.id == hf.name_id(copy.name)]
    lines = status.render(board, time.time(), False, False)
    assert any(card.detail in line for line in lines)  # the terminal shows it so
    return card


def test_a_card_held_by_a_gone_member_says_so_and_when_it_goes_back(tmp_path):
    """While its holder's session is gone the card stays yellow (its heartbeat is fresh),
    but says the holder is gone and when the daemon gives it back to the pool (§17)."""
    import time

    proj = make_pool_project(tmp_path / "p")
    copy = pool_copy(proj, 1)
    assert run_as(proj, "cleaner-2", "ready_for_next")[0] == 0
    card = detail_with_panes(proj, copy, {"cleaner-2": {"pane": "gone", "session": "cleaner-2",
                                                      "since": time.time() - 42}})  # fmt: skip
    assert card.colour == "yellow"
    assert re.search(r"; holder gone 4\ds; back to cleaner in 1\ds$", card.detail), card.detail


def test_a_gone_holder_of_direct_mail_is_said_without_a_return(tmp_path):
    """Direct mail to a member is never reclaimed (§17): no `back to` for it."""
    import time

    proj = make_pool_project(tmp_path / "p")
    copy = pool_copy(proj, 1, pool="cleaner-1")
    assert run_as(proj, "cleaner-1", "ready_for_next")[0] == 0
    card = detail_with_panes(proj, copy, {"cleaner-1": {"pane": "gone", "session": "cleaner-1",
                                                      "since": time.time() - 5}})  # fmt: skip
    assert re.search(r"; holder gone [56]s$", card.detail), card.detail


def test_the_pane_watcher_keeps_since_when_a_session_is_gone():
    from handoffd.wakeups import panes

    seen = panes.Panes(2.0)
    assert seen.observe("c", "s", None, True, 100.0).since == 100.0
    assert seen.observe("c", "s", None, True, 105.0).since == 100.0  # gone since the first
    assert seen.observe("c", "s", None, False, 106.0).since is None  # no server: unknown
