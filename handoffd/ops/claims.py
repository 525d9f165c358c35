"""The operations on a role's claims (docs/protocol.md §8): `heartbeat`, `release`,
`block`, `unblock` and `report`, each under the role's inbox lock."""

from __future__ import annotations

import os
import time

from handoffd.core import handoff as hf
from handoffd.core.outcome import Exit, Refusal, Result, refused
from handoffd.ops.context import Context
from handoffd.ops.queue import finish_step, take_step
from handoffd.ops.steps import after_step, and_then, locked, own_id
from handoffd.ops.table import REPORT_LIMIT, REPORT_TOO_LARGE
from handoffd.queue import heartbeat as beat
from handoffd.queue.inbox import Inbox
from handoffd.queue.items import BLOCKED, current_batch, current_task, current_work

MAX_REASON = hf.REASON_LIMIT
STATUSES = ("RUNNING", "BLOCKED", "DONE")


def heartbeat(context: Context) -> Result:
    """`handoffd heartbeat`: the role shows life."""
    me = context.me
    beat.renew(me.handoffs, context.agent, context.conversation)
    done = Result(Exit.OK, f"HEARTBEAT: {os.path.join(me.handoffs, beat.NAME)}\n")
    return after_step(context, done, alive=False, changed=False)


def idle(context: Context) -> Result:
    """`handoffd idle`: the role's turn ended; a wake-up may be typed into its pane at once."""
    marked = beat.mark_idle(context.me.handoffs)
    return after_step(context, Result(Exit.OK, f"IDLE: {marked}\n"), alive=True, changed=False)


def release(context: Context, id: str | None = None) -> Result:
    """Put the work in process (or the work holding `id`) back into `new/`."""
    ident = own_id(context, id)

    def step(context: Context, inbox: Inbox) -> Result:
        return Result(Exit.OK, "".join(f"RELEASED: {p}\n" for p in inbox.release(ident)))

    return _hinted(context, ident, locked(context, step, alive=False))


def block(context: Context, reason: str, id: str | None = None) -> Result:
    """Set `blocked_reason` on the role's copy (or on the work in process)."""
    ident = own_id(context, id)
    problem = reason_problem(reason)
    if problem:
        return after_step(context, refused(problem), alive=False, changed=False)

    def step(context: Context, inbox: Inbox) -> Result:
        return Result(Exit.OK, blocked_lines(inbox, ident, reason.strip()))

    return _hinted(context, ident, locked(context, step, alive=False))


def blocked_lines(inbox: Inbox, ident: str | None, reason: str) -> str:
    """Set `reason` on the copy `ident` names, or on the work in process, and say so:
    `BLOCKED: <path>` per file set, and (a batch, no ID) `ALREADY_BLOCKED: <path>` per file
    that keeps the reason it had."""
    paths = inbox.set_header(ident, BLOCKED, reason)
    kept = [] if ident is not None else [p for p in inbox.current().files if p not in paths]
    return "".join(f"BLOCKED: {p}\n" for p in paths) + "".join(
        f"ALREADY_BLOCKED: {p}\n" for p in kept
    )


def unblock(context: Context, id: str | None = None) -> Result:
    """Remove `blocked_reason` from the role's copy (or from the work in process)."""
    ident = own_id(context, id)

    def step(context: Context, inbox: Inbox) -> Result:
        paths = inbox.set_header(ident, BLOCKED, None)
        return Result(Exit.OK, "".join(f"UNBLOCKED: {p}\n" for p in paths))

    return _hinted(context, ident, locked(context, step, alive=False))


def _hinted(context: Context, ident: str | None, result: Result) -> Result:
    """An ID the role does not hold, that names another role's card: the refusal's token
    line stays as §8 gives it, and a second line says which card to give."""
    if ident is None or not result.err.startswith(("UNKNOWN_HANDOFF:", "NOT_IN_PROCESS:")):
        return result
    from handoffd.ops.context import card_hint

    others = {name: role for name, role in context.roles.items() if name != context.me.name}
    hint = card_hint(context.root, others, ident)
    return Result(result.code, result.out, result.err + hint + "\n") if hint else result


