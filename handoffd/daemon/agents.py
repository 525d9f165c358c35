"""The agents' command lines `up` was given, kept for the next `up` (docs/protocol.md §16).

`handoffd up --agent claude='claude --model x'` starts the roles whose agent is `claude`
with that command line.  The next plain `handoffd up` (after `init` added a role, or after
`down`) must not ask for it again: the lines are kept in `.swarmforge/agents.tsv`, one
`<agent name> TAB <command line>` a line, beside the conf and never under `~`.  It is this
machine's (a path to a harness is), so it is kept out of git.  Read back it is untrusted,
as everything under `.swarmforge/` is: a regular file only, at most `LIMIT` bytes, a line
that is not a name and a printable command is skipped.
"""

from __future__ import annotations

import os

from handoffd.core import config, durable, safeio

FILE = os.path.join(config.SWARMFORGE, "agents.tsv")
LIMIT = 64 * 1024  # bytes of the file ever read
HEADER = "# the agents' command lines `handoffd up --agent NAME=COMMAND` was given\n"


def path(root: str) -> str:
    return os.path.join(root, FILE)


def load(root: str) -> dict[str, str]:
    """The command line kept for each agent name; {} when there is no file (or it is not
    a regular file of sensible size, or not UTF-8)."""
    try:
        text = safeio.read_regular(path(root), LIMIT).decode("utf-8")
    except (OSError, safeio.Refused, UnicodeDecodeError):
        return {}
    kept = {}
    for line in text.splitlines():
        name, tab, command = line.partition("\t")
        if tab and config.valid_role_name(name) and command.strip() and command.isprintable():
            kept[name] = command
    return kept


def save(root: str, given: dict[str, str]) -> str | None:
    """Keep `given` (agent name → command line) over what was kept, durably; the file's path,
    or None when nothing changed.  A command line that cannot be kept on one line (a line
    end or a control character in it) is not kept: the next `up` asks for it again."""
    fit = {name: cmd for name, cmd in given.items() if cmd.strip() and cmd.isprintable()}
    before = load(root)
    after = {**before, **fit}
    if after == before:
        return None
    lines = "".join(f"{name}\t{command}\n" for name, command in sorted(after.items()))
    durable.replace(path(root), (HEADER + lines).encode("utf-8"))
    return path(root)


def said(role: str, command: str) -> str:
    """`coder: agent from .swarmforge/agents.tsv: claude --model x`: what `up` reused."""
    return f"{role}: agent from {FILE}: {command}"
