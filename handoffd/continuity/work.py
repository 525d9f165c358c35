"""What a role is doing, from its queue: the facts the live file and `resume` state.

`look` reads the role's `in_process/` and counts `new/` through the one queue scan (a
few header blocks: helpers call it after every step); `describe` turns that into the
phase, the next step, the cards in flight and the open questions (docs/protocol.md §10),
as a pure function of the scan's entries.  Two empty folders (an idle agent's `NO_TASK`,
the call it makes most) need no scan, and its module is not imported for them.
"""

from __future__ import annotations

import os

from handoffd.core import handoff as hf
from handoffd.core.config import Box, Role

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: helpers import this module
if TYPE_CHECKING:
    from handoffd.queue import scan
    from handoffd.queue.items import Seen
    from handoffd.queue.reports import Report


class Work:
    """A role's queue at a glance: its copies in process, how many wait, who it waits for."""

    __slots__ = ("answers", "batch", "in_process", "mode", "waiting", "waiting_for")

    def __init__(
        self,
        in_process: list[scan.Entry],
        waiting: int,
        mode: str = "task",
        batch: bool = False,
        waiting_for: str = "",
        answers: dict[str, Report] | None = None,
    ) -> None:
        self.in_process = in_process
        # card -> an operator's answer not yet followed by a report of the role's own
        # (docs/protocol.md §13)
        self.answers = answers or {}
        self.waiting = waiting
        self.mode = mode
        self.batch = batch
        self.waiting_for = waiting_for


class Summary:
    """handoffd's lines about the work: phase, next step, cards in flight, open questions."""

    __slots__ = ("in_flight", "next_step", "open_questions", "phase")

    def __init__(
        self, phase: str, next_step: str, in_flight: list[str], open_questions: list[str]
    ) -> None:
        self.phase = phase
        self.next_step = next_step
        self.in_flight = in_flight
        self.open_questions = open_questions


# --- pure ---------------------------------------------------------------------------------


def in_flight(entry: scan.Entry) -> str:
    """A copy in process in a line: `<card>, <what it is about>, taken <when>`."""
    taken = entry.headers.get(hf.DEQUEUED_AT)
    sender = entry.headers.get(hf.SENDER) or ""
    given = hf.sender_shown(sender, entry.headers)  # the person who gave it (§18)
    return (
        f"{entry.card}, {hf.label(entry.headers)}"
        + (f", from {given}" if given != sender else "")
        + (f", taken {hf.short_time(taken)}" if taken else "")
    )


def describe(work: Work) -> Summary:
    """The phase and the one next action that follow from the role's queue."""
    copies = work.in_process
    questions = [
        f"{hf.label(c.headers)}: {c.headers[hf.BLOCKED_REASON]}"
        for c in copies
        if c.headers.get(hf.BLOCKED_REASON)
    ]
    flight = [in_flight(c) for c in copies]
    more = f" ({work.waiting} more waiting)" if work.waiting else ""
    answered = [
        f"{work.answers[c.card].question or hf.label(c.headers)} → answered: "
        f"{work.answers[c.card].first_line}"
        for c in copies
        if c.card in work.answers and not c.headers.get(hf.BLOCKED_REASON)
    ]
    if questions:
        step = "Resolve the blocker under Open Questions, then run `handoffd unblock`."
        return Summary("blocked", step, flight, questions)
    if copies:
        what = hf.label(copies[0].headers) if len(copies) == 1 else f"a batch of {len(copies)}"
        step = f"Finish {what}, then run done_with_current.sh{more}."
        if answered:
            step = f"Read the answer (ready_for_next.sh shows it); then {step[0].lower()}{step[1:]}"
        return Summary(f"working on {what}", step, flight, answered)
    if work.waiting:
        step = f"Run ready_for_next.sh: {work.waiting} handoff(s) waiting in the inbox."
        return Summary("idle", step, [], [])
    if work.waiting_for:
        step = f"Wait for {work.waiting_for}; run ready_for_next.sh when woken."
        return Summary(f"waiting for {work.waiting_for}", step, [], [])
    step = "Nothing in process or waiting: run ready_for_next.sh when woken."
    return Summary("idle", step, [], [])


