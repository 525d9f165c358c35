"""Queueing, taking and finishing work (docs/protocol.md §3, §4): the operations the
agents' helpers run, each one inbox or outbox step under the role's lock.

Start-up cost is part of the contract (an agent runs these constantly), so this module
and what it imports at the top use only cheap standard modules (a test pins the list);
the blocks a take prints are imported only when there is work to print (`NO_TASK`, an
agent's most frequent answer, needs none).
"""

from __future__ import annotations

import os
import time

from handoffd.continuity.work import has_answer
from handoffd.core import config
from handoffd.core import handoff as hf
from handoffd.core.outcome import Exit, Refusal, Result, failure
from handoffd.ops.context import Context
from handoffd.ops.steps import after_step, and_then, locked
from handoffd.queue.inbox import Inbox
from handoffd.queue.items import BLOCKED, Item, dependencies, not_ready_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from handoffd.core.config import Role
    from handoffd.core.handoff import Handoff
    from handoffd.ops.readiness import Dependencies
    from handoffd.ops.steps import Step
    from handoffd.queue.draft import Draft

    Enqueue = Callable[[Role, Draft, float], str]  # queue a checked draft: its path

USAGE = """\
Usage: swarm_handoff.sh <draft-file>

Write a draft of header lines only; swarm_handoff.sh adds the rest and queues it.

type: git_handoff
to: <role>[,<role>...]
priority: <00-99>
task: <short-stable-task-name, at most 80 characters>
commit: <10-hex-digit commit abbreviation>

type: note
to: <role>[,<role>...]
priority: <00-99>
message: <one line, at most 80 characters>

Optional for any type: depends_on: <id>[,<id>...] and blocked_reason: <one line>.
"""


# --- taking and finishing work (docs/protocol.md §4) ------------------------------------


def _take_task(context: Context, inbox: Inbox) -> Result:
    held = held_by_budget(context, inbox)
    if held is not None:
        return held
    ready = Ready(context, inbox.seen.answers)
    item = inbox.take_task(ready.done)
    if item is None:
        return ready.nothing(inbox)
    from handoffd.queue import blocks

    return Result(Exit.OK, blocks.task(item, ready.notes(item)), ready.missing([item]))


def _take_batch(context: Context, inbox: Inbox) -> Result:
    held = held_by_budget(context, inbox)
    if held is not None:
        return held
    ready = Ready(context, inbox.seen.answers)
    taken = inbox.take_batch(ready.done)
    if taken is None:
        return ready.nothing(inbox)
    from handoffd.queue import blocks

    return Result(Exit.OK, blocks.batch(*taken, notes=ready.notes), ready.missing(taken[1]))


def held_by_budget(context: Context, inbox: Inbox) -> Result | None:
    """`NO_TASK` with the `BUDGET_SPENT` line, for a role (or a pool member) whose budget
    is spent and that holds nothing in process (docs/protocol.md §19): work it holds is
    never taken away, new work waits.  A project without budgets pays one small read."""
    text = config.budget_text(context.root)
    if text is None:
        return None
    listing = inbox.listing()
    if listing.files or listing.batches:
        return None
    from handoffd.core import tokens, usage

    spent = usage.holds(tokens.budgets(text), context.me, context.roles, time.time())
    if spent is None:
        return None
    return Result(Exit.OK, "NO_TASK\n", spent.line(hf.iso_seconds(spent.resumes_s)) + "\n")


