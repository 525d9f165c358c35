"""`handoffd mcp [ROOT]`: the table's operations as Model Context Protocol tools on stdio
(docs/protocol.md §12).

Each tool is made from its operation's declaration: its name, its description, its
argument schema (checked before the call), its result schema where the command has
`--json`.  A call resolves the calling role the way the command does, runs the same
operation and wraps its result: the printed text as content, the `--json` structure as
structuredContent, and a refusal as a result with `isError` whose text is the command's
message (never a protocol error).  Only this module imports the SDK, and only `handoffd
mcp` imports this module.
"""

from __future__ import annotations

import contextlib
import math
import sys
import traceback
from typing import Any

import jsonschema
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from handoffd.adapters import sources
from handoffd.core import config
from handoffd.core.outcome import Exit, Result, refused
from handoffd.ops import spec
from handoffd.ops.context import Context, card_role, resolve_context
from handoffd.ops.invoke import invoke
from handoffd.ops.spec import Op, Param
from handoffd.ops.table import TOOLS

INSTRUCTIONS = """\
handoffd's queue for your role (the same files and rules as the *.sh helpers).
Start a session with `resume`. Take work with `ready_for_next`, send results with
`send_handoff`, then `done_with_current`. On long work `report` RUNNING; when stuck
`report` BLOCKED (or `block`) with the question itself; when woken, `ready_for_next` shows
the operator's ANSWER. `note` keeps decisions for the next session.
Your client may show these tools by name only until you search for them: search for
handoffd's `ready_for_next`, `send_handoff`, `done_with_current`, `report`, `resume`."""
WHO_KEYS = ("agent", "conversation")  # who runs it; the role is the server's own


# --- schemas --------------------------------------------------------------------------------


def input_schema(op: Op) -> dict[str, Any]:
    """The JSON schema of the tool's arguments, from its operation's parameters."""
    properties: dict[str, Any] = {}
    required = []
    for param in op.arguments("tool"):
        properties.update(_properties(param))
        if param.required:
            required.append(param.name)
    schema: dict[str, Any] = {"type": "object", "properties": properties,
                              "additionalProperties": False}  # fmt: skip
    if required:
        schema["required"] = required
    return schema


def _properties(param: Param) -> dict[str, Any]:
    if param.kind == spec.TEXT:  # a tool gives a text inline, or names a file in its worktree
        return {
            "text": {"type": "string", "description": param.help},
            "file": {"type": "string", "description": "Or: a file inside your worktree "
                     "holding it, read by the server."},
        }  # fmt: skip
    schema: dict[str, Any] = {"description": param.help}
    if param.kind == spec.NAMES:  # one name, a comma-separated list, or a JSON list
        schema["anyOf"] = [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]
    elif param.kind == spec.CHOICE:
        schema.update(type="string", enum=list(param.choices))
    else:
        schema["type"] = {spec.INT: "integer", spec.FLOAT: "number", spec.FLAG: "boolean"}.get(
            param.kind, "string"
        )
    schema.update(param.schema or {})
    if param.minimum is not None:
        schema["exclusiveMinimum" if param.open_minimum else "minimum"] = param.minimum
    if param.default not in (None, ""):
        schema["default"] = param.default
    return {param.name: schema}


def listing() -> list[types.Tool]:
    """Every tool with its argument schema, and its result schema where it has `--json`."""
    return [
        types.Tool(
            name=name,
            description=op.about or op.help,
            input_schema=input_schema(op),
            output_schema=op.output,
        )
        for name, op in TOOLS.items()
    ]


def problems(op: Op, args: dict[str, Any]) -> str | None:
    """What is wrong with the arguments, checked against the tool's schema (None: nothing)."""
    validator = jsonschema.Draft202012Validator(input_schema(op))
    found = sorted(validator.iter_errors(args), key=lambda error: list(error.path))
    where = [".".join(str(part) for part in error.path) or op.tool_name for error in found]
    lines = [f"{at}: {error.message}" for at, error in zip(where, found, strict=True)]
    # JSON as Python reads it carries NaN and Infinity, which pass every bound of a schema
    # (NaN compares false with all): a number is finite, as on the command line
    lines += [f"{name}: {value!r} is not a finite number" for name, value in args.items()
              if isinstance(value, float) and not math.isfinite(value)]  # fmt: skip
    return "INVALID_ARGUMENTS: " + "; ".join(lines) if lines else None


# --- calls ----------------------------------------------------------------------------------


def call(root: str, name: str, args: dict[str, Any]) -> types.CallToolResult:
    """Run tool `name` for the project at `root`; an unknown tool is a protocol error."""
    op = TOOLS.get(name)
    if op is None:
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name}")
    args = dict(args)
    problem = foreign_role(op, root, args) or problems(op, args)
    if problem is not None:
        return result(op, refused(problem))
    # Stray prints from anything below must not reach stdout: it carries the protocol.
    with contextlib.redirect_stdout(sys.stderr):
        try:
            return result(op, run(op, root, args))
        except Exception as error:  # a bug below is a tool error, never a protocol one
            return result(op, Result(Exit.FAILED, "", unexpected(name, error)))