def reason_problem(reason: str) -> str | None:
    """Why `reason` cannot be a `blocked_reason` (one line of 1 to 200 characters, without
    control characters: the board and the live file show it), or None."""
    from handoffd.core.terminal import has_control  # only block and report pay for it

    text = reason.strip()
    if "\n" in text or "\r" in text or not 1 <= len(text) <= MAX_REASON:
        return f"INVALID_REASON: a blocked reason is one line of 1 to {MAX_REASON} characters."
    if has_control(text):
        return (
            "INVALID_REASON: a blocked reason must not contain control characters "
            "(a tab, an escape); write it as plain text."
        )
    return None


# --- reports ----------------------------------------------------------------------------


def report(
    context: Context,
    status: str,
    text: str = "",
    reason: str | None = None,
    id: str | None = None,
    now: float | None = None,
) -> Result:
    """`handoffd report`: store the report on the work in process, then act on its status:
    RUNNING takes work first when there is none, BLOCKED sets the reason, DONE finishes.
    A refused report stores nothing."""
    ident = own_id(context, id)
    problem, blocked = _report_checks(status, text, reason)
    if problem:
        return after_step(context, problem, alive=False, changed=False)

    def step(context: Context, inbox: Inbox) -> Result:
        taken = ""
        if status == "RUNNING" and current_work(inbox.listing()) is None:
            taken = take_step(context, inbox).out
        try:
            return act(context, inbox, taken)
        except Refusal as refusal:  # what was taken is shown, even if the report is refused
            return refusal.result("" if taken == "NO_TASK\n" else taken)

    def act(context: Context, inbox: Inbox, taken: str) -> Result:
        files = _reported_files(inbox, ident)
        if status == "DONE":
            _check_finishable(context, inbox)
        stored = _store(context, files, status, text, time.time() if now is None else now)
        done = "".join(f"REPORTED: {path}\n" for path in stored)
        if status == "BLOCKED":
            done += blocked_lines(inbox, ident, blocked)
        if status == "DONE":
            return and_then(done, context, inbox, finish_step)
        return Result(Exit.OK, taken + done)

    return locked(context, step, alive=status != "BLOCKED", force=True)  # a report was stored


def _report_checks(status: str, text: str, reason: str | None) -> tuple[Result | None, str]:
    """A refusal of the report before anything is touched, and the blocked reason."""
    if status not in STATUSES:
        return refused(f"INVALID_STATUS: {status} (RUNNING, BLOCKED or DONE)"), ""
    if len(text.encode("utf-8", "surrogateescape")) > REPORT_LIMIT:
        return refused(REPORT_TOO_LARGE.format(limit=REPORT_LIMIT)), ""
    if status != "BLOCKED":
        return None, ""
    blocked = reason if reason is not None else blockers_line(text)
    if blocked is None:
        return refused("NO_BLOCKED_REASON: give --reason TEXT or a report line starting "
                       "'Blockers:'"), ""  # fmt: skip
    problem = reason_problem(blocked)
    return (refused(problem) if problem else None), blocked.strip()


def blockers_line(text: str) -> str | None:
    """The report's first line starting `Blockers:`, without that word (None if none)."""
    for line in text.split("\n"):
        if line.startswith("Blockers:"):
            return line[len("Blockers:") :].strip()
    return None


def _reported_files(inbox: Inbox, ident: str | None) -> list[str]:
    """The files the report is about: the one `ident` names, else all the work in process."""
    if ident is None:
        return inbox.current().files
    found = inbox.in_process_named(ident)
    if found is None:
        raise Refusal(Exit.REFUSED, f"NOT_IN_PROCESS: {ident}")
    return [found[1]]


def _check_finishable(context: Context, inbox: Inbox) -> None:
    """Refuse DONE, before storing, when done_with_current would refuse to finish."""
    mode = context.me.mode
    if mode not in ("task", "batch"):
        raise Refusal(Exit.REFUSED, f"INVALID_RECEIVE_MODE: {mode}")
    decide = current_task if mode == "task" else current_batch
    if decide(inbox.listing(), finishing=True) is None:
        raise Refusal(Exit.FAILED, "NO_CURRENT_TASK" if mode == "task" else "NO_CURRENT_BATCH")


def _store(context: Context, files: list[str], status: str, text: str, now: float) -> list[str]:
    from handoffd.queue import reports  # front matter and YAML: only when a report is stored

    role, stored = context.me, []
    for path in files:
        who = (role.name, context.agent, context.conversation)
        stored.append(reports.store(role.handoffs, hf.path_id(path), status, *who, text, now))
    return stored
