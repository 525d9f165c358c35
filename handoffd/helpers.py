"""The agent-facing operations, and the console scripts that are thin adapters over them.

Each operation finds nothing and prints nothing: it takes a resolved `Caller`, does one
inbox or outbox step and returns an `Outcome` (exit code, stdout, stderr).  The console
scripts (`ready_for_next`, …), the click commands and the MCP tools each render that
outcome.  Start-up cost is part of the contract (an agent runs the helpers constantly),
so this module and what it imports at the top use only cheap standard modules: no
click, no logging library, no regex, no typing (a test pins the list).
"""

from __future__ import annotations

import os
import sys
import time

from handoffd import blocks, config, heartbeat
from handoffd.inbox import BLOCKED, Inbox, Refusal
from handoffd.outcome import Outcome

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: importing typing costs ~15 ms
if TYPE_CHECKING:
    from collections.abc import Callable

    from handoffd.draft import Draft

    Step = Callable[["Caller", Inbox], Outcome]
    Enqueue = Callable[[config.Role, Draft, float], str]  # queue a checked draft: its path

MAX_REASON = 200
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


class Caller:
    """Who is calling: the project root, its roles, the role acted for, and who runs it."""

    __slots__ = ("agent", "conversation", "role", "roles", "root")

    def __init__(
        self,
        root: str,
        roles: dict[str, config.Role],
        role: config.Role,
        agent: str = "",
        conversation: str = "",
    ) -> None:
        self.root = root
        self.roles = roles
        self.role = role
        self.agent = agent or role.agent
        self.conversation = conversation


def resolve(
    root: str | None = None,
    role: str | None = None,
    agent: str | None = None,
    conversation: str | None = None,
) -> Caller:
    """The caller (docs/protocol.md §1, §8): options first, then the environment, then
    roles.tsv.  Raises `config.ConfigError` (exit 1) when there is no role to act for."""
    root = root or config.find_root()
    roles = config.load_roles(root)
    me = config.calling_role(roles, role or os.environ.get("SWARMFORGE_ROLE"))
    agent = agent or os.environ.get("SWARMFORGE_AGENT") or me.agent
    if conversation is None:
        conversation = os.environ.get("SWARMFORGE_CONVERSATION", "")
    return Caller(root, roles, me, agent, conversation)


def after_step(
    caller: Caller,
    outcome: Outcome,
    *,
    alive: bool,
    changed: bool = True,
    sent_to: str = "",
    force: bool = False,
) -> Outcome:
    """The one place every operation passes after its step: the heartbeat of a role that
    showed life (`alive`), and the live file of a role whose state may have `changed`
    (docs/protocol.md §10; `sent_to` names the recipients of a handoff it queued; `force`
    rewrites it even if only its time would change)."""
    if alive:
        try:
            heartbeat.renew(caller.role.handoffs, caller.agent, caller.conversation)
        except OSError:
            pass  # a liveness hint: never fail the step that earned it
    if changed:  # also after a refusal: finishing may have completed work before refusing
        from handoffd.continuity import hook

        # never raises: the step's work is done
        hook.after_step(caller.role, sent_to, force=force or bool(sent_to))
    return outcome


def locked(caller: Caller, step: Step, *, alive: bool, force: bool = False) -> Outcome:
    """Run `step` holding the role's inbox lock; a refusal or I/O error is an outcome;
    `force` rewrites the live file after a step that succeeded."""
    try:
        with Inbox(caller.role.handoffs) as inbox:
            outcome = step(caller, inbox)
    except Refusal as refusal:
        outcome = Outcome(refusal.code, "", refusal.render())
    except OSError as error:
        outcome = Outcome(1, "", f"I/O error: {error}\n")
    return after_step(caller, outcome, alive=alive, force=force and outcome.code == 0)


# --- taking and finishing work (docs/protocol.md §4) ------------------------------------


def _take_task(caller: Caller, inbox: Inbox) -> Outcome:
    item = inbox.take_task()
    return Outcome(0, "NO_TASK\n" if item is None else blocks.task(item))


def _take_batch(caller: Caller, inbox: Inbox) -> Outcome:
    taken = inbox.take_batch()
    return Outcome(0, "NO_TASK\n" if taken is None else blocks.batch(*taken))


def _finish_task(caller: Caller, inbox: Inbox) -> Outcome:
    done = blocks.completed(inbox.finish_task())
    return and_then(done, caller, inbox, _take_task)


def _finish_batch(caller: Caller, inbox: Inbox) -> Outcome:
    directory, files = inbox.finish_batch()
    done = blocks.completed(files) + f"COMPLETED_BATCH: {directory}\n"
    return and_then(done, caller, inbox, _take_batch)


def and_then(done: str, caller: Caller, inbox: Inbox, take: Step) -> Outcome:
    """What was completed, then the next take: done is done, even if that take is refused."""
    try:
        following = take(caller, inbox)
    except Refusal as refusal:
        following = Outcome(refusal.code, "", refusal.render())
    return Outcome(following.code, done + following.stdout, following.stderr)