# --- I/O ----------------------------------------------------------------------------------


def look(role: Role, waiting_for: str = "", seen: Seen | None = None) -> Work:
    """The role's work in process (files, or one batch directory's files) and how much waits
    in `new/`, from one scan of those two folders (headers only), or from what a step
    holding the role's lock `seen` of them (`scan.handed`)."""
    entries = None
    if _nothing_there([role.path(Box.NEW), role.path(Box.IN_PROCESS)], seen):
        return Work([], 0, role.mode, False, waiting_for)  # what the scan would find
    from handoffd.queue import scan

    states = (scan.State.NEW, scan.State.IN_PROCESS)
    if seen is not None:  # the files waiting are counted, not opened
        entries = scan.handed(role, states, seen.folders, seen.read, states[1:])
    if entries is None:
        entries = scan.scan_role(role, states)
    taken = [e for e in entries if e.state == scan.State.IN_PROCESS]
    waiting = sum(1 for e in entries if e.state == scan.State.NEW)
    known = seen.answers if seen is not None else None
    answers = {}
    for entry in taken:
        found = answer_of(role, entry.id, entry.headers.get(hf.REOPENED_AT), known)
        if found:
            answers[entry.card] = found
    return Work(taken, waiting, role.mode, any(e.batch for e in taken), waiting_for, answers)


def _nothing_there(folders: list[str], seen: Seen | None) -> bool:
    """Whether every one of `folders` holds no name: as a step holding the lock listed it
    (`seen`; one it did not list is left to the hand-over, which lists it once), or, with
    no step's record, as listed now."""
    if seen is not None:
        return all(folder in seen.folders and not seen.folders[folder] for folder in folders)
    return all(_empty(folder) for folder in folders)


def _empty(folder: str) -> bool:
    """Whether `folder` holds no name at all, or is none that can be listed (not made yet,
    say): the scan lists nothing there either, and need not run.  A link to a folder that
    holds names is left to the scan, which skips what lies behind it."""
    try:
        return not os.listdir(folder)
    except OSError:
        return True


def answer_of(
    role: Role, ident: str, since: str | None = None, known: dict[str, bool] | None = None
) -> Report | None:
    """The answer on `ident` the role has not yet reported after
    (nor met before its copy was reopened at `since`); the reports' YAML is imported only
    when such an answer's name is there (`known`: as `has_answer` said)."""
    if not has_answer(role.handoffs, ident, known):
        return None
    from handoffd.queue.reports import latest_answer

    return latest_answer(role.handoffs, ident, since)


def has_answer(handoffs: str, ident: str, known: dict[str, bool] | None = None) -> bool:
    """`reports.has_answer`, asked once a step with `known` (a step's `Seen.answers`): only
    an operator's `answer` adds one, under the same lock.  The report module is imported
    only for work in process (an idle agent's `NO_TASK` asks nothing), and only when the
    role has a report folder at all (a role nobody reported to yet has no `H/reports/`)."""
    if known is not None and ident in known:
        return known[ident]
    if os.path.lexists(os.path.join(handoffs, "reports")):  # else no report of any card
        from handoffd.queue import reports

        found = reports.has_answer(handoffs, ident)
    else:
        found = False
    if known is not None:
        known[ident] = found
    return found


def newest_event(role: Role) -> float:
    """The newest mtime of the role's inbox folders and `sent/`: its queue's last event."""
    times = []
    for box in (Box.NEW, Box.IN_PROCESS, Box.COMPLETED, Box.SENT):
        try:
            times.append(os.stat(role.path(box)).st_mtime)
        except OSError:
            continue
    return max(times, default=float("-inf"))
