"""The projection: a snapshot, the clock and the window in; the cards of §8 out."""

from __future__ import annotations

import builtins
import os

import pytest

from handoffd.board import cards
from handoffd.core.config import Role, load_roles
from handoffd.core.lifecycle import DaemonState
from handoffd.queue import reports
from handoffd.queue.scan import Entry, State
from handoffd.snapshot.snapshot import Snapshot, take_snapshot
from tests.conftest import Project

NOW = 1_800_000_000.0
ROLES = {name: Role(name, name, f"/nowhere/{name}", agent="claude") for name in ("A", "B", "C")}


class Beat:
    """A heartbeat as `handoffd.queue.heartbeat.read` returns it."""

    def __init__(self, agent: str, conversation: str, at: float) -> None:
        self.agent, self.conversation, self.at = agent, conversation, at


def name(n: int, sender: str = "A", to: str = "B") -> str:
    return f"50_20260101T000000Z_{n:06d}_from_{sender}_to_{to}.handoff"


def ident(n: int, sender: str = "A") -> str:
    return f"20260101T000000Z_{n:06d}_from_{sender}"


def entry(
    n: int, state: str = State.NEW, role: str = "B", sender: str = "A", **headers: str
) -> Entry:
    fields = {"id": ident(n, sender), "from": sender, "to": role, "priority": "50",
              "type": "note", "enqueued_at": "2027-01-15T07:58:20Z", **headers}  # fmt: skip
    path = f"/nowhere/{role}/{state}/{name(n, sender, role)}"
    return Entry(role, state, path, headers=fields, mtime=NOW - 30)


def snapshot(*entries: Entry, beats: dict[str, Beat] | None = None) -> Snapshot:
    snap = Snapshot("/nowhere", ROLES, NOW)
    snap.open = list(entries)
    snap.heartbeats = dict(beats or {})
    snap.daemon = DaemonState(4242, True, NOW - 7380)
    return snap


def colours(board: cards.Board) -> dict[str, str]:
    return {card.card: card.colour for card in board.cards}


def test_a_chain_inherits_red_from_its_far_end_and_yellow_from_a_claim_in_it() -> None:
    root = entry(1, blocked_reason="needs a decision")
    middle = entry(2, depends_on=ident(1))
    top = entry(3, depends_on=ident(2))
    board = cards.project(snapshot(root, middle, top), NOW)
    assert set(colours(board).values()) == {"red"}
    assert board.by_card[f"{ident(3)}@B"].detail.startswith(f"inherits from {ident(1)}@B")
    claimed = entry(2, State.IN_PROCESS, role="C", depends_on=ident(1))
    board = cards.project(snapshot(root, claimed, top, beats={"C": Beat("codex", "", NOW)}), NOW)
    assert board.by_card[f"{ident(3)}@B"].colour == "yellow"


def test_a_hand_made_cycle_is_reported_and_coloured_without_looping() -> None:
    a = entry(1, depends_on=ident(2))
    b = entry(2, depends_on=ident(1), blocked_reason="stuck")
    board = cards.project(snapshot(a, b), NOW)
    assert board.cycles == [f"DEPENDENCY_CYCLE: {ident(1)} -> {ident(2)} -> {ident(1)}"]
    assert colours(board) == {f"{ident(1)}@B": "red", f"{ident(2)}@B": "red"}


def test_a_self_dependency_is_a_cycle_and_not_its_own_closure() -> None:
    board = cards.project(snapshot(entry(1, depends_on=ident(1))), NOW)
    assert board.cycles == [f"DEPENDENCY_CYCLE: {ident(1)} -> {ident(1)}"]
    assert board.cards[0].closure == [] and board.cards[0].colour == "orange"


def test_cycles_are_found_once_each() -> None:
    graph = {"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"], "e": ["f"], "f": ["e"]}
    assert cards.find_cycles(graph) == [
        "DEPENDENCY_CYCLE: a -> b -> c -> a",
        "DEPENDENCY_CYCLE: e -> f -> e",
    ]


