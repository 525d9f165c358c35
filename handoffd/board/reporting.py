"""The `report` operation (docs/protocol.md §8): store what an agent says about its work,
then act on the report's status, all under the role's inbox lock.

Like the helpers' operations it returns an `Outcome`; the click command and the MCP
tool render it.  Kept out of `handoffd.helpers` because it needs the front matter
library, which the helpers' start-up budget cannot pay for.
"""

from __future__ import annotations

import os
import stat
import sys
import time

from handoffd import handoff as hf
from handoffd import safeio
from handoffd.board import reports
from handoffd.helpers import (
    Caller,
    after_step,
    and_then,
    blocked_lines,
    finish,
    locked,
    own_id,
    reason_problem,
    take,
)
from handoffd.inbox import (
    Inbox,
    Refusal,
    current_batch,
    current_task,
    current_work,
)
from handoffd.outcome import Outcome

MAX_REPORT = reports.MAX_TEXT
STATUSES = reports.STATUSES
OUTSIDE = "INVALID_ARGUMENTS: file must be inside the worktree\n"


def report(
    caller: Caller,
    ident: str | None,
    status: str,
    text: str,
    reason: str | None = None,
    now: float | None = None,
) -> Outcome:
    """`handoffd report`: store the report on the work in process, then act on its status:
    RUNNING takes work first when there is none, BLOCKED sets the reason, DONE finishes.
    A refused report stores nothing."""
    ident = own_id(caller, ident)
    refused, blocked = _report_checks(status, text, reason)
    if refused:
        return after_step(caller, refused, alive=False, changed=False)

    def step(caller: Caller, inbox: Inbox) -> Outcome:
        taken = ""
        if status == "RUNNING" and current_work(inbox.listing()) is None:
            taken = take(caller, inbox).stdout
        try:
            return act(caller, inbox, taken)
        except Refusal as refusal:  # what was taken is shown, even if the report is refused
            return Outcome(refusal.code, "" if taken == "NO_TASK\n" else taken, refusal.render())

    def act(caller: Caller, inbox: Inbox, taken: str) -> Outcome:
        files = _reported_files(inbox, ident)
        if status == "DONE":
            _check_finishable(caller, inbox)
        stored = _store(caller, files, status, text, time.time() if now is None else now)
        done = "".join(f"REPORTED: {path}\n" for path in stored)
        if status == "BLOCKED":
            done += blocked_lines(inbox, ident, blocked)
        if status == "DONE":
            return and_then(done, caller, inbox, finish)
        return Outcome(0, taken + done)

    return locked(caller, step, alive=status != "BLOCKED", force=True)  # a report was stored


def _report_checks(status: str, text: str, reason: str | None) -> tuple[Outcome | None, str]:
    """A refusal of the report before anything is touched, and the blocked reason."""
    if status not in STATUSES:
        return Outcome(2, "", f"INVALID_STATUS: {status} (RUNNING, BLOCKED or DONE)\n"), ""
    size = len(text.encode("utf-8", "surrogateescape"))
    if size > MAX_REPORT:
        return too_large(f"{size} bytes"), ""
    if status != "BLOCKED":
        return None, ""
    blocked = reason if reason is not None else blockers_line(text)
    if blocked is None:
        message = "NO_BLOCKED_REASON: give --reason TEXT or a report line starting 'Blockers:'\n"
        return Outcome(2, "", message), ""
    problem = reason_problem(blocked)
    return (Outcome(2, "", problem) if problem else None), blocked.strip()


def blockers_line(text: str) -> str | None:
    """The report's first line starting `Blockers:`, without that word (None if none)."""
    for line in text.split("\n"):
        if line.startswith("Blockers:"):
            return line[len("Blockers:") :].strip()
    return None


def _reported_files(inbox: Inbox, ident: str | None) -> list[str]:
    """The files the report is about: the one `ident` names, else all the work in process."""
    if ident is None:
        return inbox.current().files
    found = inbox.in_process_named(ident)
    if found is None:
        raise Refusal(2, f"NOT_IN_PROCESS: {ident}")
    return [found[1]]