def foreign_role(op: Op, root: str, args: dict[str, Any]) -> str | None:
    """The refusal of a call that would act for another role than the server's own
    (docs/protocol.md §12, §15): a `role` argument naming another (one naming the server's
    own is dropped: it changes nothing), or an `id` written as another role's card
    (`<id>@<role>`) for a tool whose command takes it to name the role acted for.  None
    when the call acts for the server's role only.  A tool whose `role` is a filter of
    what it shows (`status`, `carry_forward`) keeps it: it acts for no role."""
    wanted = None if "role" in input_schema(op)["properties"] else args.get("role")
    card = args.get("id") if op.card_names_role else None
    if wanted is None and not (isinstance(card, str) and "@" in card):
        return None
    context: Any = None
    try:
        context = resolve_context(root)
        me = context.me.name
    except config.ConfigError as error:  # a server for no role acts for none
        me = f"no role ({' '.join(str(error).split())})"
    if wanted is not None:
        if wanted != me:
            return (f"INVALID_ARGUMENTS: role: a tool takes no role; this server acts for "
                    f"{me}, never for {wanted!r} (start a server for that role)")  # fmt: skip
        del args["role"]
    other = card_role(card, context.roles) if context is not None else None
    if other is not None and other != me:
        return (f"INVALID_ARGUMENTS: id: {card!r} is a card of {other}; this server acts for "
                f"{me}, never for {other}")  # fmt: skip
    return None


def unexpected(name: str, error: Exception) -> str:
    """The one line a tool answers when something below it raised: the traceback goes to
    the server's stderr (its log), the agent gets the error's type and message."""
    traceback.print_exception(error, file=sys.stderr)
    message = " ".join(str(error).split()) or "no message"
    return f"INTERNAL_ERROR: {name} failed: {type(error).__name__}: {message}\n"


def run(op: Op, root: str, args: dict[str, Any]) -> Result:
    """The operation the tool stands for, run as its command runs it.  The role acted for
    is the server's own, as §12 finds it ($SWARMFORGE_ROLE, else the working directory):
    never one a call names, nor the role of a card it gives (`foreign_role` refused those
    already)."""
    return invoke(op, args, _fetched, root=root, who=WHO_KEYS, tool=True)


def _fetched(op: Op, values: dict[str, Any], context: Context) -> dict[str, Any] | Result:
    """A tool's texts fetched; an answer says which role gave it, unless the call does."""
    fetched = sources.from_tool(op, values, context)
    says_by = any(p.name == "by" for p in op.arguments("tool"))
    if says_by and isinstance(fetched, dict) and fetched.get("by") is None:
        fetched["by"] = _server_role(context.root)
    return fetched


def _server_role(root: str) -> str | None:
    """The name of the role the server acts for; None when it acts for none."""
    try:
        return resolve_context(root).me.name
    except config.ConfigError:
        return None


def result(op: Op, outcome: Result) -> types.CallToolResult:
    """The result as a tool result: stdout, then stderr, each one text block."""
    texts = [sendable(text) for text in (outcome.out, outcome.err) if text] or [""]
    data = sendable(outcome.data)
    structured = {"items": data} if isinstance(data, list) else data
    return types.CallToolResult(
        content=[types.TextContent(text=text) for text in texts],
        structured_content=structured if outcome.ok and op.output else None,
        is_error=not outcome.ok,
        _meta={"exit_code": outcome.code},
    )


def sendable(value: Any) -> Any:
    """`value` with every lone surrogate (a file name that is not UTF-8, as `os` decodes
    it) spelled as its escape `\\udcc3`: the SDK cannot encode one, and a reply it cannot
    encode is never sent at all, so the client would wait for it for ever."""
    if isinstance(value, str):
        if value.isprintable() or value.isascii():  # nearly always
            return value
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {sendable(key): sendable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [sendable(item) for item in value]
    return value


# --- the wire ---------------------------------------------------------------------------------


class Reparsed:
    """The SDK's stream of incoming messages, with the lines its JSON parser refuses read
    again by Python's.  A JSON string may spell a lone surrogate (`"\\ud800"`): valid JSON
    to Python, invalid to the SDK, which then drops the line without a word, so the
    client waits for ever for its reply.  Read again, the call reaches its tool, and the
    operation refuses the text (`spec.not_text`) with the command's message."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    @property
    def last_context(self) -> Any:  # the sender's context, which the SDK reads back
        return getattr(self.inner, "last_context", None)

    async def receive(self) -> Any:
        return reparsed(await self.inner.receive())

    def __aiter__(self) -> Reparsed:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> Reparsed:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def reparsed(item: Any) -> Any:
    """A line the SDK refused as invalid JSON, as the message Python's parser reads in it;
    anything else (a message, or a line no parser reads) as it came."""
    import json

    from mcp.shared.message import SessionMessage
    from pydantic import ValidationError

    if not isinstance(item, ValidationError):
        return item
    errors = item.errors()
    line = errors[0]["input"] if errors and errors[0]["type"] == "json_invalid" else None
    if not isinstance(line, str | bytes):
        return item
    try:
        message = json.loads(line)
        return SessionMessage(types.jsonrpc_message_adapter.validate_python(message, by_name=False))
    # not JSON to Python either (or nested past its depth: RecursionError, which would end
    # the server): the SDK's own way
    except (ValueError, ValidationError, RecursionError):
        return item


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
            await app.run(Reparsed(read), write, app.create_initialization_options())

    anyio.run(main)