def test_every_copy_of_a_dependency_is_in_the_closure() -> None:
    to_b, to_c = entry(1, role="B"), entry(1, State.IN_PROCESS, role="C")
    dependent = entry(2, role="A", sender="C", depends_on=ident(1))
    board = cards.project(snapshot(to_b, to_c, dependent), NOW)
    closure = board.by_card[f"{ident(2, 'C')}@A"].closure
    assert sorted(card.card for card in closure) == [f"{ident(1)}@B", f"{ident(1)}@C"]


def test_an_original_is_a_card_only_while_no_recipient_has_a_copy() -> None:
    original = entry(1, State.OUTBOX, role="A")
    assert [c.card for c in cards.project(snapshot(original), NOW).cards] == [f"{ident(1)}@A"]
    copy = entry(1, role="B")
    assert [c.card for c in cards.project(snapshot(original, copy), NOW).cards] == [f"{ident(1)}@B"]


def test_a_claim_is_live_inside_the_window_only() -> None:
    taken = entry(1, State.IN_PROCESS)
    beat = {"B": Beat("claude", "conv-7", NOW - 600)}
    live = cards.project(snapshot(taken, beats=beat), NOW, window_s=601).cards[0]
    gone = cards.project(snapshot(taken, beats=beat), NOW, window_s=600).cards[0]
    assert (live.colour, gone.colour) == ("yellow", "orange")
    assert gone.to_json()["claim"] == {
        "role": "B",
        "agent": "claude",
        "conversation": "conv-7",
        "heartbeat_at": "2027-01-15T07:50:00.000000Z",
        "live": False,
    }


def test_a_card_not_in_process_has_no_claim_even_with_a_heartbeat() -> None:
    board = cards.project(snapshot(entry(1), beats={"B": Beat("claude", "", NOW)}), NOW)
    assert board.cards[0].claim is None and board.cards[0].colour == "orange"


def test_json_has_exactly_the_fields_of_the_contract() -> None:
    card = cards.project(snapshot(entry(1, task="t-1", depends_on=ident(9))), NOW).cards[0]
    data = card.to_json()
    assert list(data) == [
        "card", "id", "role", "state", "color", "detail", "from", "to", "priority", "type",
        "task", "blocked_reason", "claim", "depends_on", "latest_report", "age_s", "path",
        "wakes", "tokens",
    ]  # fmt: skip
    assert data["wakes"] == {"sent": 0, "failed": 0, "last_at": None, "submitted": None,
                             "via": None, "box_holds_text": False}  # fmt: skip
    assert (data["state"], data["to"], data["priority"], data["depends_on"]) == (
        "new", ["B"], "50", [ident(9)],
    )  # fmt: skip
    assert (data["claim"], data["latest_report"], data["age_s"]) == (None, None, 100)


def test_the_board_orders_red_yellow_orange_and_counts_each() -> None:
    board = cards.project(
        snapshot(
            entry(1),
            entry(2, State.IN_PROCESS, role="C"),
            entry(3, blocked_reason="x"),
            beats={"C": Beat("codex", "", NOW)},
        ),
        NOW,
    )
    assert [card.colour for card in board.cards] == ["red", "yellow", "orange"]
    assert board.counts() == {"red": 1, "yellow": 1, "orange": 1, "green": 0}


def test_a_released_card_waits_since_its_release() -> None:
    released = entry(1, released_at="2027-01-15T07:59:50Z")  # 10 s before NOW
    assert cards.project(snapshot(released), NOW).cards[0].age_s == 10


def test_wake_ups_since_a_card_arrived_are_counted() -> None:
    snap = snapshot(entry(1))  # enqueued 100 s before NOW
    snap.wakes = {"B": [NOW - 200, NOW - 90, NOW - 10], "C": [NOW - 5]}
    assert cards.project(snap, NOW).cards[0].detail == "waiting 1m, 2 wake-ups"


def test_failed_wake_ups_since_a_card_arrived_are_counted_apart() -> None:
    snap = snapshot(entry(1))  # enqueued 100 s before NOW
    snap.wakes = {"B": [NOW - 50]}
    snap.wake_failures = {"B": [NOW - 200, NOW - 40, NOW - 20]}
    detail = cards.project(snap, NOW).cards[0].detail
    assert detail == "waiting 1m, 1 wake-up, 2 failed (see the daemon's log)"


