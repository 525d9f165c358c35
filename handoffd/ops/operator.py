"""What an operator does about what the board shows (docs/protocol.md §13): `answer` an
agent, `retry` or `dismiss` a refused original, `reopen` a completed copy.

Each names a card as the board does (`<id>@<role>`), finds it through one scan, then
changes it under its role's inbox lock, where the module that owns the folder makes the
move (`handoffd.queue.inbox` the copies, `handoffd.queue.failed` the refused and dismissed
originals); a token is printed once that change is on disk.  The role is woken
afterwards, lossily: a wake-up that fails is a line on stderr, never a failed command.
"""

from __future__ import annotations

import os
import time

from handoffd.continuity import live
from handoffd.core import config, safeio
from handoffd.core import handoff as hf
from handoffd.core.config import Role
from handoffd.core.outcome import Exit, Refusal, Result
from handoffd.ops.context import Context
from handoffd.ops.table import ANSWER_LIMIT, ANSWER_TOO_LARGE
from handoffd.queue import reports
from handoffd.queue.inbox import Inbox
from handoffd.queue.items import BLOCKED
from handoffd.queue.scan import State

TYPE_CHECKING = False
if TYPE_CHECKING:
    from handoffd.board.cards import Card

OPEN = (State.NEW, State.IN_PROCESS)


# --- finding the card ---------------------------------------------------------------------


def find(context: Context, card: str, history: bool = False) -> Card | None:
    """The card the board names `card` (None: unknown or malformed): an open one, or with
    `history` any card `status --all` shows, green ones too (a file both open and in
    history is then the history's: it moved on while the scan read)."""
    from handoffd.board import cards
    from handoffd.snapshot.snapshot import take_snapshot as scan

    snapshot = scan(context.root, context.roles, history=history)
    return cards.project(snapshot, snapshot.taken_at, include_green=history).by_card.get(card)


def find_copy(context: Context, card: str) -> Card | None:
    """The open copy the board names `card` (None: unknown, malformed, or no open copy),
    read from the named role's open folders alone: `answer` acts on a copy, and no other
    role's file can change a copy's name (`cards.find_card`)."""
    from handoffd.board import cards
    from handoffd.snapshot.snapshot import take_role

    role = _card_role(context, card)
    return None if role is None else cards.find_card(take_role(context.root, role), card)


def unknown(card: str, context: Context | None = None) -> Refusal:
    """`UNKNOWN_CARD: <card>`; given the `context`, a second line says what the card is
    when the board shows one that is no agent's open copy (done, put aside, refused or not
    delivered yet): the token is the contract's, the line what a person needs next."""
    said = f"UNKNOWN_CARD: {_shown(card)}" + (_role_line(context, card) if context else "")
    found = find(context, card, history=True) if context is not None else None
    if found is not None and found.state == State.COMPLETED:
        said += (f"\n{_shown(card)} is completed (a green card), not open: nothing to act on; "
                 "`handoffd reopen` puts it back in its role's new/")  # fmt: skip
    elif found is not None and found.state == State.DISMISSED:
        said += f"\n{_shown(card)} is a dismissed original (a green card), not open"
    elif found is not None and found.state == State.FAILED:
        said += (f"\n{_shown(card)} is a refused original in its sender's failed/, no "
                 "agent's copy: `handoffd retry` or `handoffd dismiss` it")  # fmt: skip
    elif found is not None and found.state == State.OUTBOX:
        said += f"\n{_shown(card)} is an original not delivered yet, no agent's copy"
    return Refusal(Exit.REFUSED, said)


def _role_line(context: Context, card: str) -> str:
    """A second line when the card's `@<role>` is no role of the project: what the roles
    are, and the one it most likely meant (the first line stays the contract's token)."""
    from handoffd.ops.context import unknown_card_role

    stray = unknown_card_role(card, context.roles)
    return "" if stray is None else f"\n{config.UnknownRole(stray, context.roles)}"


