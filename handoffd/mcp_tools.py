"""What each tool of `handoffd mcp` runs (docs/protocol.md §12), with no MCP SDK in sight:
`handoffd.mcp` lists the tools with their schemas and wires them to the SDK.

Every tool resolves its caller the way its command does and calls the same function the
command calls, then answers with a `Reply`: the command's `Outcome` (its exit code and the
text it prints) and, where the command has `--json`, the structure that prints.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from handoffd import config, helpers
from handoffd.continuity import packet
from handoffd.outcome import Outcome
from handoffd.terminal import escape, escape_json

Args = dict[str, Any]


class Reply:
    """A tool's answer: the command's outcome, and its `--json` structure (None: no such)."""

    __slots__ = ("outcome", "structured")

    def __init__(self, outcome: Outcome, structured: dict[str, Any] | None = None) -> None:
        self.outcome = outcome
        self.structured = structured


# --- the caller (docs/protocol.md §1) ----------------------------------------------------


def caller(root: str, args: Args, unknown: str = "Unknown role: {}") -> helpers.Caller | Outcome:
    """The role the tool acts for, as its command resolves it; or the command's refusal."""
    try:
        return helpers.resolve(
            root, args.get("role"), args.get("agent"), args.get("conversation")
        )  # fmt: skip
    except config.UnknownRole as error:
        return Outcome(1, "", unknown.format(error.name) + "\n")
    except config.ConfigError as error:
        return Outcome(1, "", f"{error}\n")


def _as(root: str, args: Args, step: Callable[[helpers.Caller], Outcome]) -> Reply:
    me = caller(root, args)
    return Reply(me if isinstance(me, Outcome) else step(me))


def refused(message: str, code: int = 2) -> Reply:
    return Reply(Outcome(code, "", message.rstrip("\n") + "\n"))


# --- sending (docs/protocol.md §3, §10) --------------------------------------------------

HEADERS = ("type", "to", "priority", "task", "commit", "message", "depends_on", "blocked_reason")
# a packet's sections by argument name (`ruled_out_paths`), in the contract's order
SECTIONS = {packet.field(title): title for title in packet.SECTIONS}


def draft_text(args: Args) -> str | Outcome:
    """The draft the arguments describe: its header lines and, for a packet, its sections."""
    lines = []
    for field in HEADERS:
        value = args.get(field)
        if value is None:
            continue
        value = ",".join(value) if isinstance(value, list) else str(value)
        if "\n" in value or "\r" in value:
            return Outcome(2, "", f"INVALID_ARGUMENTS: '{field}' must be one line.\n")
        lines.append(f"{field}: {value}\n")
    given = [key for key in SECTIONS if args.get(key) is not None]
    if given and args.get("type") != "packet":
        return Outcome(2, "", f"INVALID_ARGUMENTS: '{given[0]}' is a section of a packet; "
                       "give type 'packet' or leave the sections out.\n")  # fmt: skip
    if args.get("type") == "packet" and given:
        lines.append("\n" + packet.compose({key: args[key] for key in given}))
    return "".join(lines)


def send_handoff(root: str, args: Args) -> Reply:
    """`swarm_handoff` from the draft's fields; with `idempotency_key`, once per key."""
    text = draft_text(args)
    if isinstance(text, Outcome):
        return Reply(text)
    me = caller(root, args, unknown="Unknown sender role: {}")
    if isinstance(me, Outcome):
        return Reply(me)
    key = args.get("idempotency_key")
    if key is None:
        return Reply(helpers.queue_text(me, lambda: text, "send_handoff", lambda: None))
    from handoffd import idempotency

    return Reply(idempotency.send(me, key, text))


# --- taking, finishing, claims and reports (docs/protocol.md §4, §8) ---------------------


def ready_for_next(root: str, args: Args) -> Reply:
    return _as(root, {}, lambda me: helpers.helper_step(me, "ready_for_next"))


def done_with_current(root: str, args: Args) -> Reply:
    return _as(root, {}, lambda me: helpers.helper_step(me, "done_with_current"))


def heartbeat(root: str, args: Args) -> Reply:
    return _as(root, args, helpers.beat)