def test_a_waiting_cards_wakes_say_how_many_and_whether_the_last_was_submitted() -> None:
    snap = snapshot(entry(1))  # enqueued 100 s before NOW
    snap.wakes = {"B": [NOW - 200, NOW - 90, NOW - 10]}
    snap.wake_submitted = {"B": [True, True, False]}
    snap.wake_failures = {"B": [NOW - 20]}
    assert cards.project(snap, NOW).cards[0].to_json()["wakes"] == {
        "sent": 2, "failed": 1, "last_at": "2027-01-15T07:59:50.000000Z", "submitted": False,
        "via": "typed",  # a log line without `via` was typed (docs/protocol.md §16)
        "box_holds_text": False,  # its role's box holds no person's text (§17)
    }  # fmt: skip


def test_a_waiting_card_says_when_its_roles_box_holds_a_persons_text() -> None:
    """docs/protocol.md §17: its wake-up waits behind that text; the daemon's pane file says."""
    snap = snapshot(entry(1))
    snap.panes = {"B": {"pane": "busy", "held": True}}
    assert cards.project(snap, NOW).cards[0].to_json()["wakes"]["box_holds_text"] is True


def test_a_role_that_ignores_three_wake_ups_turns_its_waiting_card_red_until_it_takes_work() -> (
    None
):
    snap = snapshot(entry(1))  # enqueued 100 s before NOW
    snap.wakes = {"B": [NOW - 90, NOW - 60, NOW - 30]}
    board = cards.project(snap, NOW)
    assert (board.cards[0].colour, board.cards[0].detail) == (
        "red", "not taken after 3 wake-ups over 1m",
    )  # fmt: skip
    snap.took_at = {"B": NOW - 20}  # took something after the last wake-up
    assert cards.project(snap, NOW).cards[0].colour == "orange"


def test_a_card_waiting_on_a_dependency_says_on_what_and_never_stalls_for_its_wake_ups() -> None:
    # B waits on A, still in C's new/: not ready (§13), so its wake-ups are not the agent's fault
    snap = snapshot(entry(1, role="C"), entry(2, depends_on=ident(1)))
    snap.wakes = {"B": [NOW - 90, NOW - 60, NOW - 30]}
    card = cards.project(snap, NOW).by_card[f"{ident(2)}@B"]
    assert (card.colour, card.detail) == ("orange", f"waiting 1m on {ident(1)}@C, 3 wake-ups")
    assert card.waiting_on == [f"{ident(1)}@C"]


def test_ready_mail_beside_a_waiting_card_still_stalls() -> None:
    snap = snapshot(entry(1, role="C"), entry(2, depends_on=ident(1)), entry(3))
    snap.wakes = {"B": [NOW - 90, NOW - 60, NOW - 30]}
    board = cards.project(snap, NOW)
    assert board.by_card[f"{ident(3)}@B"].colour == "red"
    assert board.by_card[f"{ident(2)}@B"].colour == "orange"


def test_once_its_dependency_is_done_only_later_wake_ups_count_toward_a_stall() -> None:
    done = entry(1, State.COMPLETED, role="C", completed_at="2027-01-15T07:59:05Z")  # NOW - 55
    snap = snapshot(entry(2, depends_on=ident(1)))
    snap.dependencies = {ident(1): [done]}
    snap.wakes = {"B": [NOW - 90, NOW - 60, NOW - 30]}  # one of three after it was done
    card = cards.project(snap, NOW).cards[0]
    assert (card.colour, card.waiting_on) == ("orange", [])
    snap.wakes["B"] += [NOW - 20, NOW - 10]
    assert cards.project(snap, NOW).cards[0].detail == "not taken after 3 wake-ups over 20s"


def test_the_stall_threshold_is_the_one_the_daemon_logged_when_it_started() -> None:
    snap = snapshot(entry(1))
    snap.wakes = {"B": [NOW - 90, NOW - 60, NOW - 30]}
    snap.daemon_options = {"event": "started", "stall_wakes": 4}
    assert cards.project(snap, NOW).cards[0].colour == "orange"
    snap.daemon_options = {"event": "started", "stall_wakes": "2"}  # not a count: the default
    assert cards.project(snap, NOW).cards[0].colour == "red"


