"""The texts an operation is given, fetched the way each adapter has them.

A report's text comes from `--file F|-` on the command line, from the `text` or `file`
argument of a tool, from a form's field on the web board; a draft from a file on the
command line and from the tool's fields over MCP.  Whichever the way, the operation gets
the same values, and a text is never read past its limit (one byte more tells it is over).
"""

from __future__ import annotations

import os
import sys

from handoffd.ops import spec
from handoffd.ops.spec import Op
from handoffd.outcome import Exit, Result, refused

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from handoffd.ops.context import Context

DRAFT_LIMIT = 1024 * 1024  # bytes of a draft read at most: far past any valid one


def from_command_line(op: Op, values: dict[str, Any]) -> dict[str, Any] | Result:
    """`values` as the command line gave them, with each text read from its file."""
    fetched = dict(values)
    for param in op.arguments("cli"):
        if param.kind == spec.TEXT:
            source = fetched.pop(param.name, None)
            if source is None:
                fetched[param.name] = param.default
                continue
            text = read_text(source, param.limit)
            if isinstance(text, Result):
                return text
            fetched[param.name] = text
        elif param.kind == spec.DRAFT:
            path = fetched.pop(param.name)
            if not os.path.isfile(path):
                return refused(f"Draft file not found: {path}", Exit.FAILED)
            fetched.update(draft=read_draft(path), name=path, consumed=_remover(path))
    return fetched


def read_text(source: str, limit: int) -> str | Result:
    """The text of file `source` (`-`: stdin), at most `limit` + 1 bytes of it."""
    try:
        if source == "-":
            data = sys.stdin.buffer.read(limit + 1)
        else:
            with open(source, "rb") as file:
                data = file.read(limit + 1)
    except OSError as error:
        return refused(f"Cannot read report file: {source}: {error.strerror}", Exit.FAILED)
    return data.decode("utf-8", "replace")


def read_draft(path: str) -> str:
    """A draft's text; `newline=""`: a packet's bytes travel verbatim (docs/protocol.md §10)."""
    with open(path, encoding="utf-8", errors="replace", newline="") as file:
        return file.read(DRAFT_LIMIT)


def _remover(path: str) -> Any:
    return lambda: os.unlink(path)


# --- a tool's arguments (docs/protocol.md §12) --------------------------------------------

DRAFT_HEADERS = ("type", "to", "priority", "task", "commit", "message", "depends_on",
                 "blocked_reason")  # fmt: skip


def from_tool(op: Op, values: dict[str, Any], context: Context) -> dict[str, Any] | Result:
    """A tool's arguments as the operation takes them: a text from `text` or from a `file`
    inside the calling role's worktree, a draft from its fields."""
    if any(p.kind == spec.DRAFT for p in op.params):
        draft = draft_text(values)
        return draft if isinstance(draft, Result) else {"draft": draft, "name": "send_handoff"}
    fetched = dict(values)
    for param in op.params:
        if param.kind == spec.TEXT:
            text = _tool_text(fetched.pop("text", None), fetched.pop("file", None), param, context)
            if isinstance(text, Result):
                return text
            fetched[param.name] = text
    return fetched


def _tool_text(
    text: str | None, file: str | None, param: spec.Param, context: Context
) -> str | Result:
    if file is not None and text is not None:
        return refused("INVALID_ARGUMENTS: give the report as 'text' or as 'file', not both.")
    if file == "-":
        return refused("INVALID_ARGUMENTS: a tool has no stdin; give the report as 'text'.")
    if file is None:
        return param.default if text is None else text  # type: ignore[return-value]
    return read_text(file, param.limit)


def draft_text(args: dict[str, Any]) -> str | Result:
    """The draft the arguments describe: its header lines and, for a packet, its sections."""
    from handoffd.continuity import packet

    sections = {packet.field(title): title for title in packet.SECTIONS}
    lines = []
    for field in DRAFT_HEADERS:
        value = args.get(field)
        if value is None:
            continue
        value = ",".join(value) if isinstance(value, list) else str(value)
        if "\n" in value or "\r" in value:
            return refused(f"INVALID_ARGUMENTS: '{field}' must be one line.")
        lines.append(f"{field}: {value}\n")
    given = [key for key in sections if args.get(key) is not None]
    if given and args.get("type") != "packet":
        return refused(f"INVALID_ARGUMENTS: '{given[0]}' is a section of a packet; "
                       "give type 'packet' or leave the sections out.")  # fmt: skip
    if args.get("type") == "packet" and given:
        lines.append("\n" + packet.compose({key: args[key] for key in given}))
    return "".join(lines)
