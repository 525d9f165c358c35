"""A role's heartbeat: `H/heartbeat`, whose mtime says when the role last showed life.

The file holds two lines, `agent: <name>` and `conversation: <id or empty>`
(docs/protocol.md §8).  Every helper renews it, so it costs one `os.utime` when
nothing changed, and imports `os` only.  It is a liveness hint, not a record: it is
replaced atomically (a reader never sees half of it) but never fsynced.
"""

from __future__ import annotations

import os

NAME = "heartbeat"


class Heartbeat:
    """Who last showed life in a role (`agent`, `conversation`) and when (`at`, epoch seconds)."""

    __slots__ = ("agent", "at", "conversation")

    def __init__(self, agent: str, conversation: str, at: float) -> None:
        self.agent = agent
        self.conversation = conversation
        self.at = at

    def __repr__(self) -> str:
        return f"Heartbeat({self.agent!r}, {self.conversation!r}, at={self.at})"


def content(agent: str, conversation: str) -> bytes:
    """The file's bytes for this agent and conversation."""
    return f"agent: {agent}\nconversation: {conversation}".rstrip(" ").encode() + b"\n"


def renew(handoffs: str, agent: str, conversation: str) -> None:
    """Mark the role alive now: touch the file, or rewrite it when its content changes."""
    path = os.path.join(handoffs, NAME)
    data = content(agent, conversation)
    if _current(path) == data:
        os.utime(path)
        return
    # write beside it and rename: a reader sees the old content or the new, never a mix
    temp = os.path.join(handoffs, f".{NAME}.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(temp, flags, 0o644)
    except FileNotFoundError:  # a role that has never had mail has no handoff directory yet
        os.makedirs(handoffs, exist_ok=True)
        fd = os.open(temp, flags, 0o644)
    try:
        os.write(fd, data)  # a few dozen bytes: one write is never short on a regular file
    finally:
        os.close(fd)
    os.rename(temp, path)


def _current(path: str) -> bytes | None:
    try:
        with open(path, "rb") as file:
            return file.read(4096)
    except OSError:
        return None


def read(handoffs: str) -> Heartbeat | None:
    """The role's heartbeat, or None when it has never beaten."""
    path = os.path.join(handoffs, NAME)
    try:
        with open(path, "rb") as file:
            text = file.read(4096).decode("utf-8", "replace")
            at = os.fstat(file.fileno()).st_mtime
    except OSError:
        return None
    fields = {}
    for line in text.split("\n"):
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return Heartbeat(fields.get("agent", ""), fields.get("conversation", ""), at)
