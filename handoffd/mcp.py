"""`handoffd mcp [ROOT]`: the queue's commands as Model Context Protocol tools on stdio
(docs/protocol.md §12).

A thin adapter over `handoffd.mcp_tools` (what each tool runs): it lists the tools with
their schemas, checks a call's arguments against them, runs the tool and wraps its reply:
the printed text as content, the `--json` structure as structuredContent, and a refusal as
a result with `isError` whose text is the command's message (never a protocol error).  Only
this module imports the SDK, and only `handoffd mcp` imports this module (`cli.LAZY`).
"""

from __future__ import annotations

import contextlib
import sys
import traceback
from collections.abc import Callable
from typing import Any

import click
import jsonschema
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from handoffd import mcp_tools as ops
from handoffd.cli import _project, root_argument
from handoffd.mcp_tools import Args
from handoffd.outcome import Outcome

INSTRUCTIONS = """\
handoffd's queue for your role (the same files and rules as the *.sh helpers).
Start a session with `resume`. Take work with `ready_for_next`, send results with
`send_handoff`, then `done_with_current`. On long work `report` RUNNING; when stuck
`report` BLOCKED (or `block`). `note` keeps decisions for the next session."""


class Tool:
    """One tool: its name, what an agent reads about it, its argument schema and its run."""

    __slots__ = ("description", "name", "output", "properties", "required", "run")

    def __init__(
        self,
        name: str,
        description: str,
        properties: dict[str, Any],
        run: Callable[[str, Args], ops.Reply],
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

SEND = {
    "type": _text(
        "git_handoff (work on a commit), note (one line) or packet (a brief).",
        enum=["git_handoff", "note", "packet"],
    ),
    "to": _names("Recipient roles, in order: 'cleaner', 'architect,QA' or a list."),
    "priority": {
        "type": ["string", "integer"],
        "description": "Two digits, 00 (first) to 99: '50' (a number is written as it reads).",
    },
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
    "idempotency_key": _text(
        "Makes a retry safe: a second call with this key and the same fields returns the "
        "first call's path and queues nothing (for 24 hours at least); the same key with "
        "other fields is refused (IDEMPOTENCY_CONFLICT). Use a new key for each handoff.",
        minLength=1,
        maxLength=200,
    ),
}


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
        "every error listed ('HANDOFF INVALID'): fix the fields and send again. Give an "
        "idempotency_key to retry safely after a lost reply.",
        SEND,
        ops.send_handoff,
        required=("type", "to", "priority"),
    ),
    Tool(
        "ready_for_next",
        "Take your next work (as ready_for_next.sh): prints a TASK block (task mode) or a "
        "BATCH block (batch mode) with the payload to act on, the same block again if you "
        "already hold work, or NO_TASK when your inbox is empty.",
        {},
        ops.ready_for_next,
    ),
    Tool(
        "done_with_current",
        "Finish the work you hold (as done_with_current.sh): prints COMPLETED: <path> per "
        "file, then takes and prints your next work (or NO_TASK). Send your results with "
        "send_handoff first. Refused with NO_CURRENT_TASK when you hold nothing.",
        {},
        ops.done_with_current,
    ),
    Tool(
        "heartbeat",
        "Show you are alive on long work: your claims stay live (yellow on the board). Every "
        "other tool that acts for you renews it too.",
        WHO,
        ops.heartbeat,
    ),
    Tool(
        "release",
        "Give back the work you hold (or the work holding id): it returns to your inbox's "
        "new/ for a later take, unclaimed. Prints RELEASED: <path> per file.",
        {**ID, **WHO},
        ops.release,
    ),
    Tool(
        "block",
        "Mark your work in process (or the handoff id in your inbox) blocked, with the reason "
        "the operator sees in red on the board. Undo with unblock.",
        {**ID, "reason": _text("Why it is blocked: one line, 1 to 200 characters."), **WHO},
        ops.block,
        required=("reason",),
    ),
    Tool(
        "unblock",
        "Remove the blocked reason from your work in process (or from the handoff id).",
        {**ID, **WHO},
        ops.unblock,
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
        ops.report,
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
        ops.note,
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
        ops.status,
        output=ITEMS,
    ),
    Tool(
        "resume",
        "Where were we: your role's state and next step, from the live file, the queue or "
        "git, in at most five lines (COLD_START when there is no history). Call it first in "
        "a new session.",
        {**ROLE, **JSON},
        ops.resume,
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
        ops.digest,
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
        ops.carry_forward,
        output=ITEMS,
    ),
)
BY_NAME = {tool.name: tool for tool in TOOLS}


def listing() -> list[types.Tool]:
    """Every tool with its argument schema, and its result schema where it has `--json`."""
    return [
        types.Tool(
            name=tool.name,
            description=tool.description,
            input_schema=tool.input_schema(),
            output_schema=tool.output,
        )
        for tool in TOOLS
    ]


def problems(tool: Tool, args: dict[str, Any]) -> str | None:
    """What is wrong with the arguments, checked against the tool's schema (None: nothing)."""
    validator = jsonschema.Draft202012Validator(tool.input_schema())
    found = sorted(validator.iter_errors(args), key=lambda error: list(error.path))
    if not found:
        return None
    where = [".".join(str(part) for part in error.path) or tool.name for error in found]
    lines = [f"{at}: {error.message}" for at, error in zip(where, found, strict=True)]
    return "INVALID_ARGUMENTS: " + "; ".join(lines) + "\n"


def call(root: str, name: str, args: dict[str, Any]) -> types.CallToolResult:
    """Run tool `name` for the project at `root`; an unknown tool is a protocol error."""
    tool = BY_NAME.get(name)
    if tool is None:
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name}")
    problem = problems(tool, args)
    if problem is not None:
        return result(ops.Reply(Outcome(2, "", problem)))
    # Stray prints from anything below must not reach stdout: it carries the protocol.
    with contextlib.redirect_stdout(sys.stderr):
        try:
            return result(tool.run(root, args))
        except Exception as error:  # a bug below is a tool error, never a protocol one
            return result(ops.Reply(Outcome(1, "", unexpected(name, error))))


def unexpected(name: str, error: Exception) -> str:
    """The one line a tool answers when something below it raised: the traceback goes to
    the server's stderr (its log), the agent gets the error's type and message."""
    traceback.print_exception(error, file=sys.stderr)
    message = " ".join(str(error).split()) or "no message"
    return f"INTERNAL_ERROR: {name} failed: {type(error).__name__}: {message}\n"


def result(reply: ops.Reply) -> types.CallToolResult:
    """The reply as a tool result: stdout, then stderr, each one text block."""
    outcome = reply.outcome
    texts = [text for text in (outcome.stdout, outcome.stderr) if text] or [""]
    return types.CallToolResult(
        content=[types.TextContent(text=text) for text in texts],
        structured_content=reply.structured if outcome.ok else None,
        is_error=not outcome.ok,
        _meta={"exit_code": outcome.code},
    )


def server(root: str) -> Server[Any]:
    """The MCP server of the project at `root`."""

    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listing())

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return call(root, params.name, dict(params.arguments or {}))

    from importlib.metadata import version

    return Server(
        "handoffd",
        version=version("handoffd"),
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def serve(root: str) -> None:
    """Serve the tools on stdin and stdout until the client closes them."""
    import anyio

    app = server(root)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await app.run(read, write, app.create_initialization_options())

    anyio.run(main)


@click.command("mcp")
@root_argument
def mcp(root: str | None) -> None:
    """Serve the queue's commands as MCP tools on stdio, for the calling role
    ($SWARMFORGE_ROLE, else the working directory's)."""
    serve(_project(root))
