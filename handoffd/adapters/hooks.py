"""`handoffd hook stop|session-start|pre-compact`: what Claude Code and Codex run at the end of
a turn, at the start of a conversation and before compacting it (docs/protocol.md §16).

Each reads the harness's JSON on stdin (Codex's `notify` gives it as the one argument
instead), answers within a second, prints only what the harness reads, and fails open:
input that is not what a harness sends, or any error, prints nothing and exits 0, so a
hook never stands between an agent and its next turn.  One process per turn: this module
imports only cheap standard modules and what the helpers import (docs/performance.md).

The Stop hook tells the agent of its mail: when the role has nothing in process and its
`new/` holds ready work, it blocks the end of the turn with a reason that says to run
`ready_for_next.sh`.  It does so at most once for the same first waiting file while
nothing was taken in between: `H/announced` holds that file's name and the stamp of
`in_process/` then (and when it cannot be written, only a first stop may block), so a
harness that keeps stopping is never sent round in a loop.
"""

from __future__ import annotations

import os
import sys
import time

from handoffd.core import config, safeio
from handoffd.core import handoff as hf
from handoffd.core.config import Box, Role
from handoffd.core.quickjson import loads, quote  # JSON without `json`'s imports
from handoffd.harness.marks import ANNOUNCED, ANNOUNCED_LIMIT, announce
from handoffd.queue import heartbeat

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal

    from handoffd.queue.items import Done
else:  # the C module itself: `signal` wraps it in enums, and `enum` alone costs a hook a
    import _signal as signal  # third of its start-up (docs/performance.md)

INPUT_LIMIT = 1024 * 1024  # bytes of a hook's JSON ever read
DEADLINE = 0.9  # seconds: a hook that has not answered by then gives up, silently
READ_WAIT = 0.5  # seconds to wait for the harness's JSON on stdin
EVENTS = ("stop", "session-start", "pre-compact")
CONTINUE = "Run ready_for_next.sh to continue."
LABEL_LIMIT = 80
SPEND_WITHIN = 0.4  # seconds a turn's record may take to read: the hook still answers in time
# The first Claude Code release seen (in the real harness) to take a Stop hook's
# `additionalContext` as feedback that the agent goes on with; 2.0 refuses that output.
FEEDBACK_FROM = (2, 1, 332)
TRANSCRIPT_TAIL = 64 * 1024  # bytes of the transcript's end read for its release


class GiveUp(Exception):
    """Out of time, or input no harness sends: the hook says nothing."""


def main(argv: list[str]) -> int:
    """`handoffd hook EVENT [--root ROOT] [JSON]`; always 0."""
    signal.signal(signal.SIGALRM, _out_of_time)
    signal.setitimer(signal.ITIMER_REAL, DEADLINE)
    try:
        event, root, given = _arguments(argv)
        data = loads(given if given is not None else _stdin())
        if not isinstance(data, dict):
            raise GiveUp
        said = run(event, data, root, notify=given is not None)
        if said:
            sys.stdout.write(said + "\n")
            sys.stdout.flush()
    except Exception:  # fail open: whatever went wrong, the harness goes on as if no hook ran
        pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return 0


def _out_of_time(*_: object) -> None:
    raise GiveUp


def _arguments(argv: list[str]) -> tuple[str, str | None, str | None]:
    """(event, --root, the JSON given as an argument: Codex's notify)."""
    args = list(argv)
    root = None
    if "--root" in args:
        at = args.index("--root")
        root = args[at + 1]
        del args[at : at + 2]
    if not args or args[0] not in EVENTS or len(args) > 2:
        raise GiveUp
    return args[0], root, args[1] if len(args) == 2 else None


def _stdin() -> str:
    """The harness's JSON: stdin up to its end, or what came within READ_WAIT seconds (a
    terminal that sends nothing never holds the hook)."""
    import select

    chunks: list[bytes] = []
    size = 0
    fd = sys.stdin.fileno()
    while size <= INPUT_LIMIT:
        if not select.select([fd], [], [], READ_WAIT)[0]:
            raise GiveUp
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > INPUT_LIMIT:
        raise GiveUp
    return b"".join(chunks).decode("utf-8")


def run(event: str, data: dict[str, object], root: str | None, notify: bool = False) -> str:
    """What the hook for `event` prints ("" for nothing), given the harness's JSON."""
    role, project = _role(data, root)
    if event == "stop":
        heartbeat.mark_idle(role.handoffs)
        spent(role, data)
        if notify:  # Codex's notify: its answer is not read; the daemon types the line
            return ""
        if budget_holds(role, project):  # no new work for it: nothing to tell (§19)
            return ""
        again = data.get("stop_hook_active") is True
        return stop(role, again, _pool_new(role, project), release_of(data))
    if event == "session-start":
        return session_start(role, project)
    from handoffd.continuity import live

    live.after_step(role)  # pre-compact: `resume` after the compaction starts from it
    return ""