def _shown(card: str) -> str:
    """A card as the person typed it, on one line: a control character shown escaped."""
    from handoffd.core.terminal import escape

    return escape(card)


def operator_name(by: str | None) -> str:
    """Who acts: `--by`, else `$USER`, else `operator`; refused unless one plain line."""
    name = (by if by is not None else os.environ.get("USER") or "operator").strip()
    from handoffd.core.terminal import has_control

    if not name or len(name) > 200 or "\n" in name or has_control(name):
        raise Refusal(Exit.REFUSED, "INVALID_ARGUMENTS: --by is a name: one line of 1 to 200 "
                      "characters, without control characters")  # fmt: skip
    return name


# --- answer -------------------------------------------------------------------------------


def answer(
    context: Context,
    card: str,
    text: str = "",
    said: str | None = None,
    by: str | None = None,
    now: float | None = None,
) -> Result:
    """`handoffd answer CARD [TEXT | --file F|-]`: store the answer as an ANSWER report on
    the card's role, lift its block, then wake the role."""
    if said is not None and text:
        raise Refusal(Exit.REFUSED, "INVALID_ANSWER: give the answer as TEXT or with --file, "
                      "not both")  # fmt: skip
    text = said if said is not None else text
    _check_answer(text)
    who = operator_name(by)
    role = _card_role(context, card)
    if role is None:
        raise unknown(card, context)
    at = time.time() if now is None else now
    found, out, note = _answer(context, role, card, text, who, at)
    if found is None:
        raise unknown(card, context)
    return Result(Exit.OK, out, note + wake_role(context.root, role, answered(found)))


def _card_role(context: Context, card: str) -> Role | None:
    """The role a card's `@<role>` names (`<name>@<role>`, or `<name>@<role>~<n>` when
    names collide: `naming.candidates`); None for none of the project's."""
    return context.roles.get(card.rpartition("@")[2].partition("~")[0])


def answered(found: Card) -> str:
    """The line that wakes the role: the card's task (or id) shown safely, since a task
    header is untrusted and the line is typed into a pane (`wake.label`)."""
    from handoffd.wakeups import wake

    return wake.ANSWERED.format(wake.label(found.headers.get(hf.TASK) or found.id))


def _check_answer(text: str) -> None:
    size = len(text.encode("utf-8"))  # UTF-8 already (`spec.not_text`), as it is stored
    if not text.strip():
        raise Refusal(Exit.REFUSED, "INVALID_ANSWER: the answer is empty; give its text")
    if size > ANSWER_LIMIT:
        raise Refusal(Exit.REFUSED, ANSWER_TOO_LARGE.format(limit=ANSWER_LIMIT))


def _answer(
    context: Context, role: Role, card: str, text: str, who: str, now: float
) -> tuple[Card | None, str, str]:
    """Under the role's lock, from one listing of its copies' folders: the copy `card`
    names (None: no open copy of that name; nothing can move it before the change, so
    the look-up is the check), the answer stored, the block lifted, and the live file
    rewritten (its Open Questions show the question answered) before the lock is let go.
    The card, its lines, and the line that says another answer came first.  A role whose
    lock cannot be had (a linked folder, a busy lock) is looked up without it, as before:
    a card that names no copy is unknown first."""
    from handoffd.board import cards
    from handoffd.queue.lock import Busy, LinkedFolder
    from handoffd.snapshot.snapshot import take_role

    try:
        with Inbox(role.handoffs, role.name) as inbox:
            inbox.listing()  # the one listing of in_process/ (and its batches)
            inbox.waiting()  # and of new/
            found = cards.find_card(take_role(context.root, role, seen=inbox.seen), card)
            if found is None:
                return None, "", ""
            out, note = _store_answer(inbox, role, card, found.entry.name, text, who, now)
            inbox.sync()  # the answer durable before the live file says so
            live.after_step(role, force=True, seen=inbox.seen)
    except (LinkedFolder, Busy):
        if find_copy(context, card) is None:
            return None, "", ""
        raise
    return found, out, note


