"""The blocks the helpers print (docs/protocol.md §4): pure functions from items to text."""

from __future__ import annotations

from handoffd.core.handoff import (
    PRIORITY,
    REOPENED_AT,
    REOPENED_BY,
    REOPENED_REASON,
    SENDER,
    SENT_BY,
    TASK,
    TYPE,
    Handoff,
)
from handoffd.queue.items import DEFAULT_PRIORITY, Item

TYPE_CHECKING = False  # helpers import this module: no `typing` at run time
if TYPE_CHECKING:
    from collections.abc import Callable


def task(item: Item, notes: list[str] | None = None) -> str:
    """A TASK block; the payload is the body verbatim, with no newline added.  `notes`:
    the lines of docs/protocol.md §13 and §15 (reopened, a blocked reason, dependencies,
    an answer), shown between TASK_NAME and PAYLOAD only when there are any (a commit
    missing is said on stderr: `ops.queue.Ready.missing`)."""
    h: Handoff = item.handoff
    lines = [
        f"TASK: {item.path}",
        f"FROM: {h.get(SENDER) or 'unknown'}",
        f"TYPE: {h.get(TYPE) or 'unknown'}",
        f"PRIORITY: {h.get(PRIORITY) or DEFAULT_PRIORITY}",
    ]
    if h.get(TASK) is not None:
        lines.append(f"TASK_NAME: {h.get(TASK)}")
    if h.get(SENT_BY) is not None:  # the person who gave the work (docs/protocol.md §18)
        lines.append(f"SENT_BY: {h.get(SENT_BY)}")
    lines += notes or ()
    lines.append("PAYLOAD:")
    return "\n".join(lines) + "\n" + h.body


def reopened(headers: Handoff | dict[str, str]) -> str | None:
    """`REOPENED: <reason, or "reopened"> (<by>, <reopened_at>)` for a copy an operator put
    back (docs/protocol.md §15), or None; raw header text: the caller makes it printable.
    A copy reopened before `reopened_by` was kept says `unknown`, as FROM does."""
    at = headers.get(REOPENED_AT)
    if not at:
        return None
    why = headers.get(REOPENED_REASON) or "reopened"
    return f"REOPENED: {why} ({headers.get(REOPENED_BY) or 'unknown'}, {at})"


def batch(
    directory: str, items: list[Item], notes: Callable[[Item], list[str]] | None = None
) -> str:
    """A BATCH block: count, the first item's priority, then each item's TASK block (with
    its `notes`, as `task`)."""
    first = items[0].handoff.get(PRIORITY) if items else None
    head = f"BATCH: {directory}\nCOUNT: {len(items)}\nPRIORITY: {first or DEFAULT_PRIORITY}\n"
    return head + "".join(
        f"\nBATCH_ITEM: {n}\n{task(item, notes(item) if notes else None)}"
        for n, item in enumerate(items, 1)
    )


def completed(paths: list[str]) -> str:
    return "".join(f"COMPLETED: {path}\n" for path in paths)
