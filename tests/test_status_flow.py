"""The board follows the commands: each step of a card's life through the real helpers and
`handoffd` commands, read back through `handoffd status --json` (docs/protocol.md §8)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import Project, wait_for
from tests.daemon_support import (
    Tmux,
    events,
    inbox,
    queue,
    spawn,
    terminate,
    tmux_server,
    use_socket,
    wait_event,
)  # fmt: skip

A = "20260101T000000Z_000001_from_coder"
B = "20260101T000000Z_000002_from_coder"


def put(project: Project, ident: str, role: str = "QA", **headers: str) -> None:
    project.put(role, f"50_{ident}_to_{role}.handoff", id=ident, to=role, recipient=role,
                enqueued_at="2026-01-01T00:00:00Z", **headers)  # fmt: skip


def ok(project: Project, command: str, *args: str, role: str = "QA") -> str:
    result = project.run(command, *args, role=role)
    assert result.code == 0, result.err
    return result.out


def board(project: Project, *args: str) -> dict[str, dict[str, Any]]:
    out = ok(project, "handoffd", "status", "--json", "--root", str(project.root), *args)
    return {card["card"]: card for card in json.loads(out)}


def age_heartbeat(project: Project, role: str, minutes: float) -> None:
    """Make `role`'s heartbeat `minutes` old by its mtime: no sleeping."""
    then = time.time() - minutes * 60
    os.utime(project.handoffs(role) / "heartbeat", (then, then))


def test_block_take_age_release_and_unblock_each_recolour_the_card(project: Project) -> None:
    put(project, A)
    assert board(project)[f"{A}@QA"]["color"] == "orange"

    ok(project, "handoffd", "block", A, "--reason", "needs the staging password")
    card = board(project)[f"{A}@QA"]
    assert (card["color"], card["detail"]) == ("red", "needs the staging password")
    assert card["blocked_reason"] == "needs the staging password"

    ok(project, "ready_for_next")  # a blocked copy waits: not taken (§13)
    assert board(project)[f"{A}@QA"]["state"] == "new"
    ok(project, "handoffd", "unblock", A)
    ok(project, "ready_for_next")
    ok(project, "handoffd", "block", "--reason", "needs the staging password")
    card = board(project)[f"{A}@QA"]  # claimed, and the declared block still wins
    assert (card["state"], card["color"], card["claim"]["live"]) == ("in_process", "red", True)

    ok(project, "handoffd", "unblock")
    card = board(project)[f"{A}@QA"]
    assert (card["color"], card["claim"]["role"], card["claim"]["agent"]) == (
        "yellow", "QA", "agent",
    )  # fmt: skip
    assert card["detail"].startswith("agent@QA, heartbeat ")

    age_heartbeat(project, "QA", 61)  # past the 60-minute window: the claim expires
    card = board(project)[f"{A}@QA"]
    assert (card["color"], card["claim"]["live"]) == ("orange", False)
    assert board(project, "--window", "90")[f"{A}@QA"]["color"] == "yellow"

    ok(project, "handoffd", "release")
    card = board(project, "--window", "90")[f"{A}@QA"]
    assert (card["state"], card["color"], card["claim"]) == ("new", "orange", None)


def test_a_claim_on_a_dependency_makes_the_dependent_yellow_then_done_leaves_it_orange(
    project: Project,
) -> None:
    put(project, A)
    put(project, B, role="cleaner", depends_on=A)
    ok(project, "ready_for_next")
    dependent = board(project)[f"{B}@cleaner"]
    assert (dependent["color"], dependent["depends_on"]) == ("yellow", [A])
    assert dependent["detail"].startswith(f"via {A}@QA: agent@QA")
    ok(project, "done_with_current")
    found = board(project)
    assert f"{A}@QA" not in found and found[f"{B}@cleaner"]["color"] == "orange"
    assert board(project, "--all")[f"{A}@QA"]["color"] == "green"