def _store_answer(
    inbox: Inbox, role: Role, card: str, name: str, text: str, who: str, now: float
) -> tuple[str, str]:
    """The report first (an answer stored and the block still on is a state a second
    `answer` or an `unblock` finishes), then the block lifted.  Its lines, and the stderr
    line that says another answer came first (two operators at once: the lock orders
    them, and the second learns of the first)."""
    paths = inbox.copies_named(name)
    if not paths:
        raise unknown(card)  # a name no helper takes (`inbox.Inbox.waiting`)
    ident, copy = hf.path_id(paths[0]), inbox.handoff(paths[0])
    # one the agent has not met (an answer from before a reopen it has)
    earlier = reports.latest_answer(role.handoffs, ident, copy.get(hf.REOPENED_AT))
    blocked = copy.get(BLOCKED) or ""
    question = blocked or (earlier.question if earlier else "")  # what it answers too
    stored = reports.store(role.handoffs, ident, reports.ANSWER, role.name, who, "", text,
                           now, {"question": question})  # fmt: skip
    inbox.seen.answers.pop(ident, None)  # it holds an answer now, whatever was looked up
    out = f"ANSWERED: {stored}\n"
    if blocked:
        out += "".join(f"UNBLOCKED: {p}\n" for p in inbox.set_header(name, BLOCKED, None))
    return out, _also_answered(card, earlier)


def _also_answered(card: str, earlier: reports.Report | None) -> str:
    """`ALREADY_ANSWERED: …` when an answer the agent has not replied to was there first."""
    from handoffd.core.terminal import escape

    if earlier is None:
        return ""
    return (f"ALREADY_ANSWERED: {_shown(card)}: {escape(earlier.agent)} answered it at "
            f"{escape(earlier.reported_at)} ({earlier.path}); both answers are kept, the "
            "agent is shown the newest, this one\n")  # fmt: skip


# --- waking the role ----------------------------------------------------------------------


def wake_role(root: str, role: Role, text: str) -> str:
    """Wake the role with `text`: through the running daemon, which types it once the
    pane is idle (docs/protocol.md §14), or, with no daemon, typed now the §5 way.  ''
    when it went or was asked for, else the one stderr line that says why not (lossy:
    the command's work is done either way)."""
    from handoffd.core import lifecycle
    from handoffd.wakeups import wake, wakeup

    try:
        if not role.session:
            raise RuntimeError("no tmux session for this role in roles.tsv")
        if lifecycle.daemon_state(root).running:
            wakeup.ask_wake(role.handoffs, text)  # typed at the daemon's next pass
            return ""
        wake.send_keys(wake.read_socket(root), role.session, text)
    except Exception as error:  # a missing server, session or socket file; a hung tmux
        why = " ".join(str(error).split()) or type(error).__name__
        return f"WAKE_FAILED: {role.name}: {why} (the change is made; tell the agent yourself)\n"
    return ""


# --- failed originals: retry, dismiss ------------------------------------------------------


def _failed(context: Context, card: str) -> tuple[Role, str]:
    """The sender and the name in `failed/` of the refused original `card` names."""
    found = find(context, card)
    if found is None or found.state != State.FAILED:
        raise Refusal(Exit.REFUSED, f"NOT_FAILED: {_shown(card)}{_role_line(context, card)}")
    return context.roles[found.role], found.entry.name


def _guarded(role: Role) -> Inbox:
    """The role's lock, refusing folders behind a link: a rename into one would carry the
    original out of the project."""
    from handoffd.core.config import Box
    from handoffd.queue.lock import refuse_linked

    boxes = (Box.OUTBOX, Box.FAILED, Box.DISMISSED)
    refuse_linked(role.handoffs, boxes, "nothing was moved")
    return Inbox(role.handoffs, role.name)


