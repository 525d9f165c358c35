"""The texts an operation is given, fetched the way each adapter has them; and `run`, an
operation as the command line gives it.

A report's text comes from `--file F|-` on the command line, from the `text` or `file`
argument of a tool, from a form's field on the web board; a draft from a file on the
command line and from the tool's fields over MCP.  Whichever the way, the operation gets
the same values, and a text is never read past its limit (one byte more tells it is over).

`run` is what a click command calls once it has parsed its options, and what `handoffd
status` calls without click when it is given nothing but its own flags (`only_flags`):
click and the modules it pulls in were a third of that command's time, paid by everyone
who watches the board.
"""

from __future__ import annotations

import os
import stat
import sys

from handoffd.core import safeio
from handoffd.core.outcome import Exit, Result, refused
from handoffd.ops import spec
from handoffd.ops.invoke import invoke
from handoffd.ops.spec import Op, Param

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from handoffd.ops.context import Context

ROLE_KEYS = ("role", "agent", "conversation")
DRAFT_LIMIT = 1024 * 1024  # bytes of a draft read at most: far past any valid one
OUTSIDE = "INVALID_ARGUMENTS: file must be inside the worktree"


def from_command_line(op: Op, values: dict[str, Any], context: Context) -> dict[str, Any] | Result:
    """`values` as the command line gave them, with each text read from its file."""
    fetched = dict(values)
    for param in op.arguments("cli"):
        if param.kind == spec.TEXT:
            source = fetched.pop(param.name, None)
            text = param.default if source is None else read_text(source, param)
            if isinstance(text, Result):
                return text
            fetched[param.name] = text
        elif param.kind == spec.DRAFT:
            path = fetched.pop(param.name)
            if not os.path.isfile(path):
                return refused(f"Draft file not found: {path}", Exit.FAILED)
            fetched.update(draft=read_draft(path), name=path, consumed=_remover(path))
    return fetched


def read_text(source: str, param: Param) -> str | Result:
    """The text of file `source` (`-`: stdin).  The person names the file, so a link to it is
    followed and a device read (`/dev/null`); a FIFO or a folder is refused without being
    opened (stdin is the way to pipe a text), and nothing is read past the limit."""
    try:
        data = _stdin(param.limit) if source == "-" else _named(source, param.limit)
    except safeio.TooLarge:
        return _over(param)
    except safeio.Refused as refusal:
        return refused(f"{_token(param, 'REPORT_FILE_INVALID')}: {refusal}")
    except OSError as error:
        if param.token == spec.INVALID_ARGUMENTS:  # a report's file, as it always was
            return refused(f"Cannot read report file: {source}: {error.strerror}", Exit.FAILED)
        return refused(f"{param.token}: cannot read {source}: {error.strerror}")  # an answer's
    return _decoded(data, param)


def _token(param: Param, default: str) -> str:
    """The refusal's token for `param`'s file: its own (INVALID_ANSWER), else `default`."""
    return default if param.token == spec.INVALID_ARGUMENTS else param.token


def read_inside(source: str, worktree: str, param: Param) -> str | Result:
    """A tool's text from `source`, a regular file inside `worktree` (a relative one is taken
    from there) reached through no link: a tool never reads outside the calling role's
    worktree nor blocks on a FIFO (docs/protocol.md §12)."""
    path = os.path.join(worktree, source)
    spellings = (worktree, os.path.realpath(worktree))  # roles.tsv may name it through a link
    below = next((w for w in spellings if safeio.inside(path, w) is not None), None)
    if below is None:
        return refused(OUTSIDE)
    try:
        data = safeio.read_regular(path, param.limit, below=below)
    except safeio.TooLarge:
        return _over(param)
    except (safeio.Refused, ValueError):  # a link on the way, a FIFO, a folder; a NUL
        return refused(OUTSIDE)
    except OSError as error:
        return refused(f"Cannot read report file: {source}: {error.strerror}", Exit.FAILED)
    return _text(data)


def _decoded(data: bytes, param: Param) -> str | Result:
    return _over(param) if len(data) > param.limit else _text(data)


def _text(data: bytes) -> str:
    """A file's text, its bytes kept: one that is not UTF-8 is refused by the operation
    (`spec.not_text`), never stored with U+FFFD in place of what it held."""
    return data.decode("utf-8", "surrogateescape")