class Ready:
    """What a take asks beyond §4 (docs/protocol.md §13): whether a file's dependencies are
    done, and the lines its TASK block gains.  The board is built (and its modules
    imported) only for a file that carries `depends_on`, a report folder read only when
    it holds an answer: a take in a project that uses neither pays for nothing."""

    def __init__(self, context: Context, answers: dict[str, bool] | None = None) -> None:
        self.context = context
        self.answers = answers  # what the step's look in report folders found (`Seen`)
        self._dependencies: Dependencies | None = None

    def dependencies(self) -> Dependencies:
        if self._dependencies is None:
            from handoffd.ops.readiness import Dependencies

            self._dependencies = Dependencies(self.context)
        return self._dependencies

    def done(self, path: str, wanted: list[str]) -> bool:
        return self.dependencies().done(wanted, path)

    def nothing(self, inbox: Inbox) -> Result:
        """`NO_TASK`, and the `NOT_READY` line when work waits that is not ready: in the
        role's own `new/`, and for a pool member in its pool's (docs/protocol.md §17)."""
        reasons = inbox.ready(self.done)[1] + inbox.pool_reasons(self.done)
        return Result(Exit.OK, "NO_TASK\n", not_ready_line(reasons) + "\n" if reasons else "")

    def notes(self, item: Item) -> list[str]:
        """`REOPENED`, `BLOCKED_REASON`, `DEPENDS_ON` and `ANSWER` lines, where they apply,
        in that order: what happened to the work itself first (§15, "after TASK_NAME"),
        then §13's.  An answer older than the reopen belongs to the earlier round."""
        from handoffd.queue import blocks

        handoff, lines = item.handoff, []
        reopened = blocks.reopened(handoff)
        if reopened:
            lines.append(_printable(reopened))
        reason = handoff.get(BLOCKED)
        if reason:
            lines.append("BLOCKED_REASON: " + _printable(reason))
        wanted = dependencies(handoff)
        if wanted:
            lines += self.dependencies().lines(item.path, wanted)
        ident = hf.file_id(os.path.basename(item.path), handoff.get(hf.ID))  # as stored
        if has_answer(self.context.me.handoffs, ident, self.answers):
            from handoffd.ops.readiness import answer_lines

            lines += answer_lines(self.context.me.handoffs, ident, handoff.get(hf.REOPENED_AT))
        return lines

    def missing(self, items: list[Item]) -> str:
        """The stderr of a take: a `COMMIT_MISSING` line for each git handoff taken whose
        commit the role's repository lacks (docs/protocol.md §15, "A commit that has not
        arrived").  On stderr, never in the block: stdout stays §4's byte for byte, as
        swarm-forge prints it and its agents and tests read it."""
        return "".join(line + "\n" for item in items for line in self.commit_missing(item.handoff))

    def commit_missing(self, handoff: Handoff) -> list[str]:
        """`COMMIT_MISSING: <sha> is not in this repository (git fetch?)` for a git handoff
        whose commit the role's repository lacks (it was made on another host, §15): one
        `git cat-file` for a git handoff, nothing run for any other file."""
        commit = handoff.get(hf.COMMIT)
        if handoff.get(hf.TYPE) != "git_handoff" or not commit:
            return []
        from handoffd.core import git

        if git.has_commit(self.context.me.worktree, commit) is not False:
            return []
        return [f"COMMIT_MISSING: {_printable(commit)} is not in this repository (git fetch?)"]


def _finish_task(context: Context, inbox: Inbox) -> Result:
    try:
        files = inbox.finish_task()
    except Refusal as refusal:
        raise told_reclaimed(context, inbox, refusal) from None
    forget_reclaimed(context, inbox, files)
    from handoffd.queue import blocks

    return and_then(blocks.completed(files), context, inbox, _take_task)


def _finish_batch(context: Context, inbox: Inbox) -> Result:
    try:
        directory, files = inbox.finish_batch()
    except Refusal as refusal:
        raise told_reclaimed(context, inbox, refusal) from None
    forget_reclaimed(context, inbox, files)
    from handoffd.queue import blocks

    done = blocks.completed(files) + f"COMPLETED_BATCH: {directory}\n"
    return and_then(done, context, inbox, _take_batch)


def forget_reclaimed(context: Context, inbox: Inbox, files: list[str]) -> None:
    """A pool member finished what its note says went back (the daemon was cut off after
    the note, before the move): those lines go, or a later refusal would tell them."""
    note = os.path.join(context.me.handoffs, "reclaimed")
    if inbox.pool and os.path.lexists(note):
        from handoffd.daemon import reclaim

        reclaim.forget(context.me.handoffs, inbox.pool, files)


def told_reclaimed(context: Context, inbox: Inbox, refusal: Refusal) -> Refusal:
    """A finish refused for holding nothing, for a pool member whose claim the daemon gave
    back to the pool (docs/protocol.md §17): `RECLAIMED: …` lines after the token, on
    stderr; nothing else changes.  Only a member with a note (`H/reclaimed`) imports what
    reads it."""
    if inbox.pool and refusal.message in ("NO_CURRENT_TASK", "NO_CURRENT_BATCH"):
        note = os.path.join(context.me.handoffs, "reclaimed")
        if os.path.lexists(note):
            from handoffd.daemon import reclaim

            refusal.message = "\n".join([refusal.message, *reclaim.told(note)])
    return refusal


def by_mode(task: Step, batch: Step) -> Step:
    """The step for the role's receive mode in roles.tsv."""

    def step(context: Context, inbox: Inbox) -> Result:
        mode = context.me.mode
        if mode not in ("task", "batch"):
            raise Refusal(Exit.REFUSED, f"INVALID_RECEIVE_MODE: {mode}")
        return task(context, inbox) if mode == "task" else batch(context, inbox)

    return step


take_step = by_mode(_take_task, _take_batch)
finish_step = by_mode(_finish_task, _finish_batch)


def take(context: Context) -> Result:
    """`ready_for_next`: the role's next work, in its receive mode."""
    return locked(context, take_step, alive=True)


def take_task(context: Context) -> Result:
    return locked(context, _take_task, alive=True)


def take_batch(context: Context) -> Result:
    return locked(context, _take_batch, alive=True)


def finish(context: Context) -> Result:
    """`done_with_current`: complete the work in process, then take the next."""
    return locked(context, finish_step, alive=True)


