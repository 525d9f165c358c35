"""A sender's `failed/`: the originals the daemon refused, and what an operator does with
them (docs/protocol.md §5, §13).

This module owns every move into and out of `failed/`: the daemon's refusal (the reason
in `<name>.error`, then the original beside it), an operator's `retry` (back into the
outbox, the reason removed after) and `dismiss` (the original, its reason and a note of
who put it aside, into `failed/dismissed/`).  Each move is a rename, each folder it
touched fsynced before the caller reports it, so a process killed at any instant leaves
the original in exactly one place, whole.

What such a kill or a power cut may leave besides is a reason without its original (a
refusal stopped after its first step, a retry before its last), and the temp file of a
dismissal's note.  Neither is read as a card.  The file's next refusal takes its reason's
name again; once the file is delivered, the daemon's next start removes its reason
(`sweep`); the next dismissal removes the temps.
"""

from __future__ import annotations

import os

from handoffd import durable, safeio
from handoffd import handoff as hf
from handoffd.config import Box, Role

ERROR = ".error"
DISMISSAL = ".dismissed"


def refuse(sender: Role, path: str, reason: str) -> str:
    """Move the bad original at `path` into `failed/` with its reason beside it; the name
    it got there.  Raises `OSError` with nothing moved (a reason written is removed)."""
    failed = sender.path(Box.FAILED)
    durable.makedirs(failed)
    target = os.path.basename(path)
    if not _left_by_a_cut(failed, target, reason):
        target = durable.free_name(failed, target, companions=(ERROR,))
    # The reason first: an operator never sees a failed file without its reason.
    error_file = os.path.join(failed, target + ERROR)
    durable.replace(error_file, f"{reason}\n".encode())
    try:
        os.rename(path, os.path.join(failed, target))
    except OSError:
        durable.unlink_quietly(error_file)  # no reason without its file
        raise
    durable.fsync_dir(failed)
    durable.fsync_dir(os.path.dirname(path))
    return target


def _left_by_a_cut(failed: str, name: str, reason: str) -> bool:
    """Whether `failed/<name>.error` says `reason` with no original beside it: what this
    refusal, or a retry of this file, left when cut short; the name is taken again (the
    reason replaced by the same words), never moved aside to `<name>.2` for good."""
    try:
        said = safeio.read_line(os.path.join(failed, name + ERROR))
    except (OSError, ValueError):  # none there, or nothing a reason file could be
        return False
    return said == reason.strip() and not os.path.lexists(os.path.join(failed, name))


def sweep(sender: Role) -> list[str]:
    """Remove from the sender's `failed/` each reason left beside no original whose
    original has been delivered since (it is in `sent/`): what a retry cut short before
    its last step left.  The paths removed.  A reason whose original is elsewhere (taken
    away by hand, or waiting in the outbox) stays."""
    failed, sent = sender.path(Box.FAILED), sender.path(Box.SENT)
    try:
        names = os.listdir(failed)
    except (FileNotFoundError, NotADirectoryError):
        return []
    removed = []
    for name in names:
        original = name.removesuffix(ERROR)
        path = os.path.join(failed, name)
        if original == name or not hf.is_visible(name) or not safeio.is_regular(path):
            continue
        if not os.path.lexists(os.path.join(failed, original)) and os.path.lexists(
            os.path.join(sent, original)
        ):
            durable.unlink_quietly(path)
            removed.append(path)
    if removed:  # flushed, or a power cut brings one back after its original's next start
        durable.fsync_dir(failed)
    return removed


def retry(sender: Role, name: str) -> str:
    """Move the refused original `name` back into the sender's outbox under its name; its
    path there.  The reason goes after the move: a kill between leaves the original in the
    outbox (the daemon checks it again) and a stray `.error` nobody reads as a card: taken
    over if the file is refused again, removed at the daemon's start once it is sent."""
    failed, outbox = sender.path(Box.FAILED), sender.path(Box.OUTBOX)
    target = os.path.join(outbox, name)
    if os.path.lexists(target):
        raise FileExistsError(target)
    durable.makedirs(outbox)
    os.rename(os.path.join(failed, name), target)
    durable.fsync_dir(outbox)
    durable.fsync_dir(failed)
    durable.unlink_quietly(os.path.join(failed, name + ERROR))
    durable.fsync_dir(failed)
    return target


def dismiss(sender: Role, name: str, note: str) -> str:
    """Put the refused original `name` aside in `failed/dismissed/`: first the note of who
    did it (`<name>.dismissed`), then its reason, then the original itself; its new path.
    Until the original moves it is still a failed card, and dismissing it again finishes."""
    failed, aside = sender.path(Box.FAILED), sender.path(Box.DISMISSED)
    durable.makedirs(aside)
    for temp in durable.temp_files(aside):  # a killed dismissal's: ours is the role's lock
        if safeio.is_regular(temp):  # a planted folder stays, in no one's way
            durable.unlink_quietly(temp)
    # The first name whose original is not there yet: a note or a reason there without it
    # is what a dismissal of this file left when it was killed, and is taken over.
    kept = durable.free_name(aside, name)
    durable.replace(os.path.join(aside, kept + DISMISSAL), f"{note}\n".encode())
    try:
        os.rename(os.path.join(failed, name + ERROR), os.path.join(aside, kept + ERROR))
    except FileNotFoundError:
        pass  # no reason beside it (or moved by a dismissal killed before the original)
    target = os.path.join(aside, kept)
    os.rename(os.path.join(failed, name), target)
    durable.fsync_dir(aside)
    durable.fsync_dir(failed)
    return target


def note(by: str, reason: str, now: float | None = None) -> str:
    """The one line of a `.dismissed` file: who, when, why."""
    return f"dismissed by {by} at {hf.iso_now(now)}: {reason}"


def dismissed_at(line: str) -> float | None:
    """When a `.dismissed` line (`note`'s) says the original was put aside, as seconds
    since the epoch; None when it says no time.  The name before the time may itself hold
    ` at `: the first ` at ` followed by a §2 time and `: ` is the one."""
    start = 0
    while (found := line.find(" at ", start)) >= 0:
        start = found + 4
        stamp, colon, _ = line[start:].partition("Z: ")
        when = hf.epoch(stamp + "Z") if colon else None
        if when is not None:
            return when
    return None


def dismissal(path: str) -> str | None:
    """The `.dismissed` line beside a dismissed original (the careful reader's: a link or a
    FIFO in its place is skipped), or None."""
    try:
        return safeio.read_line(path + DISMISSAL) or None
    except (OSError, ValueError):
        return None