def _role(data: dict[str, object], root: str | None) -> tuple[Role, str]:
    """The calling role: $SWARMFORGE_ROLE, else the role whose worktree holds the
    conversation's working directory (the harness's `cwd`)."""
    cwd = data.get("cwd")
    where = cwd if isinstance(cwd, str) and os.path.isabs(cwd) else os.getcwd()
    project = root or config.find_root(where)
    roles = config.load_roles(project)
    return config.calling_role(roles, os.environ.get("SWARMFORGE_ROLE"), where), project


# --- the end of a turn --------------------------------------------------------------------


def spent(role: Role, data: dict[str, object]) -> None:
    """Add what the turn spent to the role's `H/usage.jsonl`, from the harness's own
    records (docs/protocol.md §19); whatever goes wrong there, the hook goes on."""
    from handoffd.harness import spend

    try:
        spend.record_turn(role, data, time.monotonic() + SPEND_WITHIN)
    except GiveUp:
        raise
    except Exception:  # an unreadable record, a full disk: no tokens, the same turn's end
        pass


def budget_holds(role: Role, project: str) -> bool:
    """Whether a budget of the role's (or its pool's) is spent: it takes no new work, so
    its Stop hook tells of none.  A project without budgets pays one small read."""
    text = config.budget_text(project)
    if text is None:
        return False
    from handoffd.core import tokens, usage

    budgets = tokens.budgets(text)
    return usage.holds(budgets, role, config.load_roles(project), time.time()) is not None


def _pool_new(role: Role, project: str) -> str | None:
    """The `new/` of the pool `role` is a member of (docs/protocol.md §17), else None."""
    if not role.pool or role.is_pool:
        return None
    row = config.load_roles(project).get(role.pool)
    return row.path(Box.NEW) if row is not None and row.is_pool else None


def stop(
    role: Role, again: bool, pool_new: str | None = None, release: tuple[int, ...] | None = None
) -> str:
    """The Stop hook's answer: the mail, as the harness's `release` reads it (`answer`), or
    nothing.  `again`: the harness says this turn already went on because a Stop hook
    made it (`stop_hook_active`).  A pool member is told of its pool's mail too
    (`pool_new`), after its own."""
    if _in_process(role):
        return ""
    # what `ready_for_next` would take: a name it never prints on a TASK line is no mail
    waiting = [e for e in hf.visible(role.path(Box.NEW)) if hf.is_item_entry(e, plain=True)]
    pooled = []
    if pool_new is not None:
        pooled = [e for e in hf.visible(pool_new) if hf.is_item_entry(e, plain=True)]
        waiting += pooled
    first = _first_ready(role, waiting, {e.path for e in pooled})
    if first is None:
        return ""
    name, headers = first
    stamp = _stamp(role.path(Box.IN_PROCESS))
    record = f"{name}\n{stamp}\n"
    if _announced(role) == record:
        return ""  # told already, and nothing taken since: never a loop
    try:
        announce(role.handoffs, record)
    except OSError:
        if again:  # cannot remember telling: tell once per stop, never in a loop
            return ""
    what = label(headers.get(hf.TASK) or hf.file_id(name, headers.get(hf.ID)))
    # the sender the daemon checked: name and `from` agreeing, never the name alone
    sender = label(hf.checked_sender(name, headers.get(hf.SENDER)) or "unknown")
    reason = (f"You have {len(waiting)} handoff(s) waiting (first: {what} from {sender}). "
              "Run ready_for_next.sh.")  # fmt: skip
    return answer(reason, release)


def answer(reason: str, release: tuple[int, ...] | None) -> str:
    """The JSON that makes the agent go on with `reason`.  Claude Code from FEEDBACK_FROM
    takes a Stop hook's `additionalContext` as feedback to the model and shows it as
    `Stop hook says: …`; a `decision: block` it shows as `Stop hook reported a problem`
    (and `stop hook problem` in its footer), alarming words for "you have mail".  An
    older release refuses the `Stop` output it does not know (its agent would not go on):
    it, and a release not known, is answered with the block every release reads."""
    if release is not None and release >= FEEDBACK_FROM:
        return ('{"hookSpecificOutput": {"hookEventName": "Stop", '
                f'"additionalContext": {quote(reason)}}}}}')  # fmt: skip
    return f'{{"decision": "block", "reason": {quote(reason)}}}'