def _check_finishable(caller: Caller, inbox: Inbox) -> None:
    """Refuse DONE, before storing, when done_with_current would refuse to finish."""
    if caller.role.mode not in ("task", "batch"):
        raise Refusal(2, f"INVALID_RECEIVE_MODE: {caller.role.mode}")
    decide = current_task if caller.role.mode == "task" else current_batch
    if decide(inbox.listing(), finishing=True) is None:
        raise Refusal(1, "NO_CURRENT_TASK" if caller.role.mode == "task" else "NO_CURRENT_BATCH")


def _store(caller: Caller, files: list[str], status: str, text: str, now: float) -> list[str]:
    role, stored = caller.role, []
    for path in files:
        who = (role.name, caller.agent, caller.conversation)
        stored.append(reports.store(role.handoffs, report_id(path), status, *who, text, now))
    return stored


def report_id(path: str) -> str:
    """The id a report on the file at `path` is filed under: its `id` header, unless that
    could name a folder outside `reports/`, then the id its file name carries."""
    try:
        ident = hf.read(path).get("id") or ""
    except hf.HandoffError:
        ident = ""
    if not ident or "/" in ident or ident.startswith(".") or "\0" in ident:
        return hf.name_id(os.path.basename(path))
    return ident


def too_large(size: str) -> Outcome:
    return Outcome(2, "", f"REPORT_TOO_LARGE: {size}; at most {MAX_REPORT}\n")


# --- where the text comes from ------------------------------------------------------------
# Never more than the limit + 1 bytes is read, so `--file /dev/zero` or `yes | … --file -`
# is refused at once instead of filling the memory first.


def read_text(source: str | None) -> str | Outcome:
    """The command's report text: from the file `source`, stdin (`-`), or none at all; or
    the refusal to print.  The caller names the file, so a link to it is followed; a
    FIFO or a folder is refused without being opened (stdin is the way to pipe a text)."""
    if source is None:
        return ""
    try:
        data = _stdin() if source == "-" else _named(source)
    except safeio.Refused as refusal:
        return Outcome(2, "", f"REPORT_FILE_INVALID: {refusal}\n")
    except OSError as error:
        return Outcome(1, "", f"Cannot read report file: {source}: {error.strerror}\n")
    return _decoded(data)


def read_inside(source: str, worktree: str) -> str | Outcome:
    """The MCP tool's report text from `source`, a regular file inside `worktree` (a
    relative one is taken from there) reached through no link: a tool never reads outside
    the calling role's worktree nor blocks on a FIFO (docs/protocol.md §12)."""
    path = os.path.join(worktree, source)
    spellings = (worktree, os.path.realpath(worktree))  # roles.tsv may name it through a link
    below = next((w for w in spellings if safeio.inside(path, w) is not None), None)
    if below is None:
        return Outcome(2, "", OUTSIDE)
    try:
        data = safeio.read_regular(path, MAX_REPORT, below=below)
    except safeio.TooLarge:
        return too_large(f"more than {MAX_REPORT} bytes")
    except (safeio.Refused, ValueError):  # a link on the way, a FIFO, a folder; a NUL
        return Outcome(2, "", OUTSIDE)
    except OSError as error:
        return Outcome(1, "", f"Cannot read report file: {source}: {error.strerror}\n")
    return data.decode("utf-8", "replace")


def _decoded(data: bytes) -> str | Outcome:
    if len(data) > MAX_REPORT:
        return too_large(f"more than {MAX_REPORT} bytes")
    return data.decode("utf-8", "replace")


def _stdin() -> bytes:
    return safeio.read_fd(sys.stdin.fileno(), MAX_REPORT + 1)


def _named(path: str) -> bytes:
    """At most the limit + 1 bytes of a regular file, or of a device (`/dev/null`)."""
    _readable(path, os.stat(path).st_mode)  # before the open: a FIFO is never opened
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        _readable(path, os.fstat(fd).st_mode)
        return safeio.read_fd(fd, MAX_REPORT + 1)
    finally:
        os.close(fd)


def _readable(path: str, mode: int) -> None:
    if not (stat.S_ISREG(mode) or stat.S_ISCHR(mode)):
        raise safeio.NotRegular(path, f"{safeio.kind(mode)}, not a file; give '-' to pipe a text")
