"""Driving `handoffd mcp` the way an agent harness does: the SDK's own stdio client and
session, against a real server process, from plain (synchronous) test code."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import mcp_types as types
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession, StdioServerParameters, stdio_client

from tests.conftest import BIN, Project, helper_env


class Agent:
    """One client session with one server: `call` a tool, `tools` to list them.  A call that
    gets no answer within `timeout` seconds fails (the client raises), never stalls a test."""

    def __init__(self, portal: BlockingPortal, session: ClientSession) -> None:
        self.portal = portal
        self.session = session
        self.timeout = 60.0

    def call(self, name: str, **args: Any) -> types.CallToolResult:
        return self.portal.call(self.session.call_tool, name, args, self.timeout)

    def call_within(self, seconds: float, name: str, **args: Any) -> types.CallToolResult:
        """`call`, failing after `seconds` without an answer (a server that hangs or died)."""
        return self.portal.call(partial(self.session.call_tool, name, args, seconds))

    def tools(self) -> list[types.Tool]:
        return self.portal.call(self.session.list_tools).tools


@contextmanager
def agent(
    project: Project,
    role: str | None,
    log: Path,
    cwd: Path | None = None,
    args: tuple[str, ...] = (),
) -> Iterator[Agent]:
    """A server started as a harness would (`handoffd mcp`, SWARMFORGE_ROLE set or not,
    in `cwd`, default the role's worktree), with a client session open on it."""
    server = StdioServerParameters(
        command=str(Path(BIN) / "handoffd"),
        args=["mcp", *args],
        env=helper_env(role),
        cwd=str(cwd or project.worktrees.get(role or "coder", project.root)),
    )
    with connect(server, log) as session:
        yield session


@contextmanager
def connect(server: StdioServerParameters, log: Path) -> Iterator[Agent]:
    """A client session on the server these parameters start (its stderr goes to `log`)."""
    with open(log, "a", encoding="utf-8") as errlog, start_blocking_portal() as portal:
        stack = ExitStack()
        try:
            streams = portal.wrap_async_context_manager(stdio_client(server, errlog=errlog))
            read, write = stack.enter_context(streams)
            opened = portal.wrap_async_context_manager(ClientSession(read, write))
            session = stack.enter_context(opened)
            portal.call(session.initialize)
            # A failing assertion in the test is raised as itself, not inside the
            # client's task groups: the session and the server close as on success.
            yield Agent(portal, session)
        finally:
            stack.close()


def text(result: types.CallToolResult) -> str:
    """Every text block of a result, joined (stdout, then stderr)."""
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


def texts(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


def cli_json(project: Project, role: str | None, *args: str) -> Any:
    """What `handoffd <args> --json` prints, parsed."""
    done = project.run("handoffd", *args, "--json", role=role, cwd=project.root)
    assert done.code == 0, done.err
    return json.loads(done.out)