def _by_mode(task: Step, batch: Step) -> Step:
    """The step for the caller's receive mode in roles.tsv."""

    def step(caller: Caller, inbox: Inbox) -> Outcome:
        mode = caller.role.mode
        if mode not in ("task", "batch"):
            raise Refusal(2, f"INVALID_RECEIVE_MODE: {mode}")
        return task(caller, inbox) if mode == "task" else batch(caller, inbox)

    return step


take = _by_mode(_take_task, _take_batch)
finish = _by_mode(_finish_task, _finish_batch)
STEPS = {
    "ready_for_next_task": _take_task,
    "ready_for_next_batch": _take_batch,
    "ready_for_next": take,
    "done_with_current_task": _finish_task,
    "done_with_current_batch": _finish_batch,
    "done_with_current": finish,
}


def helper_step(caller: Caller, name: str) -> Outcome:
    """Run the §4 helper `name` for `caller`: locked, and renewing the heartbeat."""
    return locked(caller, STEPS[name], alive=True)


# --- claims (docs/protocol.md §8) --------------------------------------------------------


def beat(caller: Caller) -> Outcome:
    """`handoffd heartbeat`: the role shows life."""
    path = os.path.join(caller.role.handoffs, heartbeat.NAME)
    try:
        heartbeat.renew(caller.role.handoffs, caller.agent, caller.conversation)
    except OSError as error:
        return Outcome(1, "", f"I/O error: {error}\n")
    return after_step(caller, Outcome(0, f"HEARTBEAT: {path}\n"), alive=False, changed=False)


def own_id(caller: Caller, ident: str | None) -> str | None:
    """An ID as a person copies it from the board: a card of the caller's own role,
    `<id>@<role>` (docs/protocol.md §8), names that id; anything else is left as given."""
    suffix = "@" + caller.role.name
    return ident[: -len(suffix)] if ident and ident.endswith(suffix) else ident


def release(caller: Caller, ident: str | None) -> Outcome:
    """Put the work in process (or the work holding `ident`) back into `new/`."""
    ident = own_id(caller, ident)

    def step(caller: Caller, inbox: Inbox) -> Outcome:
        return Outcome(0, "".join(f"RELEASED: {p}\n" for p in inbox.release(ident)))

    return locked(caller, step, alive=False)


def block(caller: Caller, ident: str | None, reason: str) -> Outcome:
    """Set `blocked_reason` on the role's copy (or on the work in process)."""
    ident = own_id(caller, ident)
    problem = reason_problem(reason)
    if problem:
        return after_step(caller, Outcome(2, "", problem), alive=False, changed=False)

    def step(caller: Caller, inbox: Inbox) -> Outcome:
        return Outcome(0, blocked_lines(inbox, ident, reason.strip()))

    return locked(caller, step, alive=False)


def blocked_lines(inbox: Inbox, ident: str | None, reason: str) -> str:
    """Set `reason` on the copy `ident` names, or on the work in process, and say so:
    `BLOCKED: <path>` per file set, and (a batch, no ID) `ALREADY_BLOCKED: <path>` per file
    that keeps the reason it had."""
    paths = inbox.set_header(ident, BLOCKED, reason)
    kept = [] if ident is not None else [p for p in inbox.current().files if p not in paths]
    return "".join(f"BLOCKED: {p}\n" for p in paths) + "".join(
        f"ALREADY_BLOCKED: {p}\n" for p in kept
    )


def unblock(caller: Caller, ident: str | None) -> Outcome:
    """Remove `blocked_reason` from the role's copy (or from the work in process)."""
    ident = own_id(caller, ident)

    def step(caller: Caller, inbox: Inbox) -> Outcome:
        paths = inbox.set_header(ident, BLOCKED, None)
        return Outcome(0, "".join(f"UNBLOCKED: {p}\n" for p in paths))

    return locked(caller, step, alive=False)


def reason_problem(reason: str) -> str | None:
    """Why `reason` cannot be a `blocked_reason` (one line of 1 to 200 characters, without
    control characters: the board and the live file show it), or None."""
    from handoffd.terminal import has_control  # only block and report pay for it

    text = reason.strip()
    if "\n" in text or "\r" in text or not 1 <= len(text) <= MAX_REASON:
        return f"INVALID_REASON: a blocked reason is one line of 1 to {MAX_REASON} characters.\n"
    if has_control(text):
        return (
            "INVALID_REASON: a blocked reason must not contain control characters "
            "(a tab, an escape); write it as plain text.\n"
        )
    return None


# --- queueing work (docs/protocol.md §3) ----------------------------------------------------


def queue(caller: Caller, draft_path: str) -> Outcome:
    """`swarm_handoff DRAFT`: check the draft, queue it, delete it."""

    def text() -> str:
        # newline="": a packet's bytes travel verbatim (docs/protocol.md §10), CRs included
        with open(draft_path, encoding="utf-8", errors="replace", newline="") as file:
            return file.read()

    return queue_text(caller, text, draft_path, lambda: os.unlink(draft_path))


