"""Handoff files for a throwaway project: named as swarm_handoff names them, headed as the
daemon stamps them, and either written plainly (set-up, not the path being measured or
tested: no fsync) or queued through handoffd's own outbox code."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

from handoffd.core import handoff as hf
from handoffd.core.config import Role


def handoff_id(sender: str, seq: int, when: float | None = None) -> str:
    """The id swarm_handoff gives `sender`'s handoff number `seq` sent at `when`."""
    return hf.compose_id(hf.id_stamp(when), seq, sender)


def queued_name(ident: str, recipients: Sequence[str], priority: str = "50") -> str:
    """The queue file name of handoff `ident` (docs/protocol.md §2)."""
    return hf.compose_name(priority, ident, recipients)


def queued(
    ident: str,
    sender: str,
    recipients: Sequence[str],
    body: str,
    *headers: tuple[str, str],
    priority: str = "50",
    when: float | None = None,
) -> tuple[str, hf.Handoff]:
    """A queued handoff's file name and contents: `id`, `from`, `to`, `priority`, then
    `headers` in the order given, then `created_at`.  `stamped` makes it a delivered copy."""
    fields = [("id", ident), ("from", sender), ("to", ",".join(recipients)),
              ("priority", priority), *headers, ("created_at", hf.iso_now(when))]  # fmt: skip
    return queued_name(ident, recipients, priority), hf.Handoff(fields, body)


def stamped(handoff: hf.Handoff, recipient: str, when: float | None = None) -> hf.Handoff:
    """The copy the daemon delivers to `recipient`: the headers it adds at the end."""
    copy = hf.Handoff(list(handoff.headers), handoff.body)
    copy.set("recipient", recipient)
    copy.set("enqueued_at", hf.iso_now(when))
    return copy


def write(path: str | Path, data: bytes, mtime: float | None = None) -> str:
    """Write `data` at `path` (its folders made), neither fsynced nor atomic; `mtime` ages it."""
    path = os.fspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as file:
        file.write(data)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def queue_note(
    roles: dict[str, Role],
    sender: str,
    recipients: list[str],
    priority: str = "50",
    message: str = "hello",
    now: float | None = None,
) -> str:
    """Queue a note the way `swarm_handoff` does (same code, no process); its outbox path."""
    from handoffd.queue import outbox  # only this helper queues through the package's own code
    from handoffd.queue.draft import Draft

    headers = {"type": "note", "to": ",".join(recipients), "priority": priority}
    headers["message"] = message
    draft = Draft(headers, list(recipients), None)
    return outbox.queue(roles[sender], draft, time.time() if now is None else now)
