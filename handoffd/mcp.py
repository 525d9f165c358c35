"""`handoffd mcp [ROOT]`: the queue's commands as Model Context Protocol tools on stdio
(docs/protocol.md §12).

A thin adapter over `handoffd.mcp_tools`: it lists the tools with their schemas, checks a
call's arguments against them, runs the tool and wraps its reply — the printed text as
content, the `--json` structure as structuredContent, and a refusal as a result with
`isError` whose text is the command's message (never a protocol error).  Only this module
imports the SDK, and only `handoffd mcp` imports this module (`cli.LAZY`).
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import click
import jsonschema
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from handoffd import mcp_tools
from handoffd.cli import _project, root_option
from handoffd.outcome import Outcome

INSTRUCTIONS = """\
handoffd's queue for your role (the same files and rules as the *.sh helpers).
Start a session with `resume`. Take work with `ready_for_next`, send results with
`send_handoff`, then `done_with_current`. On long work `report` RUNNING; when stuck
`report` BLOCKED (or `block`). `note` keeps decisions for the next session."""


def listing() -> list[types.Tool]:
    """Every tool with its argument schema, and its result schema where it has `--json`."""
    return [
        types.Tool(
            name=tool.name,
            description=tool.description,
            input_schema=tool.input_schema(),
            output_schema=tool.output,
        )
        for tool in mcp_tools.TOOLS
    ]


def problems(tool: mcp_tools.Tool, args: dict[str, Any]) -> str | None:
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
    tool = mcp_tools.BY_NAME.get(name)
    if tool is None:
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name}")
    problem = problems(tool, args)
    if problem is not None:
        return result(mcp_tools.Reply(Outcome(2, "", problem)))
    # Stray prints from anything below must not reach stdout: it carries the protocol.
    with contextlib.redirect_stdout(sys.stderr):
        return result(tool.run(root, args))


def result(reply: mcp_tools.Reply) -> types.CallToolResult:
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
@click.argument("root", required=False, type=click.Path(file_okay=False))
@root_option
def mcp(root: str | None, root_opt: str | None) -> None:
    """Serve the queue's commands as MCP tools on stdio, for the calling role
    ($SWARMFORGE_ROLE, else the working directory's)."""
    serve(_project(root_opt or root))
