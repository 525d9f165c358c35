"""The tools of `handoffd mcp` (docs/protocol.md §12): each one's arguments, description and
the operation it runs, with no MCP SDK in sight (`handoffd.mcp` wires them to the SDK).

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
from handoffd.outcome import Outcome

Args = dict[str, Any]


class Reply:
    """A tool's answer: the command's outcome, and its `--json` structure (None: no such)."""

    __slots__ = ("outcome", "structured")

    def __init__(self, outcome: Outcome, structured: dict[str, Any] | None = None) -> None:
        self.outcome = outcome
        self.structured = structured


class Tool:
    """One tool: its name, what an agent reads about it, its argument schema and its run."""

    __slots__ = ("description", "name", "output", "properties", "required", "run")

    def __init__(
        self,
        name: str,
        description: str,
        properties: dict[str, Any],
        run: Callable[[str, Args], Reply],
        required: tuple[str, ...] = (),
        output: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.description = description
        self.properties = properties
        self.required = required
        self.run = run
        self.output = output

    def input_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {
            "type": "object",
            "properties": self.properties,
            "additionalProperties": False,
        }
        if self.required:
            schema["required"] = list(self.required)
        return schema


def _text(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


def _flag(description: str) -> dict[str, Any]:
    return {"type": "boolean", "description": description, "default": False}


def _names(description: str) -> dict[str, Any]:
    """One name, a comma-separated list (as in a draft), or a JSON list of names."""
    return {
        "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
        "description": description,
    }


ID = {"id": _text("A handoff id (its `id` header). Default: the work in process.")}
ROLE = {"role": _text("Act for this role (an operator's option). Default: the calling role.")}
WHO = {
    **ROLE,
    "agent": _text("Agent name. Default: $SWARMFORGE_AGENT, else roles.tsv."),
    "conversation": _text("Conversation id. Default: $SWARMFORGE_CONVERSATION."),
}
JSON = {"json": _flag("Make the text the command's --json output (structuredContent has it).")}
ITEMS = {"type": "object", "properties": {"items": {"type": "array"}}, "required": ["items"]}


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
SECTIONS = {
    "objective": "Objective",
    "decisions_made": "Decisions Made",
    "ruled_out_paths": "Ruled-Out Paths",
    "target_scope": "Target Scope",
    "hard_constraints": "Hard Constraints",
    "verification": "Verification",
    "if_blocked": "If Blocked",
}


def draft_text(args: Args) -> str | Outcome:
    """The draft the arguments describe: its header lines and, for a packet, its sections."""
    lines = []
    for field in HEADERS:
        value = args.get(field)
        if isinstance(value, list):
            value = ",".join(value)
        if value is None:
            continue
        if "\n" in value or "\r" in value:
            return Outcome(2, "", f"INVALID_ARGUMENTS: '{field}' must be one line.\n")
        lines.append(f"{field}: {value}\n")
    given = [key for key in SECTIONS if args.get(key) is not None]
    if given and args.get("type") != "packet":
        return Outcome(2, "", f"INVALID_ARGUMENTS: '{given[0]}' is a section of a packet; "
                       "give type 'packet' or leave the sections out.\n")  # fmt: skip
    if args.get("type") == "packet" and given:
        lines.append("\n")
        for key in given:
            lines.append(f"## {SECTIONS[key]}\n{args[key].rstrip(chr(10))}\n")
    return "".join(lines)


def send_handoff(root: str, args: Args) -> Reply:
    text = draft_text(args)
    if isinstance(text, Outcome):
        return Reply(text)
    me = caller(root, args, unknown="Unknown sender role: {}")
    if isinstance(me, Outcome):
        return Reply(me)
    return Reply(helpers.queue_text(me, lambda: text, "send_handoff", lambda: None))


SEND = {
    "type": _text(
        "git_handoff (work on a commit), note (one line) or packet (a brief).",
        enum=["git_handoff", "note", "packet"],
    ),
    "to": _names("Recipient roles, in order: 'cleaner', 'architect,QA' or a list."),
    "priority": _text("Two digits, 00 (first) to 99.", examples=["50"]),
    "task": _text("git_handoff and packet: a short stable task name (≤ 80 characters)."),
    "commit": _text("git_handoff: the commit, `git rev-parse --short=10 HEAD` of your worktree."),
    "message": _text("note: the note, one line of at most 80 characters."),
    "depends_on": _names("Ids of existing handoffs this one depends on (any type)."),
    "blocked_reason": _text("Filed blocked from the start: why (one line, ≤ 200 characters)."),
    "objective": _text("packet: one sentence on one line."),
    "decisions_made": _text("packet: choices already made, not to be re-litigated."),
    "ruled_out_paths": _text("packet: approaches tried and why they failed."),
    "target_scope": _text("packet: the files and areas to change, and what to leave alone."),
    "hard_constraints": _text("packet: what must not break or change."),
    "verification": _text("packet: the commands that show the work is done."),
    "if_blocked": _text("packet: what to do when stuck."),
}


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
    from handoffd.board.commands import report_text

    if args.get("file") is not None and args.get("text") is not None:
        return refused("INVALID_ARGUMENTS: give the report as 'text' or as 'file', not both.")
    if args.get("file") == "-":
        return refused("INVALID_ARGUMENTS: a tool has no stdin; give the report as 'text'.")
    text = args.get("text")
    if text is None:
        text = report_text(args.get("file"))
        if isinstance(text, Outcome):
            return Reply(text)
    status, reason = str(args["status"]).upper(), args.get("reason")
    return _as(root, args, lambda me: helpers.report(me, args.get("id"), status, text, reason))


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
        cycles = "".join(f"{cycle}\n" for cycle in result.cycles)
        text = Outcome(0, json.dumps(items, ensure_ascii=False) + "\n", cycles)
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
        return Reply(Outcome(0, json.dumps(shown, ensure_ascii=False) + "\n"), shown)
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


RESUME_OUT = {
    "type": "object",
    "properties": {
        "source": {"enum": ["live_file", "queue", "git", "cold_start"]},
        "role": {"type": "string"},
        "branch": {"type": "string"},
        "open_question": {"type": ["string", "null"]},
        "state": {"type": ["string", "null"]},
        "next_step": {"type": ["string", "null"]},
        "lines": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["source", "role", "branch", "open_question", "state", "next_step", "lines"],
}
DIGEST_OUT = {
    "type": "object",
    "properties": {
        "markdown": {"type": "string"},
        "receipt": {"type": "object"},
        "gaps": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["markdown", "receipt", "gaps"],
}

TOOLS = (
    Tool(
        "send_handoff",
        "Send work to other roles: checks the draft these fields make and queues it, exactly "
        "as swarm_handoff.sh does with a draft file. git_handoff needs to, priority, task and "
        "commit; note needs to, priority and message; packet needs to, priority, task and "
        "all seven sections. Prints 'HANDOFF QUEUED: <path>'; a bad draft is refused with "
        "every error listed ('HANDOFF INVALID'): fix the fields and send again.",
        SEND,
        send_handoff,
        required=("type", "to", "priority"),
    ),
    Tool(
        "ready_for_next",
        "Take your next work (as ready_for_next.sh): prints a TASK block (task mode) or a "
        "BATCH block (batch mode) with the payload to act on, the same block again if you "
        "already hold work, or NO_TASK when your inbox is empty.",
        {},
        ready_for_next,
    ),
    Tool(
        "done_with_current",
        "Finish the work you hold (as done_with_current.sh): prints COMPLETED: <path> per "
        "file, then takes and prints your next work (or NO_TASK). Send your results with "
        "send_handoff first. Refused with NO_CURRENT_TASK when you hold nothing.",
        {},
        done_with_current,
    ),
    Tool(
        "heartbeat",
        "Show you are alive on long work: your claims stay live (yellow on the board). Every "
        "other tool that acts for you renews it too.",
        WHO,
        heartbeat,
    ),
    Tool(
        "release",
        "Give back the work you hold (or the work holding id): it returns to your inbox's "
        "new/ for a later take, unclaimed. Prints RELEASED: <path> per file.",
        {**ID, **WHO},
        release,
    ),
    Tool(
        "block",
        "Mark your work in process (or the handoff id in your inbox) blocked, with the reason "
        "the operator sees in red on the board. Undo with unblock.",
        {**ID, "reason": _text("Why it is blocked: one line, 1 to 200 characters."), **WHO},
        block,
        required=("reason",),
    ),
    Tool(
        "unblock",
        "Remove the blocked reason from your work in process (or from the handoff id).",
        {**ID, **WHO},
        unblock,
    ),
    Tool(
        "report",
        "Report on your work in Markdown. RUNNING: progress (takes work first if you hold "
        "none); BLOCKED: sets the blocked reason (reason, else the report's first "
        "'Blockers:' line); DONE: stores the report, then finishes as done_with_current.",
        {
            **ID,
            "status": _text("RUNNING, BLOCKED or DONE.", enum=["RUNNING", "BLOCKED", "DONE"]),
            "text": _text("The report, Markdown (at most 64 KiB)."),
            "file": _text("Or: a file holding the report, read by the server."),
            "reason": _text("BLOCKED: the blocked reason (one line, 1 to 200 characters)."),
            **WHO,
        },
        report,
        required=("status",),
    ),
    Tool(
        "note",
        "Record in your live file HANDOFF.md what the next session must not redo: a decision, "
        "a ruled-out approach ('<approach>: <why it failed>') or the command that verifies "
        "the work. Give at least one.",
        {
            "decision": _text("A choice not to be re-litigated."),
            "ruled_out": _text("'<approach>: <why it failed>'."),
            "verify": _text("The command that checks the work."),
            **ROLE,
        },
        note,
    ),
    Tool(
        "status",
        "The board: every open card (red blocked or failed, yellow claimed, orange waiting) "
        "with its detail; structuredContent.items holds one object per card.",
        {
            "role": _text("Only the cards of this role."),
            "all": _flag("Completed (green) cards too."),
            **JSON,
            "window": {
                "type": "number",
                "exclusiveMinimum": 0,
                "default": 60,
                "description": "Minutes a heartbeat keeps a claim live.",
            },
        },
        status,
        output=ITEMS,
    ),
    Tool(
        "resume",
        "Where were we: your role's state and next step, from the live file, the queue or "
        "git, in at most five lines (COLD_START when there is no history). Call it first in "
        "a new session.",
        {**ROLE, **JSON},
        resume,
        output=RESUME_OUT,
    ),
    Tool(
        "digest",
        "A thread's history written from the files (handoffs, commits, files, reports), every "
        "line citing its source, with a receipt of the ids it covers. Give id or task.",
        {
            "id": _text("A handoff id: its task's thread (or the handoff alone)."),
            "task": _text("A task name: every handoff with that task."),
            "max_lines": {"type": "integer", "default": 60, "description": "Line budget (≥ 8)."},
            **JSON,
        },
        digest,
        output=DIGEST_OUT,
    ),
    Tool(
        "carry_forward",
        "What happened here recently: the latest threads, newest activity first, each as a "
        "compact digest with its receipt. structuredContent.items holds the digests.",
        {
            "n": {"type": "integer", "minimum": 1, "default": 5, "description": "How many."},
            "since": _text("Only threads active since this ISO 8601 time."),
            "role": _text("Only threads this role sent or received in."),
            **JSON,
        },
        carry_forward,
        output=ITEMS,
    ),
)
BY_NAME = {tool.name: tool for tool in TOOLS}