def queue_text(
    caller: Caller,
    text: Callable[[], str],
    name: str,
    consumed: Callable[[], None],
    enqueue: Enqueue | None = None,
) -> Outcome:
    """Check the draft `text()` (called `name` in a refusal), queue it with `enqueue`
    (default `outbox.queue`), then `consumed()`: the one path of `swarm_handoff` and of
    the MCP tool `send_handoff`."""
    sent_to = ""
    try:
        outcome, sent_to = _queue(caller, text(), name, consumed, enqueue)
    except Refusal as refusal:
        outcome = Outcome(refusal.code, "", refusal.render())
    except OSError as error:
        outcome = Outcome(1, "", f"I/O error: {error}\n")
    return after_step(caller, outcome, alive=True, changed=bool(sent_to), sent_to=sent_to)


def _queue(
    caller: Caller,
    text: str,
    draft_path: str,
    consumed: Callable[[], None],
    enqueue: Enqueue | None,
) -> tuple[Outcome, str]:
    """The outcome, and the recipients of the handoff queued."""
    from handoffd import draft, git, outbox

    sender = caller.role
    result = draft.check(
        text,
        set(caller.roles),
        lambda c: git.resolve_commit(sender.worktree, c),
        lambda ident: outbox.handoff_exists(caller.roles, ident),
    )
    if not isinstance(result, list) and (too_long := outbox.name_problem(result, sender.name)):
        result = [too_long]
    if isinstance(result, list):
        errors = "".join(f"- {message}\n" for message in result)
        usage = USAGE + ("\n" + _packet_usage() if "type: packet" in text else "")
        if any(message.startswith("Unknown recipient role") for message in result):
            # The error line keeps the contract's exact words (agents match them); the
            # roles to choose from close the usage text, which is ours to write.
            usage += f"\nKnown roles: {', '.join(sorted(caller.roles))}.\n"
        report = f"HANDOFF INVALID: {draft_path}\n\nErrors:\n{errors}\n{usage}"
        raise Refusal(2, report.rstrip("\n"))
    path = (enqueue or outbox.queue)(sender, result, time.time())
    consumed()
    return queued(caller.root, path), ",".join(result.recipients)


def queued(root: str, path: str) -> Outcome:
    """What queueing prints: the token, and a warning when no daemon will deliver it."""
    return Outcome(0, f"HANDOFF QUEUED: {path}\n", _no_daemon_warning(root))


def _packet_usage() -> str:
    from handoffd.continuity import packet

    return packet.USAGE


# --- the console scripts: one short process per agent call --------------------------------


def _main(operate: Callable[[Caller], Outcome], unknown_role: str = "Unknown role: {}") -> None:
    """Resolve the caller from the environment, run, render the outcome and exit."""
    try:
        outcome = operate(resolve())
    except config.UnknownRole as error:
        outcome = Outcome(1, "", unknown_role.format(error.name) + "\n")
    except config.ConfigError as error:
        outcome = Outcome(1, "", f"{error}\n")
    render(outcome)


def render(outcome: Outcome) -> None:
    """Print an outcome the way the helpers always have, then exit with its code."""
    # surrogateescape: a file name that is not UTF-8 prints as its bytes, not a traceback
    sys.stdout.buffer.write(outcome.stdout.encode("utf-8", "surrogateescape"))
    sys.stdout.flush()
    sys.stderr.write(outcome.stderr)
    sys.exit(outcome.code)


def ready_for_next_task() -> None:
    _main(lambda caller: helper_step(caller, "ready_for_next_task"))


def ready_for_next_batch() -> None:
    _main(lambda caller: helper_step(caller, "ready_for_next_batch"))


def ready_for_next() -> None:
    _main(lambda caller: helper_step(caller, "ready_for_next"))


def done_with_current_task() -> None:
    _main(lambda caller: helper_step(caller, "done_with_current_task"))


def done_with_current_batch() -> None:
    _main(lambda caller: helper_step(caller, "done_with_current_batch"))


def done_with_current() -> None:
    _main(lambda caller: helper_step(caller, "done_with_current"))


def swarm_handoff() -> None:
    args = sys.argv[1:]
    if args in (["--help"], ["-h"]):
        render(Outcome(0, USAGE))
    if len(args) != 1:
        render(Outcome(1, "", USAGE))
    draft_path = args[0]
    if not os.path.isfile(draft_path):
        render(Outcome(1, "", f"Draft file not found: {draft_path}\n"))
    _main(lambda caller: queue(caller, draft_path), unknown_role="Unknown sender role: {}")


def _no_daemon_warning(root: str) -> str:
    """One line when nothing will deliver the handoff (the exit code stays 0: prompts rely
    on it); empty when a daemon holds the project's lock."""
    from handoffd import lifecycle  # ~2 ms (socket, select), paid only by swarm_handoff

    if lifecycle.holder(root) is not None:
        return ""
    return (
        f"WARNING: no handoffd daemon is running for {root}; this handoff waits in outbox/ "
        f"until one does. Start it with: handoffd start {root}\n"
    )
