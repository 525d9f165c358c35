"""The delivery journal: the one record that makes redelivery after a crash a no-op.

A pass first *stages* every copy as a hidden temp file inside the recipient's `new/`
(helpers ignore hidden names) and fsyncs it.  Then it writes this journal, listing
each staged copy with its final name and each original to archive, ending with a
commit line, and fsyncs it.  Only after that are copies renamed into view.

After a crash the journal alone decides, in time independent of history:
- no committed journal: nothing was published; stray staged files are swept and the
  originals, still in their outboxes, are delivered afresh;
- a committed journal: a copy whose staged file still exists is renamed into view; a
  copy whose staged file is gone *was* published (a rename is atomic), wherever the
  recipient has taken it since.  Originals still in an outbox are archived.

The file is rewritten in place when it lists nothing unfinished, and a power cut may
lose the truncates that emptied it (a `clear`, a commit's O_TRUNC) while keeping what
was written after them.  What is left is then an older journal whose pass had finished,
whole (replaying it does nothing) or with the start of an uncommitted newer one over it.
Every line carries its commit's token, so such a mix never reads as committed: it is
no commit, never a corrupt one.

Rewritten in place, the journal is opened the way of every such file (`durable.open_own`):
a hard link planted in its place, whose other name is a file outside the project, is
moved aside unwritten and a journal of our own started, never emptied or written over.
"""

from __future__ import annotations

import json
import os

from handoffd.core import durable, safeio

COMMIT = "commit"
LIMIT = 64 * 1024 * 1024  # bytes: ~100,000 entries; never read more of a journal
_REWRITE = os.O_WRONLY | os.O_CREAT  # `durable.open_own` adds no-follow; truncated once ours


class Corrupt(Exception):
    """A committed journal that cannot be read back: a line of its own commit is garbled
    (the disk damaged it; a torn rewrite never does this, see the module docstring)."""


class Entry:
    """One original in a pass: its staged copies and where it is archived."""

    __slots__ = (
        "acked",
        "copies",
        "identity",
        "original",
        "recipients",
        "remote",
        "sender",
        "sent",
        "stamp",
    )

    def __init__(
        self,
        sender: str,
        original: str,
        identity: tuple[int, int],
        sent: str,
        copies: list[tuple[str, str]],
        recipients: list[str],
        remote: list[str] | None = None,
        acked: list[str] | None = None,
        stamp: str | None = None,
    ) -> None:
        self.sender = sender
        self.original = original
        self.identity = identity  # (st_dev, st_ino): archive this file, not a later namesake
        self.sent = sent
        self.copies = copies  # (staged temp path, final path in new/)
        self.recipients = recipients
        # Recipients on other hosts (docs/protocol.md §15): their copies go to the NATS
        # stream, and the original stays in its outbox until the stream acknowledged each
        # of them (`acked`); meanwhile the entry stays here and its local copies, already
        # published, replay as no-ops.
        self.remote = remote or []
        self.acked = acked or []
        # The `enqueued_at` of its remote copies, chosen once: a copy published again (after
        # a crash, a lost acknowledgement) is then the same bytes under the same message id,
        # which the stream drops as a duplicate (docs/protocol.md §15, "Message ids").
        self.stamp = stamp

    @property
    def unacked(self) -> list[str]:
        return [role for role in self.remote if role not in self.acked]

    def to_json(self, token: str) -> str:
        return json.dumps(
            {
                "token": token,
                "sender": self.sender,
                "original": self.original,
                "identity": list(self.identity),
                "sent": self.sent,
                "copies": [list(copy) for copy in self.copies],
                "recipients": self.recipients,
                "remote": self.remote,
                "acked": self.acked,
                "stamp": self.stamp,
            }
        )

    @classmethod
    def from_json(cls, line: str, token: str) -> Entry | None:
        """The entry of a line, or None if the line belongs to another commit (torn file)."""
        data = json.loads(line)
        if data.get("token") != token:
            return None
        return cls(
            data["sender"],
            data["original"],
            (data["identity"][0], data["identity"][1]),
            data["sent"],
            [(staged, final) for staged, final in data["copies"]],
            data["recipients"],
            data.get("remote", []),  # a journal from before hosts has none
            data.get("acked", []),
            data.get("stamp"),  # a journal of a release that stamped each publish anew: None
        )


def commit(path: str, entries: list[Entry], atomic: bool = False) -> str | None:
    """Durably record `entries`: the pass's point of no return.

    The journal is one file kept from pass to pass and rewritten in place, so a commit
    costs one flush: only the pass that creates the file also flushes its directory.
    Every line carries the commit's token and the commit line comes last, so a file torn
    by a power cut (new lines over an old journal's tail, or a short one) never reads as
    committed.  With `atomic` (the journal still lists unfinished entries, which a torn
    rewrite would lose) the file is replaced by rename instead, and a failure leaves the
    old journal as it was.  Returns where a hard-linked journal was moved aside, if one
    was (the caller logs it).
    """
    token = os.urandom(8).hex()
    text = "".join(entry.to_json(token) + "\n" for entry in entries) + f"{COMMIT} {token}\n"
    # Someone may have removed daemon/ under a running daemon: make it again, durably (a
    # journal in a folder a power cut forgets is no commit).
    durable.makedirs(os.path.dirname(path))
    if atomic:
        durable.replace(path, text.encode())
        durable.fsync_dir(os.path.dirname(path))
        return None
    created = not os.path.lexists(path)
    try:
        fd, aside = durable.open_own(path, _REWRITE)
        try:
            os.ftruncate(fd, 0)
            durable.write_all(fd, text.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        if created or aside:  # a new name in daemon/: durable only once the folder is
            durable.fsync_dir(os.path.dirname(path))
    except BaseException:
        # Not durable, so not committed: the caller unstages the copies, and a journal
        # left readable would make the next pass archive originals nobody received.
        durable.unlink_quietly(path)
        raise
    return aside


def load(path: str) -> list[Entry] | None:
    """The committed entries, or None when there is no committed journal.  Read the
    careful way (docs/protocol.md Part II): a FIFO, a device or a link in its place, or a
    file past the limit, is `Corrupt`, never waited on, followed or read whole."""
    try:
        data = safeio.read_regular(path, LIMIT)
    except FileNotFoundError:
        return None
    except safeio.Refused as refusal:
        raise Corrupt(f"{path}: {refusal.why}") from None
    lines = data.decode("utf-8", "replace").split("\n")  # JSON lines are ASCII: bad bytes tear
    head, _, token = lines[-2].partition(" ") if len(lines) > 1 else ("", "", "")
    if lines[-1] != "" or head != COMMIT or not token:
        return None
    body = lines[:-2]
    if not all(f'"token": "{token}"' in line for line in body):  # as to_json writes it
        return None  # lines of another commit, or pieces of one: a torn rewrite
    try:
        entries = [Entry.from_json(line, token) for line in body]
    except (ValueError, KeyError, TypeError, IndexError) as error:
        raise Corrupt(f"{path}: {error}") from None
    except RecursionError:  # a line nested past the parser's depth: no daemon wrote it
        raise Corrupt(f"{path}: a line nested too deep to read") from None
    return None if None in entries else [e for e in entries if e is not None]


def clear(path: str) -> str | None:
    """Forget a finished pass by emptying the journal.  No flush: if the emptying is lost,
    replaying a finished journal finds no staged file and no original, and does nothing.
    Returns where a hard-linked journal was moved aside (a new, empty one in its place)."""
    try:
        fd, aside = durable.open_own(path, _REWRITE & ~os.O_CREAT)
    except FileNotFoundError:
        return None
    try:
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)
    return aside
