"""The live file `<worktree>/.swarmforge/HANDOFF.md`: where a role's work stands, at most 30 lines.

handoffd rewrites it after every state change of the role (docs/protocol.md §10): the
first two lines, `Next Step`, `In-Flight` and `Open Questions` are its own; `Ruled Out`,
`Decisions` and `Verify` belong to the agent and are carried over verbatim, and fitted
into the 30 lines by the budget renderer's oldest-first cut.  Rendering is pure
(`render`); `write` replaces the file atomically; `after_step` rewrites it from the
role's queue (`handoffd.continuity.work`) after each step, and never fails that step.  Helpers
import this module after every step, so it uses only `os`, `errno` and what they have
already loaded.
"""

from __future__ import annotations

import errno
import os

from handoffd.continuity import work
from handoffd.core import durable, safeio
from handoffd.core import handoff as hf
from handoffd.core.config import Role
from handoffd.core.handoff import epoch

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: helpers import this module
if TYPE_CHECKING:
    from collections.abc import Callable

    from handoffd.queue.items import Seen

    Edit = Callable[[dict[str, list[str]]], None]

FILE = os.path.join(".swarmforge", "HANDOFF.md")
TITLE = "# HANDOFF — "
ORDER = ("Next Step", "In-Flight", "Ruled Out", "Decisions", "Verify", "Open Questions")
AGENT_SECTIONS = ("Ruled Out", "Decisions", "Verify")
DROP_ORDER = ("Decisions", "Ruled Out", "Verify")  # Verify only if the others are spent
MAX_LINES = 30
MAX_IN_FLIGHT = 5
MAX_QUESTIONS = 3
MAX_TEXT = 200
MAX_BYTES = 64 * 1024  # never read more of a live file (30 short lines are ~3 KiB)
WAITING = "waiting for "


class State:
    """handoffd's part of the file: the header fields and its own sections."""

    __slots__ = ("branch", "in_flight", "more", "next_step", "open_questions", "phase", "time")

    def __init__(
        self,
        time: str,
        branch: str,
        phase: str,
        next_step: str,
        in_flight: list[str] | None = None,
        open_questions: list[str] | None = None,
        more: int = 0,
    ) -> None:
        self.more = more  # cards in flight beyond those listed (a file read back knows no more)
        self.time = time
        self.branch = branch
        self.phase = phase
        self.next_step = next_step
        self.in_flight = in_flight or []
        self.open_questions = open_questions or []


class Parsed:
    """A live file read back: its header fields and every section's lines."""

    __slots__ = ("branch", "phase", "sections", "time")

    def __init__(self, time: str, branch: str, phase: str, sections: dict[str, list[str]]) -> None:
        self.time = time
        self.branch = branch
        self.phase = phase
        self.sections = sections

    @property
    def written(self) -> float:
        """When the file says it was written; as old as can be when that cannot be read
        (an agent broke the line): such a file is never fresher than the queue."""
        at = epoch(self.time)
        return float("-inf") if at is None else at


# --- pure ---------------------------------------------------------------------------------


def one_line(text: str) -> str:
    """Text fit for a single line of the file: no line breaks, no control characters (a
    task or reason is another file's text, and agents `cat` this one), at most 200
    characters."""
    flat = " ".join(text.split())
    if not flat.isprintable():  # rarely: the escapes are imported only then
        from handoffd.core.terminal import escape

        flat = escape(flat)
    return flat if len(flat) <= MAX_TEXT else flat[: MAX_TEXT - 1] + "…"


def render(state: State, agent: dict[str, list[str]]) -> str:
    """The whole file: handoffd's sections from `state`, the agent's kept from `agent`,
    fitted into 30 lines by the drop rule."""
    sections = {
        "Next Step": [one_line(state.next_step)],
        "In-Flight": _in_flight(state.in_flight, state.more),
        "Open Questions": [f"- {one_line(q)}" for q in state.open_questions[:MAX_QUESTIONS]],
    }
    for name in AGENT_SECTIONS:
        sections[name] = trimmed(agent.get(name, []))
    head = [
        f"{TITLE}{state.time}",
        f"branch: {one_line(state.branch)} | phase: {one_line(state.phase)}",
    ]
    return "".join(f"{line}\n" for line in _lines(head, fit(head, sections)))