def release(root: str, args: Args) -> Reply:
    return _as(root, args, lambda me: helpers.release(me, args.get("id")))


def block(root: str, args: Args) -> Reply:
    return _as(root, args, lambda me: helpers.block(me, args.get("id"), args["reason"]))


def unblock(root: str, args: Args) -> Reply:
    return _as(root, args, lambda me: helpers.unblock(me, args.get("id")))


def report(root: str, args: Args) -> Reply:
    from handoffd.board import reporting

    if args.get("file") is not None and args.get("text") is not None:
        return refused("INVALID_ARGUMENTS: give the report as 'text' or as 'file', not both.")
    if args.get("file") == "-":
        return refused("INVALID_ARGUMENTS: a tool has no stdin; give the report as 'text'.")
    ident, status, reason = args.get("id"), args["status"], args.get("reason")

    def step(me: helpers.Caller) -> Outcome:
        text = args.get("text")
        if text is None and args.get("file") is not None:
            # the caller first: the file must lie inside its own worktree (§12)
            text = reporting.read_inside(args["file"], me.role.worktree)
        if isinstance(text, Outcome):
            return text
        return reporting.report(me, ident, status, text or "", reason)

    return _as(root, args, step)


# --- the board, the live file, resume, digests (docs/protocol.md §8, §10, §11) ------------


def status(root: str, args: Args) -> Reply:
    from handoffd.board import status as board

    now, show_all = time.time(), bool(args.get("all"))
    try:
        result = board.board(root, args.get("role"), show_all, args.get("window", 60.0) * 60, now)
    except config.ConfigError as error:
        return Reply(Outcome(1, "", f"Error: {error}\n"))
    items = [card.to_json() for card in result.cards]
    if args.get("json"):
        cycles = "".join(f"{escape(cycle)}\n" for cycle in result.cycles)
        text = Outcome(0, escape_json(json.dumps(items, ensure_ascii=False)) + "\n", cycles)
    else:
        text = Outcome(0, "\n".join(board.render(result, now, show_all, False)) + "\n")
    return Reply(text, {"items": items})


def note(root: str, args: Args) -> Reply:
    from handoffd.continuity.commands import run_note

    given = (args.get("decision"), args.get("ruled_out"), args.get("verify"))
    return Reply(run_note(root, args.get("role"), *given))


def resume(root: str, args: Args) -> Reply:
    from handoffd.continuity.commands import climb

    answer = climb(root, args.get("role"))
    if isinstance(answer, Outcome):
        return Reply(answer)
    shown = answer.as_json()
    if args.get("json"):
        return Reply(Outcome(0, escape_json(json.dumps(shown, ensure_ascii=False)) + "\n"), shown)
    return Reply(Outcome(0, "".join(f"{line}\n" for line in answer.lines())), shown)


def digest(root: str, args: Args) -> Reply:
    from handoffd.continuity import digest_commands as digests
    from handoffd.continuity.digest import DEFAULT_LINES

    ident, task = args.get("id"), args.get("task")
    if (ident is None) == (task is None):
        return refused("Error: give a handoff ID or --task T (one of them)")
    lines = args.get("max_lines", DEFAULT_LINES)
    made = digests._safe(lambda: digests.digest_of(root, ident, task, lines))
    shown = digests.render(made, bool(args.get("json")))
    return Reply(shown, None if isinstance(made, Outcome) else made.as_json())


def carry_forward(root: str, args: Args) -> Reply:
    from handoffd.continuity import digest_commands as digests
    from handoffd.continuity.digest import epoch

    since = args.get("since")
    when = None if since is None else epoch(since)
    if since is not None and when is None:
        return refused(f"Error: Invalid value for '--since': not an ISO 8601 time: {since!r}")
    try:
        made = digests.carry_forward_of(root, args.get("n", 5), when, args.get("role"))
    except config.ConfigError as error:
        return Reply(Outcome(1, "", f"{error}\n"))
    items = [one.as_json() for one in made]
    return Reply(digests.render_many(made, bool(args.get("json"))), {"items": items})
