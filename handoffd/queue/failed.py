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

Neither `retry` nor `dismiss` ever removes a reason the daemon wrote after it started
(docs/protocol.md §15, Part III): the daemon refuses a retried original again as soon
as it is back in the outbox, and writes its new `.error` under the same name, maybe
before the command is done.  So `retry` moves the old reason aside (a hidden name of its
own, `aside_name`) before the original moves, and removes only that; `dismiss` touches
the reason only once it has seen the original beside it, under the role's lock.  A kill
between leaves the reason aside, where the board still reads it (`scan`), and which the
next `retry` or `dismiss` of that file, or the daemon's next start, puts back beside its
original.
"""

from __future__ import annotations

import hashlib
import os

from handoffd.core import durable, safeio
from handoffd.core import handoff as hf
from handoffd.core.config import Box, Role

ERROR = ".error"
DISMISSAL = ".dismissed"
ASIDE = ".error-aside"  # a reason moved aside by a retry until its original has moved


def refuse(sender: Role, path: str, reason: str) -> str:
    """Move the bad original at `path` into `failed/` with its reason beside it; the name
    it got there.  Raises `OSError` with nothing moved (a reason written is removed)."""
    failed = sender.path(Box.FAILED)
    durable.makedirs(failed)
    target = hf.plain_name(os.path.basename(path))  # a control character: as its escape
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
    away by hand, or waiting in the outbox) stays.  A reason a killed retry left aside
    goes back beside its original, or away when its original has left."""
    failed, sent = sender.path(Box.FAILED), sender.path(Box.SENT)
    try:
        names = os.listdir(failed)
    except (FileNotFoundError, NotADirectoryError):
        return []
    removed = _sweep_asides(failed, names)
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
    path there.  Its reason is moved aside first and removed after the move: the daemon
    may refuse the file again the moment it is back, and the reason it writes then is
    never the one removed.  A kill between leaves the reason aside (put back by the next
    command, see the module), or the original in the outbox (the daemon checks it again)."""
    failed, outbox = sender.path(Box.FAILED), sender.path(Box.OUTBOX)
    target = os.path.join(outbox, name)
    if os.path.lexists(target):
        raise FileExistsError(target)
    durable.makedirs(outbox)
    _put_back(failed, name)  # what a killed retry left aside: this one's to remove now
    aside = _move_aside(failed, name)
    try:
        os.rename(os.path.join(failed, name), target)
    except BaseException:
        _put_back(failed, name)
        raise
    durable.fsync_dir(outbox)
    durable.fsync_dir(failed)
    if aside is not None:
        durable.unlink_quietly(aside)
        durable.fsync_dir(failed)
    return target


def dismiss(sender: Role, name: str, note: str) -> str:
    """Put the refused original `name` aside in `failed/dismissed/`: first the note of who
    did it (`<name>.dismissed`), then its reason, then the original itself; its new path.
    Until the original moves it is still a failed card, and dismissing it again finishes."""
    failed, aside = sender.path(Box.FAILED), sender.path(Box.DISMISSED)
    _put_back(failed, name)  # a reason a killed retry left aside goes with its original
    if not safeio.is_regular(os.path.join(failed, name)):
        # Seen before anything moves: a reason standing beside no original is one the
        # daemon is writing for a file a retry sent back, never this dismissal's to take.
        raise FileNotFoundError(os.path.join(failed, name))
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
    try:
        os.rename(os.path.join(failed, name), target)
    except BaseException:  # taken from under us by hand: its reason goes back beside it
        _restore(os.path.join(aside, kept + ERROR), os.path.join(failed, name + ERROR))
        raise
    durable.fsync_dir(aside)
    durable.fsync_dir(failed)
    return target


# --- a reason moved aside ---------------------------------------------------------------------


def aside_name(name: str) -> str:
    """The hidden name `retry` moves `name`'s reason to until the original has moved: the
    same for every retry of that name (so a killed one's is found again), short whatever
    the name's length, and nothing any other writer of `failed/` ever takes."""
    digest = hashlib.blake2b(name.encode("utf-8", "surrogateescape"), digest_size=8)
    return f".{digest.hexdigest()}{ASIDE}"


def _move_aside(failed: str, name: str) -> str | None:
    """Move `name`'s reason to its aside name; the new path, or None when it had none."""
    aside = os.path.join(failed, aside_name(name))
    try:
        os.rename(os.path.join(failed, name + ERROR), aside)
    except FileNotFoundError:
        return None
    return aside


def _put_back(failed: str, name: str) -> None:
    """Put a reason moved aside back beside its original, if one is aside."""
    _restore(os.path.join(failed, aside_name(name)), os.path.join(failed, name + ERROR))


def _restore(moved: str, reason: str) -> None:
    """Move the reason at `moved` back to `reason`, never over a reason there now (one the
    daemon wrote since is the newer, and kept); `moved` is gone afterwards either way."""
    try:
        os.link(moved, reason)  # link, not rename: a rename would replace a newer reason
    except FileNotFoundError:
        return
    except FileExistsError:
        pass
    durable.unlink_quietly(moved)
    durable.fsync_dir(os.path.dirname(reason))


def _sweep_asides(failed: str, names: list[str]) -> list[str]:
    """Put back the reasons killed retries left aside beside their originals, and remove
    those whose original is gone; the paths removed.  Safe beside a retry running now: a
    reason it has moved aside goes back only while its original is still here (the retry
    then removes only its own aside, and the daemon's next refusal takes the name over),
    and an aside whose original has left is one its retry is about to remove."""
    asides = {n for n in names if n.startswith(".") and n.endswith(ASIDE)}
    if not asides:
        return []
    for name in names:
        if aside_name(name) in asides and safeio.is_regular(os.path.join(failed, name)):
            asides.discard(aside_name(name))
            _put_back(failed, name)
    removed = [os.path.join(failed, n) for n in sorted(asides)]
    for path in removed:
        durable.unlink_quietly(path)
    return removed


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
