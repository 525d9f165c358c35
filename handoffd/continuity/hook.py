"""Rewriting a role's live file after each step that changes its state (docs/protocol.md §10).

Called by the helpers after every step, so it imports only the live file and the
queue reader.  It never fails the step it follows: the step's work is done and
durable; a live file that could not be written is only a missed note.
"""

from __future__ import annotations

import fcntl
import os

from handoffd import handoff as hf
from handoffd.config import Role
from handoffd.continuity import live, work

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: helpers import this module
if TYPE_CHECKING:
    from collections.abc import Callable

    Edit = Callable[[dict[str, list[str]]], None]

WAITING = "waiting for "


def after_step(
    role: Role, sent_to: str = "", now: float | None = None, force: bool = False
) -> None:
    """Rewrite `role`'s live file from its queue; `sent_to` names the recipients of a
    handoff it just queued; `force` when the step changed state the queue folders' times
    do not show (a queued handoff, a stored report).  Errors are swallowed (see the
    module docstring)."""
    try:
        refresh(role, sent_to, now, force=force)
    except (OSError, ValueError):
        pass


def refresh(
    role: Role,
    sent_to: str = "",
    now: float | None = None,
    edit: Edit | None = None,
    force: bool = False,
) -> str:
    """Rewrite `role`'s live file from its queue; the text written ("" if nothing needed
    writing).  Under a lock on the
    role's handoff directory: two helpers of one role finishing at once write one after the
    other, each from the queue as it stands then, so a stale view never lands last.  (Not
    the live file's own folder: the main checkout's `.swarmforge/` is the project's, which
    the daemon keeps locked for as long as it runs.)"""
    os.makedirs(role.handoffs, exist_ok=True)
    fd = os.open(role.handoffs, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return _rewrite(role, sent_to, now, edit, force)
    finally:
        os.close(fd)  # releases the lock


def _rewrite(
    role: Role, sent_to: str, now: float | None, edit: Edit | None, force: bool = False
) -> str:
    previous = live.read(role.worktree)
    if edit is not None and previous is not None:
        # the agent's note: its sections change, handoffd's lines stay as they were
        edit(previous.sections)
        return live.write(role.worktree, live.restate(previous), previous)
    if edit is not None:
        previous = live.Parsed("", "", "", {})
        edit(previous.sections)
    carried = ""
    if previous and previous.phase.startswith(WAITING):
        carried = previous.phase[len(WAITING) :]  # still waiting until something arrives
    summary = work.describe(work.look(role, sent_to or carried))
    state = live.State(
        hf.iso_now(now),
        live.branch(role.worktree),
        summary.phase,
        summary.next_step,
        summary.in_flight,
        summary.open_questions,
    )
    # every command that changes the role's state rewrites the file (docs/protocol.md §10)
    if previous is not None and edit is None and not force and _unchanged(role, state, previous):
        return ""  # nothing happened that the file does not already say, as fresh as ever
    return live.write(role.worktree, state, previous)


def _unchanged(role: Role, state: live.State, previous: live.Parsed) -> bool:
    """Whether rewriting would change only the header time, and the file as it stands is
    still fresh for `resume` (no queue event since it was written).  Skipping that rewrite
    spares a call that changed nothing (`NO_TASK`) the fsync, most of its cost."""
    if previous.written < work.newest_event(role):
        return False
    stamp, state.time = state.time, previous.time
    same = live.render(state, previous.sections) == live.render(
        live.restate(previous), previous.sections
    )
    state.time = stamp
    return same
