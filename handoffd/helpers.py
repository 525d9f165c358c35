"""Entry points of the agent-facing helpers: one short process per agent call.

Each helper finds the project and the calling role, does one inbox or outbox step,
prints the protocol's tokens and exits with the protocol's code.  Start-up cost is
part of the contract (an agent runs these constantly), so this module and what it
imports use only cheap standard modules: no click, no logging library, no regex.
"""

from __future__ import annotations

import os
import sys
import time

from handoffd import blocks, config
from handoffd.inbox import Inbox, Refusal

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: importing typing costs ~15 ms
if TYPE_CHECKING:
    from collections.abc import Callable

    Step = Callable[["Caller"], str]

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
"""


class Caller:
    """Who is calling: the project root, its roles and the calling role."""

    __slots__ = ("role", "roles", "root", "sent_to")

    def __init__(self, root: str, roles: dict[str, config.Role], role: config.Role) -> None:
        self.root = root
        self.roles = roles
        self.role = role
        self.sent_to = ""  # the recipients of a handoff this call queued


def _after_step(caller: Caller) -> None:
    """Rewrite the role's live file (docs/protocol.md §10); it never fails the step."""
    from handoffd.continuity import hook

    hook.after_step(caller.role, caller.sent_to)


def _run(step: Step, unknown_role: str = "Unknown role: {}") -> None:
    """Resolve the caller, run `step`, print its output; map failures to exit codes."""
    try:
        root = config.find_root()
        roles = config.load_roles(root)
        role = config.calling_role(roles, os.environ.get("SWARMFORGE_ROLE"))
        caller = Caller(root, roles, role)
        try:
            output = step(caller)
        finally:  # also after a refusal: finishing may have completed work before it
            _after_step(caller)
    except config.UnknownRole as error:
        _fail(1, unknown_role.format(error.name) + "\n")
    except config.ConfigError as error:
        _fail(1, f"{error}\n")
    except Refusal as refusal:
        _fail(refusal.code, refusal.render())
    except OSError as error:
        _fail(1, f"I/O error: {error}\n")
    _print(output)
    sys.stdout.flush()
    sys.exit(0)


def _print(text: str) -> None:
    # surrogateescape: a file name that is not UTF-8 prints as its bytes, not a traceback
    sys.stdout.buffer.write(text.encode("utf-8", "surrogateescape"))


def _fail(code: int, text: str) -> None:
    sys.stdout.flush()
    sys.stderr.write(text)
    sys.exit(code)


# --- taking and finishing work (PROTOCOL.md §4) -----------------------------------------


def _take_task(caller: Caller) -> str:
    with Inbox(caller.role.handoffs) as inbox:
        item = inbox.take_task()
    return "NO_TASK\n" if item is None else blocks.task(item)


def _take_batch(caller: Caller) -> str:
    with Inbox(caller.role.handoffs) as inbox:
        taken = inbox.take_batch()
    return "NO_TASK\n" if taken is None else blocks.batch(*taken)


def _finish_task(caller: Caller) -> str:
    with Inbox(caller.role.handoffs) as inbox:
        done = inbox.finish_task()
    _print(blocks.completed(done))  # done is done, even if taking the next task is refused
    return _take_task(caller)


def _finish_batch(caller: Caller) -> str:
    with Inbox(caller.role.handoffs) as inbox:
        directory, files = inbox.finish_batch()
    _print(blocks.completed(files) + f"COMPLETED_BATCH: {directory}\n")
    return _take_batch(caller)


def _by_mode(task: Step, batch: Step) -> Step:
    """The step for the caller's receive mode in roles.tsv."""

    def step(caller: Caller) -> str:
        mode = caller.role.mode
        if mode not in ("task", "batch"):
            raise Refusal(2, f"INVALID_RECEIVE_MODE: {mode}")
        return task(caller) if mode == "task" else batch(caller)

    return step


def ready_for_next_task() -> None:
    _run(_take_task)


def ready_for_next_batch() -> None:
    _run(_take_batch)


def ready_for_next() -> None:
    _run(_by_mode(_take_task, _take_batch))


def done_with_current_task() -> None:
    _run(_finish_task)


def done_with_current_batch() -> None:
    _run(_finish_batch)


def done_with_current() -> None:
    _run(_by_mode(_finish_task, _finish_batch))


# --- queueing work (PROTOCOL.md §3) -------------------------------------------------------


def swarm_handoff() -> None:
    args = sys.argv[1:]
    if len(args) != 1:
        _fail(1, USAGE)
    draft_path = args[0]
    if not os.path.isfile(draft_path):
        _fail(1, f"Draft file not found: {draft_path}\n")
    _run(lambda caller: _queue(caller, draft_path), unknown_role="Unknown sender role: {}")


def _packet_usage() -> str:
    from handoffd.continuity import packet

    return packet.USAGE


def _queue(caller: Caller, draft_path: str) -> str:
    from handoffd import draft, git, outbox

    sender = caller.role
    # newline="": a packet's bytes travel verbatim (docs/protocol.md §10), CRs included
    with open(draft_path, encoding="utf-8", errors="replace", newline="") as file:
        text = file.read()
    result = draft.check(text, set(caller.roles), lambda c: git.resolve_commit(sender.worktree, c))
    if isinstance(result, list):
        errors = "".join(f"- {message}\n" for message in result)
        usage = USAGE + ("\n" + _packet_usage() if "type: packet" in text else "")
        report = f"HANDOFF INVALID: {draft_path}\n\nErrors:\n{errors}\n{usage}"
        raise Refusal(2, report.rstrip("\n"))
    path = outbox.queue(sender, result, time.time())
    caller.sent_to = ",".join(result.recipients)
    os.unlink(draft_path)
    return f"HANDOFF QUEUED: {path}\n"