def test_a_waiting_card_whose_roles_session_is_gone_is_red_at_once() -> None:
    snap = snapshot(entry(1))
    snap.panes = {"B": {"pane": "gone", "session": "B"}}
    board = cards.project(snap, NOW)
    session = snap.roles["B"].session
    assert (board.cards[0].colour, board.cards[0].detail) == (
        "red",
        f"B's session {session} is gone",
    )
    snap.panes = {"B": {"pane": "unknown", "session": "B"}}  # no tmux server at all: not red
    assert cards.project(snap, NOW).cards[0].colour == "orange"


# --- every card has a name of its own (docs/protocol.md §8) ------------------------------


def test_a_refused_original_is_a_card_even_when_a_copy_has_its_id() -> None:
    """A failed original never had copies (no partial fan-out): a copy with its id is
    another handoff's, and the refusal must not be hidden behind it (an invisible red).
    An `id` header the file's name does not spell is shown, never its card's name
    (docs/protocol.md §15, "Names"): the refusal is the card of the id its name spells."""
    copy = entry(1, role="B")
    refused = entry(2, State.FAILED, role="A", id=ident(1))  # a hand-made id: the copy's
    board = cards.project(snapshot(copy, refused), NOW)
    assert colours(board) == {f"{ident(1)}@B": "orange", f"{ident(2)}@A": "red"}


def test_a_colliding_id_gives_way_to_the_files_own_name_id_then_its_name() -> None:
    first = entry(1, State.FAILED, role="A")
    same_id = entry(2, State.FAILED, role="A", id=ident(1))  # its file name says 2
    archived = Entry("A", State.FAILED, f"/nowhere/A/failed/{name(1, 'A', 'A')}".replace(
        ".handoff", ".2.handoff"), headers={"id": ident(1)}, mtime=NOW)  # fmt: skip
    board = cards.project(snapshot(first, same_id, archived), NOW)
    assert sorted(board.by_card) == sorted([f"{ident(1)}@A", f"{ident(2)}@A", f"{archived.name}@A"])
    assert len(board.cards) == 3


def test_an_id_no_link_could_hold_is_replaced_by_the_name_id_or_the_escaped_name() -> None:
    crlf = entry(1, id=ident(1) + "\r")  # a CRLF file: every header value ends in CR
    slashed = entry(2, id="../../etc")
    by_hand = Entry("B", State.NEW, "/nowhere/B/new/by-hand\r.handoff", headers={}, mtime=NOW)
    board = cards.project(snapshot(crlf, slashed, by_hand), NOW)
    assert sorted(board.by_card) == sorted(
        [f"{ident(1)}@B", f"{ident(2)}@B", "by-hand\\r.handoff@B"]
    )


def test_a_name_taken_whichever_way_still_gets_a_name() -> None:
    """Two files of one role, one original and one copy, with one file name and one id."""
    original = entry(1, State.FAILED, role="B", sender="B")
    copy = entry(1, role="B", sender="B")
    board = cards.project(snapshot(copy, original), NOW)
    assert sorted(board.by_card) == sorted([f"{ident(1, 'B')}@B", f"{copy.name}@B"]), (
        "the copy keeps the id; the refusal takes its file name"
    )