def finish_task(context: Context) -> Result:
    return locked(context, _finish_task, alive=True)


def finish_batch(context: Context) -> Result:
    return locked(context, _finish_batch, alive=True)


def _printable(text: str) -> str:
    """A header's value as one printed line: a control character from a hand-edited file
    is shown escaped (the escaping module only imported then)."""
    if text.isprintable():
        return text
    from handoffd.core.terminal import escape

    return escape(text)


# --- queueing work (docs/protocol.md §3) ----------------------------------------------------


def send(
    context: Context,
    draft: str,
    name: str = "send_handoff",
    consumed: Callable[[], None] | None = None,
    idempotency_key: str | None = None,
    enqueue: Enqueue | None = None,
) -> Result:
    """`swarm_handoff DRAFT` and the tool `send_handoff`: check the draft text (called
    `name` in a refusal), queue it with `enqueue` (default `outbox.queue`), then
    `consumed()` (the draft file is deleted).  With `idempotency_key`, once per key."""
    if context.me.is_pool:
        return not_a_sender(context)
    if idempotency_key is not None:
        from handoffd.ops import idempotency

        return idempotency.send(context, idempotency_key, draft, send, queued)
    sent_to = ""
    try:
        result, sent_to = _queue(context, draft, name, consumed, enqueue)
    except (Refusal, OSError) as error:
        result = failure(error)
    return after_step(context, result, alive=True, changed=bool(sent_to), sent_to=sent_to)


def not_a_sender(context: Context) -> Result:
    """A pool sends nothing (docs/protocol.md §17): its members do.  §3's line for a sender
    roles.tsv does not know, and which roles may send in its place; exit 1, nothing queued."""
    pool = context.me.name
    team = [name for name, row in context.roles.items() if row.pool == pool and not row.is_pool]
    said = f"Unknown sender role: {pool} ({pool} is a pool, which sends nothing; its members "
    return Result(Exit.FAILED, "", said + f"send: {', '.join(team) or 'none'})\n")


def _queue(
    context: Context,
    text: str,
    name: str,
    consumed: Callable[[], None] | None,
    enqueue: Enqueue | None,
) -> tuple[Result, str]:
    """The result, and the recipients of the handoff queued."""
    from handoffd.core import git
    from handoffd.queue import draft, outbox

    sender = context.me
    checked = draft.check(
        text,
        set(context.roles),
        lambda c: git.resolve_commit(sender.worktree, c),
        lambda ident: outbox.handoff_exists(context.roles, ident),
    )
    if not isinstance(checked, list) and (too_long := outbox.name_problem(checked, sender.name)):
        checked = [too_long]
    if isinstance(checked, list):
        raise Refusal(Exit.REFUSED, invalid(context, checked, text, name))
    path = (enqueue or outbox.queue)(sender, checked, time.time())
    if consumed is not None:
        consumed()
    return queued(context.root, path), ",".join(checked.recipients)


def queued(root: str, path: str) -> Result:
    """What queueing prints: the token, and a warning when no daemon will deliver it."""
    return Result(Exit.OK, f"HANDOFF QUEUED: {path}\n", no_daemon_warning(root))


def invalid(context: Context, errors: list[str], text: str, name: str) -> str:
    """The `HANDOFF INVALID` report of a refused draft (docs/protocol.md §3)."""
    listed = "".join(f"- {message}\n" for message in errors)
    usage = USAGE + ("\n" + _packet_usage() if "type: packet" in text else "")
    unknown = [m.split("'")[1] for m in errors if m.startswith("Unknown recipient role '")]
    if unknown:
        # The error line keeps the contract's exact words (agents match them); the
        # roles to choose from, and the nearest to each unknown one, close the usage
        # text, which is ours to write.
        from handoffd.core.config import nearest, without_operator

        known = without_operator(context.roles)  # `operator` is a recipient, not a role
        near = [(n, m) for n in unknown if (m := nearest(n, known))]
        meant = "".join(f" Did you mean '{m}' for '{n}'?" for n, m in near)
        usage += f"\nKnown roles: {', '.join(sorted(known))}.{meant}\n"
    return f"HANDOFF INVALID: {name}\n\nErrors:\n{listed}\n{usage}".rstrip("\n")


def _packet_usage() -> str:
    from handoffd.queue import packet

    return packet.USAGE


def no_daemon_warning(root: str) -> str:
    """One line when nothing will deliver the handoff (the exit code stays 0: prompts rely
    on it); empty when a daemon holds the project's lock.  `retry` says it too: a retried
    original waits in the outbox like a new one."""
    from handoffd.core import lifecycle  # ~2 ms (socket, select), paid only by swarm_handoff

    if lifecycle.holder(root) is not None:
        return ""
    return (
        f"WARNING: no handoffd daemon is running for {root}; this handoff waits in outbox/ "
        f"until one does. Start it with: handoffd start {root}\n"
    )