def _over(param: Param) -> Result:
    return refused(param.over.format(limit=param.limit))


def _stdin(limit: int) -> bytes:
    return safeio.read_fd(sys.stdin.fileno(), limit + 1)


def _named(path: str, limit: int) -> bytes:
    """At most `limit` + 1 bytes of a regular file, or of a device (`/dev/null`)."""
    _readable(path, os.stat(path).st_mode)  # before the open: a FIFO is never opened
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        _readable(path, os.fstat(fd).st_mode)
        return safeio.read_fd(fd, limit + 1)
    finally:
        os.close(fd)


def _readable(path: str, mode: int) -> None:
    if not (stat.S_ISREG(mode) or stat.S_ISCHR(mode)):
        raise safeio.NotRegular(path, f"{safeio.kind(mode)}, not a file; give '-' to pipe a text")


def read_draft(path: str) -> str:
    """A draft's text; `newline=""`: a packet's bytes travel verbatim (docs/protocol.md §10)."""
    with open(path, encoding="utf-8", errors="replace", newline="") as file:
        return file.read(DRAFT_LIMIT)


def _remover(path: str) -> Any:
    return lambda: os.unlink(path)


# --- a tool's arguments (docs/protocol.md §12) --------------------------------------------


def from_tool(op: Op, values: dict[str, Any], context: Context) -> dict[str, Any] | Result:
    """A tool's arguments as the operation takes them: a text from `text` or from a `file`
    inside the calling role's worktree, a draft from its fields."""
    if any(p.kind == spec.DRAFT for p in op.params):
        draft = draft_text(values)
        if isinstance(draft, Result):
            return draft
        key = values.get("idempotency_key")  # the one argument that is not the draft's
        return {"draft": draft, "name": "send_handoff", "idempotency_key": key}
    fetched = dict(values)
    for param in op.params:
        if param.kind == spec.TEXT:
            text = _tool_text(fetched.pop("text", None), fetched.pop("file", None), param, context)
            if isinstance(text, Result):
                return text
            fetched[param.name] = text
    return fetched


def _tool_text(text: str | None, file: str | None, param: Param, context: Context) -> str | Result:
    if file is not None and text is not None:
        return refused("INVALID_ARGUMENTS: give the report as 'text' or as 'file', not both.")
    if file == "-":
        return refused("INVALID_ARGUMENTS: a tool has no stdin; give the report as 'text'.")
    if file is not None:
        return read_inside(file, context.me.worktree, param)
    return str(param.default) if text is None else text


def draft_text(args: dict[str, Any]) -> str | Result:
    """The draft the arguments describe: its header lines and, for a packet, its sections."""
    from handoffd.queue import packet
    from handoffd.queue.draft import ALLOWED  # a draft's header fields, in a draft's order

    sections = {packet.field(title): title for title in packet.SECTIONS}
    lines = []
    for field in ALLOWED:
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


# --- an operation as the command line gives it ----------------------------------------------


def use_colours() -> bool:
    """Colour codes only on a terminal, and never when `NO_COLOR` is set (no-color.org)."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def run(op: Op, root: str | None, values: dict[str, Any], colours: bool | None = None) -> Result:
    """Run `op` on the options given, its texts read from their files."""
    card = values.get("id") if op.card_names_role else None
    colours = use_colours() if colours is None else colours
    return invoke(op, values, from_command_line, root=root, who=ROLE_KEYS, card=card,
                  colours=colours)  # fmt: skip


def only_flags(op: Op, args: list[str]) -> dict[str, Any] | None:
    """The values `op`'s click command passes `run` when `args` are only its own flags
    (`--json`, `--all`), each once, and no `HANDOFFD_ROOT` names a root: the table's
    defaults with those flags set.  None for anything else (an option with a value, a
    ROOT, `--help`, `--watch`, a repeat, a typo): click parses that, as ever."""
    cli = op.arguments("cli")
    flags = {p.option: p.name for p in cli if p.kind == spec.FLAG and not p.flag}
    if os.environ.get("HANDOFFD_ROOT") or len(set(args)) != len(args):
        return None
    if not all(arg in flags for arg in args):
        return None
    values = {p.name: p.default for p in cli if p.name != "root"}
    return values | {flags[arg]: True for arg in args}