def test_the_projection_reads_no_file(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    """`project` is pure (docs/protocol.md §8: no call per card): a latest report, a failed
    original's reason, a dependency already done and the green cards of `--all` all come
    from the scan.  With every way of reading a file taken away, the board is the same."""
    done = "50_20260101T000000Z_000001_from_coder_to_QA.handoff"
    project.put("QA", done, box="inbox/completed", id=ident(1, "coder"), to="QA",
                completed_at="2026-01-01T00:00:00Z")  # fmt: skip
    waiting = name(2, "coder", "QA")
    project.put("QA", waiting, id=ident(2, "coder"), to="QA", depends_on=ident(1, "coder"))
    failed = project.put("coder", name(3, "coder", "QA"), box="failed", id=ident(3, "coder"))
    (failed.parent / (failed.name + ".error")).write_text("missing required header(s): to\n")
    reports.store(str(project.handoffs("QA")), ident(2, "coder"), "RUNNING", "QA", "claude",
                  "", "Working on it.\n", NOW - 60)  # fmt: skip
    snap = take_snapshot(str(project.root), history=True)
    before = [card.to_json() for card in cards.project(snap, NOW, include_green=True).cards]

    def no_reading(*args: object, **kwargs: object) -> object:
        raise AssertionError(f"the projection read a file: {args}")

    for function in ("open", "stat", "lstat", "scandir", "listdir"):
        monkeypatch.setattr(os, function, no_reading)
    monkeypatch.setattr(builtins, "open", no_reading)
    board = cards.project(snap, NOW, include_green=True)
    monkeypatch.undo()
    assert [card.to_json() for card in board.cards] == before
    shown = {card.id: card for card in board.cards}
    assert cards.excerpt(shown[ident(2, "coder")].latest_report) == "Working on it."
    assert shown[ident(3, "coder")].detail == "failed: missing required header(s): to"
    assert [c.state for c in shown[ident(2, "coder")].closure] == [State.COMPLETED]


def test_green_cards_need_the_history_read_first() -> None:
    with pytest.raises(ValueError, match="load_history"):
        cards.project(snapshot(entry(1)), NOW, include_green=True)


def test_a_copy_found_from_its_role_alone_has_the_name_the_whole_board_gives_it(
    project: Project,
) -> None:
    """`find_card` over `take_role` (what `answer` reads) names each open copy of the
    role as the board of the whole project does: a §2 name, a hand-made one with an `id`
    header, two hand-made ones claiming one id (the second goes by its file name), and an
    original of the same id in the role's own outbox, named after every copy."""
    from handoffd.snapshot.snapshot import take_role

    project.put("coder", name(1, "QA", "coder"), id=ident(1, "QA"))
    project.put("coder", "10_manual.handoff", id="manual-1")
    project.put("coder", "20_twin.handoff", id="dup")
    project.put("coder", "30_twin.handoff", box="inbox/in_process", id="dup")
    project.put("coder", name(1, "QA", "coder"), box="outbox", id=ident(1, "QA"))
    project.put("QA", name(2, "coder", "QA"), id=ident(2, "coder"))
    board = cards.project(take_snapshot(str(project.root)), NOW)
    copies = [c for c in board.cards if c.role == "coder" and c.state != State.OUTBOX]
    alone = take_role(str(project.root), load_roles(str(project.root))["coder"])
    found = {c.card: getattr(cards.find_card(alone, c.card), "path", None) for c in copies}
    assert found == {c.card: c.entry.path for c in copies} and len(copies) == 4
    assert cards.find_card(alone, f"{ident(2, 'coder')}@QA") is None


def test_one_card_its_file_and_its_reports_are_read_from_its_role_alone(
    project: Project,
) -> None:
    """`take_role`, `find_card`, then the card's body and reports: nothing of another role,
    of the daemon or of the log is opened or listed on the way."""
    from handoffd.queue import reports
    from handoffd.snapshot.snapshot import take_role
    from tests.conftest import touched

    project.put("coder", name(1, "QA", "coder"), id=ident(1, "QA"), body="Parse it.\n")
    project.put("QA", name(2, "coder", "QA"), id=ident(2, "coder"))
    coder = load_roles(str(project.root))["coder"]
    reports.store(coder.handoffs, ident(1, "QA"), "RUNNING", "coder", "claude", "", "Half.", NOW)
    with touched() as seen:
        alone = take_role(str(project.root), coder)
        card = cards.find_card(alone, f"{ident(1, 'QA')}@coder")
        assert card is not None
        headers, body = alone.file(card.path)
        said = [found.text for _, found in alone.report_files(card.role, card.id) if found]
    assert (dict(headers)["id"], body, said) == (ident(1, "QA"), "Parse it.\n", ["Half."])
    assert alone.reports("QA", ident(2, "coder")) == []  # a role it does not hold: none
    project_paths = [path for _, path in seen if path.startswith(str(project.root))]
    assert project_paths and all(p.startswith(coder.handoffs) for p in project_paths), seen