def test_reports_show_as_the_latest_report_and_blocked_turns_red(project: Project) -> None:
    put(project, A)
    text = "\n\nParser slice 3: tokenizer done, starting the AST.\nMore detail.\n"
    report_file = project.root / "report.md"
    report_file.write_text(text)
    ok(project, "handoffd", "report", "--status", "RUNNING", "--file", str(report_file))
    card = board(project)[f"{A}@QA"]
    assert card["color"] == "yellow"
    report = card["latest_report"]
    assert (report["status"], report["role"], report["excerpt"]) == (
        "RUNNING", "QA", "Parser slice 3: tokenizer done, starting the AST.",
    )  # fmt: skip
    assert report["reported_at"].endswith("Z")
    ok(project, "handoffd", "report", "--status", "BLOCKED", "--reason", "quota exhausted")
    card = board(project)[f"{A}@QA"]
    assert (card["color"], card["detail"], card["latest_report"]["status"]) == (
        "red", "quota exhausted", "BLOCKED",
    )  # fmt: skip


# --- a role that does not answer, a session that is gone (docs/protocol.md §14) -----------------


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    yield from tmux_server()


@pytest.fixture
def daemon(project: Project, tmux: Tmux) -> Iterator[subprocess.Popen[str]]:
    """A real daemon over real tmux sessions running `cat` (an agent that reads its wake-ups
    and never acts on them), re-notifying every half second."""
    for name in ("coder", "QA"):
        tmux.session(name)
    use_socket(project, tmux.socket)
    process = spawn(project, "--renotify-after", "0.5", "--idle-after", "0.2")
    try:
        wait_event(project, "started", where=lambda e: e["pid"] == process.pid)
        yield process
    finally:
        terminate(process)


def ident_of(name: str) -> str:
    return name.split("_", 1)[1].split("_to_")[0]


def red_card(project: Project, role: str = "QA") -> dict[str, Any] | None:
    return next((c for c in board(project).values() if c["role"] == role and c["color"] == "red"),
                None)  # fmt: skip


def test_a_role_that_ignores_three_wake_ups_turns_red_and_back_once_it_takes_work(
    project: Project, daemon: subprocess.Popen[str]
) -> None:
    first, second = queue(project, "coder", ["QA"]), queue(project, "coder", ["QA"])
    card = wait_for(lambda: red_card(project), what="the card to turn red")
    assert re.fullmatch(r"not taken after [3-9] wake-ups over \d+s", card["detail"]), card
    assert card["wakes"]["sent"] >= 3 and card["wakes"]["submitted"] is True
    assert card["wakes"]["last_at"].endswith("Z")

    ok(project, "ready_for_next")  # takes the first; the second waits, answered
    shown = board(project)
    assert shown[f"{ident_of(first.name)}@QA"]["color"] == "yellow"
    waiting = shown[f"{ident_of(second.name)}@QA"]
    assert waiting["color"] == "orange", waiting


def test_a_killed_session_makes_its_waiting_card_red_at_once_and_back_when_it_returns(
    project: Project, tmux: Tmux, daemon: subprocess.Popen[str]
) -> None:
    tmux.run("kill-session", "-t", "=QA")
    queue(project, "coder", ["QA"])
    started = time.monotonic()
    card = wait_for(lambda: red_card(project), what="the card to turn red")
    assert card["detail"] == "QA's session QA is gone"
    assert time.monotonic() - started < 5.0  # the next look at the panes, not a stall

    tmux.session("QA")
    wait_for(lambda: red_card(project) is None, what="the card to leave red")


def roles(project: Project) -> dict[str, dict[str, Any]]:
    out = ok(project, "handoffd", "status", "--roles", "--json", "--root", str(project.root))
    return {row["role"]: row for row in json.loads(out)}