def _in_flight(cards: list[str], more: int) -> list[str]:
    lines = [f"- {one_line(card)}" for card in cards[:MAX_IN_FLIGHT]]
    hidden = max(len(cards) - MAX_IN_FLIGHT, 0) + more
    if hidden:
        lines.append(f"- … {hidden} more")
    return lines


def restate(parsed: Parsed) -> State:
    """handoffd's part of a file read back, to rewrite it unchanged around the agent's."""
    sections = parsed.sections
    flight = [line.removeprefix("- ") for line in sections.get("In-Flight", [])]
    last = flight[-1] if flight else ""
    more = 0
    if last.startswith("… ") and last.endswith(" more") and last[2:-5].isdigit():
        more = int(flight.pop()[2:-5])
    questions = [line.removeprefix("- ") for line in sections.get("Open Questions", [])]
    step = " ".join(sections.get("Next Step", []))
    return State(parsed.time, parsed.branch, parsed.phase, step, flight, questions, more)


def _lines(head: list[str], sections: dict[str, list[str]]) -> list[str]:
    lines = list(head)
    for name in ORDER:
        if sections.get(name):
            lines += ["", f"## {name}", *sections[name]]
    return lines


def fit(head: list[str], sections: dict[str, list[str]]) -> dict[str, list[str]]:
    """Drop the agent's oldest bullets (from the top of Decisions, then Ruled Out, then
    Verify) until the file fits in 30 lines; a section that lost some ends with
    `- (<k> older items dropped)`.  Each section is counted once and cut once, however
    many bullets it loses: the file is rewritten under the role's lock, and a long history
    must not hold that lock long."""
    if len(_lines(head, sections)) <= MAX_LINES:
        return dict(sections)
    from handoffd.core import budget  # only for a file past its 30 lines, as budget.py says

    own = {name: lines for name, lines in sections.items() if name not in DROP_ORDER}
    parts = []
    for name in DROP_ORDER:
        lines = sections.get(name, [])
        items, dropped = _items(lines)
        parts.append(budget.Section(name, lines, ("", f"## {name}"), _dropped_marker, items,
                                    dropped))  # fmt: skip
    cut = budget.cut_oldest(MAX_LINES, len(_lines(head, own)), parts)
    return {**sections, **{name: rows for name, rows in cut.items() if name in sections}}


def trimmed(rows: list[str]) -> list[str]:
    """Rows without leading or trailing blank ones: `budget.trimmed`, whose module a
    helper imports only for a file past its budget (tests/test_live.py pins the two
    equal)."""
    start, end = 0, len(rows)
    while start < end and not rows[start].strip():
        start += 1
    while end > start and not rows[end - 1].strip():
        end -= 1
    return rows[start:end]


def _items(lines: list[str]) -> tuple[list[list[str]], int]:
    """A section's items (a bullet and its continuation lines; leading prose is an item too)
    and how many were dropped before, from its `- (<k> older items dropped)` line."""
    items: list[list[str]] = []
    dropped = 0
    for line in lines:
        count = dropped_count(line)
        if count is not None:
            dropped += count
        elif not items or line.startswith(("- ", "* ")):
            items.append([line])
        else:
            items[-1].append(line)
    return items, dropped


def _dropped_marker(dropped: int) -> str:
    return f"- ({dropped} older items dropped)"


def dropped_count(line: str) -> int | None:
    """k of a `- (<k> older items dropped)` line; None for any other line."""
    if line.startswith("- (") and line.endswith(" older items dropped)"):
        number = line[3 : -len(" older items dropped)")]
        if number.isdigit():
            return int(number)
    return None