def retry(context: Context, card: str, force: bool = False) -> Result:
    """`handoffd retry CARD`: a refused original back into its sender's outbox, once the
    daemon's own check (§5) passes on it as it is now (with `force`, whatever it says)."""
    from handoffd.queue import failed

    role, name = _failed(context, card)
    with _guarded(role):
        if not force:  # before anything moves: a refusal leaves every file where it was
            _check_again(context, role, name, card)
        try:
            path = failed.retry(role, name)
        except FileNotFoundError:
            raise Refusal(Exit.REFUSED, f"NOT_FAILED: {_shown(card)}") from None
        except FileExistsError:
            raise Refusal(Exit.REFUSED, f"RETRY_CONFLICT: {_shown(card)}: a file of that "
                          "name is in the outbox already") from None  # fmt: skip
    from handoffd.ops.queue import no_daemon_warning

    return Result(Exit.OK, f"RETRIED: {path}\n", no_daemon_warning(context.root))


def _check_again(context: Context, role: Role, name: str, card: str) -> None:
    """Refuse `STILL_INVALID: <reason>` when the daemon would refuse the original again:
    its bytes as they are in `failed/` now, against roles.tsv as it is now.  A second line
    says what to do (the token's line is the contract's)."""
    from handoffd.core import config
    from handoffd.core.terminal import escape
    from handoffd.queue import checks

    try:
        data = checks.read_entry(os.path.join(role.path(config.Box.FAILED), name))
        checks.inspect(data, name, role.name, set(context.roles))
    except checks.Refused as refusal:
        said = f"STILL_INVALID: {escape(str(refusal))}"
        how = f"Fix what it says, or move it anyway: handoffd retry --force {_shown(card)}"
        raise Refusal(Exit.REFUSED, f"{said}\n{how}") from None
    except FileNotFoundError:
        return  # gone since the scan: the move says NOT_FAILED


def dismiss(
    context: Context, card: str, reason: str | None = None, by: str | None = None
) -> Result:
    """`handoffd dismiss CARD`: put a refused original aside, a green card."""
    from handoffd.ops.claims import reason_problem
    from handoffd.queue import failed

    why = (reason or "dismissed").strip()
    problem = reason_problem(why)
    if problem:
        raise Refusal(Exit.REFUSED, problem.replace("a blocked reason", "a reason"))
    who = operator_name(by)
    role, name = _failed(context, card)
    with _guarded(role):
        try:
            path = failed.dismiss(role, name, failed.note(who, why))
        except FileNotFoundError:
            raise Refusal(Exit.REFUSED, f"NOT_FAILED: {_shown(card)}") from None
    return Result(Exit.OK, f"DISMISSED: {path}\n")


# --- completed copies: reopen -----------------------------------------------------------------


def reopen(context: Context, card: str, reason: str | None = None, by: str | None = None) -> Result:
    """`handoffd reopen CARD`: a completed copy back into its role's `new/`, woken, with
    who reopened it and why for its next TASK block.  The card is found as the board
    names it (`find`), so one whose `id` its file name does not spell is reopened too."""
    from handoffd.ops.claims import reason_problem
    from handoffd.wakeups import wake

    if reason is not None and (problem := reason_problem(reason)):
        raise Refusal(Exit.REFUSED, problem.replace("a blocked reason", "a reason"))
    who = operator_name(by)
    found = find(context, card, history=True)
    if found is None or found.state != State.COMPLETED:
        raise Refusal(Exit.REFUSED, f"NOT_COMPLETED: {_shown(card)}{_role_line(context, card)}")
    role = context.roles[found.role]
    with Inbox(role.handoffs, role.name) as inbox:
        if not safeio.is_regular(found.path):  # reopened or removed since the scan
            raise Refusal(Exit.REFUSED, f"NOT_COMPLETED: {_shown(card)}")
        if inbox.held(found.entry.name):
            raise Refusal(Exit.REFUSED, f"REOPEN_CONFLICT: {_shown(card)}")
        target = inbox.reopen(found.path, reason.strip() if reason else None, by=who)
    live.after_step(role)
    return Result(Exit.OK, f"REOPENED: {target}\n", wake_role(context.root, role, wake.TEXT))