def test_an_agent_that_died_in_its_kept_pane_makes_its_waiting_card_red_at_once(
    project: Project, tmux: Tmux, daemon: subprocess.Popen[str]
) -> None:
    tmux.run("set-option", "-g", "remain-on-exit", "on")
    pid = int(tmux.run("display-message", "-p", "-t", "=QA:", "#{pane_pid}").stdout)
    os.kill(pid, signal.SIGKILL)  # the agent is killed; its pane stays, dead
    queue(project, "coder", ["QA"])
    card = wait_for(lambda: red_card(project), what="the card to turn red")
    assert card["detail"] == "QA's session QA is gone"
    assert roles(project)["QA"]["pane"] == "gone"


def test_status_shows_each_roles_pane_last_wake_and_last_take_at_a_glance(
    project: Project, tmux: Tmux, daemon: subprocess.Popen[str]
) -> None:
    queue(project, "coder", ["QA"])
    row = wait_for(lambda: (lambda r: r if r["last_wake_at"] else None)(roles(project)["QA"]),
                   what="QA's wake-up")  # fmt: skip
    assert set(row) == {"role", "harness", "session", "pane", "pane_since", "last_wake_at",
                        "last_take_at", "last_idle_at", "box_holds_text", "tokens"}  # fmt: skip
    assert row["harness"] == "generic"
    assert (row["session"], row["last_take_at"], row["last_idle_at"]) == ("QA", None, None)
    assert roles(project)["cleaner"]["pane"] == "gone"  # the server answers without its session
    ok(project, "ready_for_next")
    ok(project, "handoffd", "idle")
    row = wait_for(lambda: (lambda r: r if r["last_take_at"] and r["last_idle_at"] else None)(
        roles(project)["QA"]), what="QA's take and idle mark")  # fmt: skip
    assert row["pane"] in ("idle", "busy")  # seen by the daemon, whatever the pane shows now
    assert row["last_idle_at"].endswith("Z")

    lines = ok(project, "handoffd", "status", "--root", str(project.root)).splitlines()
    assert lines[0].startswith("daemon: running (pid ")
    # busy if a re-notify asked for before the take is typed just now: cat prints it back
    assert re.fullmatch(r"QA       (idle|busy) \d+s  last wake \d+s ago  last take \d+s ago",
                        lines[3]), lines  # fmt: skip
    assert lines[2] == "cleaner  gone  last wake never  last take never"

    tmux.run("kill-session", "-t", "=QA")
    queue(project, "coder", ["QA"])  # mail waiting: its pane is read at every rescan
    wait_for(lambda: roles(project)["QA"]["pane"] == "gone", what="QA's pane gone")
    assert ok(project, "handoffd", "status", "--roles", "--root", str(project.root)).splitlines()[
        2].startswith("QA       gone  last wake ")  # fmt: skip


def test_a_card_waiting_on_a_dependency_is_neither_nagged_nor_red_until_the_dependency_is_done(
    project: Project, tmux: Tmux, daemon: subprocess.Popen[str]
) -> None:
    tmux.session("cleaner")
    first = queue(project, "QA", ["coder"])
    wait_for(lambda: inbox(project, "coder"), what="A delivered to coder")
    ok(project, "ready_for_next", role="coder")
    age_heartbeat(project, "coder", 61)  # A is taken, its claim expired: an orange card
    dependency = f"{ident_of(first.name)}@coder"
    waiting = queue(project, "coder", ["QA"], depends_on=ident_of(first.name))
    queue(project, "coder", ["cleaner"])  # ready mail elsewhere: it marks the stall window

    wait_for(lambda: red_card(project, "cleaner"), what="cleaner's card to stall")
    card = board(project)[f"{ident_of(waiting.name)}@QA"]
    assert card["color"] == "orange", card
    assert re.fullmatch(rf"waiting \d+s on {dependency}(, 1 wake-up)?", card["detail"]), card
    assert [e for e in events(project, "renotify") if e["role"] == "QA"] == []

    ok(project, "done_with_current", role="coder")  # A is done: B is ready, and acts so
    wait_event(project, "renotify", where=lambda e: e["role"] == "QA")
    card = wait_for(lambda: red_card(project), what="the now ready card to stall")
    assert card["card"] == f"{ident_of(waiting.name)}@QA"
    assert card["detail"].startswith("not taken after "), card