def add_bullet(lines: list[str], bullet: str) -> list[str]:
    """A section with `bullet` added as its newest item (before a drop marker, if any)."""
    lines = trimmed(lines)
    if lines and dropped_count(lines[-1]) is not None:
        return [*lines[:-1], bullet, lines[-1]]
    return [*lines, bullet]


def parse(text: str) -> Parsed:
    """A live file's header fields and sections.  A file whose first two lines an agent
    broke still yields its sections (so a rewrite keeps them), with empty header fields
    (so `resume` never trusts it)."""
    lines = text.split("\n")
    time = branch = phase = ""
    if len(lines) >= 2 and lines[0].startswith(TITLE) and lines[1].startswith("branch: "):
        time = lines[0][len(TITLE) :].strip()
        branch, _, phase = lines[1][len("branch: ") :].partition(" | phase: ")
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), [])
        elif current is not None:
            current.append(line)
    return Parsed(time, branch, phase, {name: trimmed(body) for name, body in sections.items()})


# --- I/O ----------------------------------------------------------------------------------


def path(worktree: str) -> str:
    return os.path.join(worktree, FILE)


def read(worktree: str) -> Parsed | None:
    """The role's live file as it stands; None if there is none, or none we may read: a
    link, FIFO, device or folder in its place, or a file over 64 KiB, is never followed,
    opened or read past the limit (docs/protocol.md Part II), and a rewrite replaces it."""
    try:
        data = safeio.read_regular(path(worktree), MAX_BYTES)
    except (FileNotFoundError, NotADirectoryError, safeio.Refused):
        return None
    return parse(data.decode("utf-8", "replace"))


class Unwritable(safeio.Refused):
    """A folder where the live file should be: a rename cannot replace it."""


def write(worktree: str, state: State, previous: Parsed | None = None) -> str:
    """Rewrite the live file from `state`, keeping the agent's sections of `previous` (by
    default the file as it stands); returns the text.  Atomic (temp file, rename): a reader
    or a crash sees the old file or the new, never a mix.  The rename replaces a link in
    its place, never what the link points at.

    The temp is fsynced before the rename only when the file carries the agent's sections:
    those exist nowhere else, so a power cut must leave the old file or the new.  A file of
    handoffd's lines alone says only what the queue says; one a power cut tore is read as
    no file (its header never looks fresh), and `resume` and the next step rebuild it.
    That spares a take or a finish, an agent's every call, one of its four fsyncs."""
    previous = previous or read(worktree)
    agent = previous.sections if previous else {}
    text = render(state, agent)
    if os.path.isdir(path(worktree)) and not os.path.islink(path(worktree)):
        raise Unwritable(path(worktree), "a directory, not the live file; remove it")
    os.makedirs(os.path.dirname(path(worktree)), exist_ok=True)
    sweep(os.path.dirname(path(worktree)))
    durable.replace(path(worktree), text.encode("utf-8"), sync=carries_agent(agent))
    return text


def carries_agent(sections: dict[str, list[str]]) -> bool:
    """Whether any of the agent's sections has a line to keep."""
    return any(trimmed(sections.get(name, [])) for name in AGENT_SECTIONS)


def sweep(directory: str) -> None:
    """Remove the temp files of rewrites whose writer died (SIGKILL leaves them behind):
    its pid is gone, or the temp is older than a minute, which no rewrite takes (a pid is
    reused within minutes, so a live process of that number must not keep one forever).
    A live writer's fresh temp is never taken from under it."""
    durable.sweep_stale(directory, f".{os.path.basename(FILE)}.")