def release_of(data: dict[str, object]) -> tuple[int, ...] | None:
    """The Claude Code release that runs the hook, as its transcript says (each line of it
    carries `version`), read from the end: the newest whole line that names one.  None
    when it cannot be told (no transcript, not a regular file, no such line in its tail)."""
    path = data.get("transcript_path")
    if not isinstance(path, str) or not os.path.isabs(path):
        return None
    try:
        fd = safeio.open_regular(path)
        try:
            size = os.fstat(fd).st_size
            os.lseek(fd, max(0, size - TRANSCRIPT_TAIL), os.SEEK_SET)
            tail = safeio.read_fd(fd, TRANSCRIPT_TAIL)
        finally:
            os.close(fd)
    except OSError:
        return None
    lines = tail.split(b"\n")
    if size > TRANSCRIPT_TAIL:
        lines = lines[1:]  # the first was cut by the seek: never a whole line
    for line in reversed(lines):
        if b'"version"' not in line:
            continue
        try:
            found = loads(line.decode("utf-8"))
        except ValueError:
            continue
        version = found.get("version") if isinstance(found, dict) else None
        if isinstance(version, str) and version.replace(".", "").isdigit():
            return tuple(int(part) for part in version.split(".") if part)
    return None


def _in_process(role: Role) -> bool:
    """Whether the role holds work: a file or a batch folder in `in_process/`."""
    for entry in hf.visible(role.path(Box.IN_PROCESS)):
        if hf.is_item_entry(entry) or entry.name.startswith("batch_"):
            return True
    return False


def _first_ready(
    role: Role, waiting: list[os.DirEntry[str]], pooled: set[str]
) -> tuple[str, dict[str, str]] | None:
    """The first waiting file `ready_for_next` would take (docs/protocol.md §13): its name
    and headers.  A file of the role's own it cannot read is the helper's to report: it
    counts as ready.  One of the pool's (a path in `pooled`) is skipped, as every member
    skips it (§17): the board says what is wrong with it."""
    from handoffd.queue.items import Item, not_ready

    done: Done | None = None
    for entry in waiting:
        if entry.path in pooled and hf.unfit(entry.path) is not None:
            continue
        try:
            headers = hf.read_headers(entry.path)
        except FileNotFoundError:
            continue  # taken meanwhile
        except OSError:
            return entry.name, {}
        if headers.get(hf.DEPENDS_ON) and done is None:
            done = _dependencies(role)
        if not_ready(Item(entry.path, hf.Handoff(list(headers.items()), "")), done) is None:
            return entry.name, headers
    return None


def _dependencies(role: Role) -> Done:
    """The board's rule for a file that depends on others (imported only for such a file)."""
    from handoffd.ops.readiness import for_daemon

    root = config.find_root(role.worktree)
    check = for_daemon(root, config.load_roles(root))
    return lambda path, wanted: check(role.name, path, wanted)


def _stamp(folder: str) -> str:
    """What changes when work is taken or finished (an entry enters or leaves the folder)."""
    try:
        info = os.lstat(folder)
    except OSError:
        return "-"
    return f"{info.st_ino}.{info.st_mtime_ns}.{info.st_size}.{info.st_nlink}"


def _announced(role: Role) -> str | None:
    """What `H/announced` holds (never followed, never read past its limit); None if
    nothing readable stands there."""
    try:
        return safeio.read_regular(os.path.join(role.handoffs, ANNOUNCED),
                                   ANNOUNCED_LIMIT).decode("utf-8", "replace")  # fmt: skip
    except OSError:
        return None


def label(text: str, limit: int = LABEL_LIMIT) -> str:
    """A header's words fit to be read by an agent as its next instruction: one line,
    nothing a terminal obeys, at most `limit` characters."""
    kept = "".join(c if c.isprintable() else " " for c in text).strip()
    return kept if len(kept) <= limit else kept[: limit - 1] + "…"


# --- the start of a conversation ----------------------------------------------------------


def session_start(role: Role, root: str) -> str:
    """Claude Code's SessionStart answer: `resume`'s lines and how to go on, as the
    conversation's first context (docs/protocol.md §10)."""
    from handoffd.continuity import resume

    context = "\n".join([*resume.climb(role, root).lines(), CONTINUE])
    return ('{"hookSpecificOutput": {"hookEventName": "SessionStart", '
            f'"additionalContext": {quote(context)}}}}}')  # fmt: skip
