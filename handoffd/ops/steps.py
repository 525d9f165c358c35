"""What every operation on a role does around its step: the lock, the heartbeat, the
live file (docs/protocol.md §8, §10).  Helpers import this module: standard `os` only."""

from __future__ import annotations

from handoffd.core.outcome import Refusal, Result, failure
from handoffd.ops.context import Context
from handoffd.queue import heartbeat
from handoffd.queue.inbox import Inbox
from handoffd.queue.lock import Busy, LinkedFolder

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: importing typing costs ~15 ms
if TYPE_CHECKING:
    from collections.abc import Callable

    from handoffd.queue.items import Seen

    Step = Callable[[Context, Inbox], Result]


def after_step(
    context: Context,
    result: Result,
    *,
    alive: bool,
    changed: bool = True,
    sent_to: str = "",
    force: bool = False,
    seen: Seen | None = None,
) -> Result:
    """The one place every operation on a role passes after its step: the heartbeat of a
    role that showed life (`alive`), and the live file of a role whose state may have
    `changed` (`sent_to` names the recipients of a handoff it queued; `force` rewrites the
    file even if only its time would change; `seen`, what the step listed and read, under
    the lock still held)."""
    if alive:
        renew(context)
    if changed:  # also after a refusal: finishing may have completed work before refusing
        from handoffd.continuity import live

        # never raises: the step's work is done
        live.after_step(context.me, sent_to, force=force or bool(sent_to), seen=seen)
    return result


def renew(context: Context) -> None:
    """Renew the role's heartbeat (docs/protocol.md §8); never fails the step that earned it."""
    try:
        heartbeat.renew(context.me.handoffs, context.agent, context.conversation)
    except OSError:
        pass  # a liveness hint


def locked(context: Context, step: Step, *, alive: bool, force: bool = False) -> Result:
    """Run `step` holding the role's inbox lock; a refusal or an I/O error is its result;
    `force` rewrites the live file after a step that succeeded.

    A role that shows life (`alive`) renews its heartbeat as soon as it holds the lock,
    before the step renames anything: a copy it claims from its pool is never seen in
    process beside a heartbeat older than the claim, which the daemon would take for an
    expired one and give back while the agent works on it (docs/protocol.md §17).

    The live file is rewritten before the lock is let go, from what the step listed and
    read (`Inbox.seen`), so no folder is listed twice: two helpers of one role write it
    in the order they changed the inbox, and a stale view never lands last.  The step's
    changes are made durable first: the live file never says more than the disk holds."""
    try:
        with Inbox(context.me.handoffs, context.me.name, pool_of(context)) as inbox:
            if alive:
                renew(context)
            try:
                result = step(context, inbox)
            except (LinkedFolder, Busy):
                raise
            except Refusal as refusal:
                result = failure(refusal)
            inbox.sync()
            return after_step(context, result, alive=alive, force=force and result.ok,
                              seen=inbox.seen)  # fmt: skip
    except (LinkedFolder, Busy) as refusal:  # nothing changed (a linked folder: the live
        # file would read through it; a busy lock: its holder is still changing the inbox)
        return after_step(context, refusal.result(), alive=alive, changed=False)
    except (Refusal, OSError) as error:  # the step stopped part-way: the live file
        result = failure(error)  # lists the folders itself
    return after_step(context, result, alive=alive)


def pool_of(context: Context) -> tuple[str, str] | None:
    """The name and H of the pool the role acted for is a member of (docs/protocol.md §17),
    else None.  (Not `handoffd.queue.pool`'s: a helper imports nothing more for it.)"""
    me = context.me
    row = context.roles.get(me.pool) if me.pool and not me.is_pool else None
    return (row.name, row.handoffs) if row is not None and row.is_pool else None


def and_then(done: str, context: Context, inbox: Inbox, take: Step) -> Result:
    """What was completed, then the next take: done is done, even if that take is refused."""
    try:
        following = take(context, inbox)
    except Refusal as refusal:
        following = refusal.result()
    return Result(following.code, done + following.out, following.err)


def own_id(context: Context, ident: str | None) -> str | None:
    """An ID as a person copies it from the board: a card of the role's own, `<id>@<role>`
    (docs/protocol.md §8), names that id; anything else is left as given."""
    me = context.me
    for suffix in ("@" + me.name, *(("@" + me.pool,) if me.pool and not me.is_pool else ())):
        if ident and ident.endswith(suffix):  # a pool member's cards are its pool's (§17)
            return ident[: -len(suffix)]
    return ident