def branch(worktree: str) -> str:
    """The worktree's branch, read from git's own files (`.git` → gitdir → `HEAD`) rather
    than by running git, which would cost a helper more than its whole start-up."""
    dot_git = os.path.join(worktree, ".git")
    try:
        if os.path.isfile(dot_git):
            with open(dot_git, encoding="utf-8") as file:
                gitdir = file.read().strip().removeprefix("gitdir: ")
            dot_git = os.path.join(worktree, gitdir)  # a relative gitdir is relative to here
        with open(os.path.join(dot_git, "HEAD"), encoding="utf-8") as file:
            head = file.read().strip()
    except OSError:
        return "(no git)"
    if head.startswith("ref: "):
        return head[len("ref: ") :].removeprefix("refs/heads/")
    return f"(detached {head[:10]})"


# --- after each step: the file rewritten from the role's queue ----------------------------


def after_step(
    role: Role,
    sent_to: str = "",
    now: float | None = None,
    force: bool = False,
    seen: Seen | None = None,
) -> None:
    """Rewrite `role`'s live file from its queue; `sent_to` names the recipients of a
    handoff it just queued; `force` when the step changed state the queue folders' times
    do not show (a queued handoff, a stored report); `seen`: what a step holding the
    role's inbox lock listed and read of its queue, so that no folder is listed again.
    Never fails the step it follows: the step's work is done and durable, and a live file
    that could not be written is only a missed note."""
    try:
        refresh(role, sent_to, now, force=force, seen=seen)
    except (OSError, ValueError):
        pass


def refresh(
    role: Role,
    sent_to: str = "",
    now: float | None = None,
    edit: Edit | None = None,
    force: bool = False,
    seen: Seen | None = None,
) -> str:
    """Rewrite `role`'s live file from its queue; the text written ("" if nothing needed
    writing).  Under a lock on the role's handoff directory: two helpers of one role
    finishing at once write one after the other, each from the queue as it stands then, so
    a stale view never lands last.  (Not the live file's own folder: the main checkout's
    `.swarmforge/` is the project's, which the daemon keeps locked for as long as it
    runs.)"""
    from handoffd.queue.lock import hold

    os.makedirs(role.handoffs, exist_ok=True)
    fd = os.open(role.handoffs, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if not hold(fd):  # held by another process for seconds: never waited on for ever
            raise BlockingIOError(errno.EWOULDBLOCK, "locked by another process", role.handoffs)
        return _rewrite(role, sent_to, now, edit, force, seen)
    finally:
        os.close(fd)  # releases the lock


def _rewrite(
    role: Role,
    sent_to: str,
    now: float | None,
    edit: Edit | None,
    force: bool = False,
    seen: Seen | None = None,
) -> str:
    previous = read(role.worktree)
    if edit is not None and previous is not None:
        # the agent's note: its sections change, handoffd's lines stay as they were
        edit(previous.sections)
        return write(role.worktree, restate(previous), previous)
    if edit is not None:
        previous = Parsed("", "", "", {})
        edit(previous.sections)
    carried = ""
    if previous and previous.phase.startswith(WAITING):
        carried = previous.phase[len(WAITING) :]  # still waiting until something arrives
    summary = work.describe(work.look(role, sent_to or carried, seen))
    state = State(
        hf.iso_now(now),
        branch(role.worktree),
        summary.phase,
        summary.next_step,
        summary.in_flight,
        summary.open_questions,
    )
    # every command that changes the role's state rewrites the file (docs/protocol.md §10)
    if previous is not None and edit is None and not force and _unchanged(role, state, previous):
        return ""  # nothing happened that the file does not already say, as fresh as ever
    return write(role.worktree, state, previous)


def _unchanged(role: Role, state: State, previous: Parsed) -> bool:
    """Whether rewriting would change only the header time, and the file as it stands is
    still fresh for `resume` (no queue event since it was written).  Skipping that rewrite
    spares a call that changed nothing (`NO_TASK`) the fsync, most of its cost."""
    if previous.written < work.newest_event(role):
        return False
    stamp, state.time = state.time, previous.time
    same = render(state, previous.sections) == render(restate(previous), previous.sections)
    state.time = stamp
    return same
