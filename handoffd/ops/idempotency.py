"""Retry-safe `send_handoff` (docs/protocol.md §12): a call that gives an idempotency key
and repeats an earlier call's key and arguments gets that call's handoff back, and
nothing more is queued; the same key with other arguments is a conflict.

One record per key, `H/.idempotency/<sha256 of the key>` in the sending role's handoff
directory, holds the digest of the draft, the queued file's name and its exact bytes.
It is written the §5 way (temp file, fsync, rename, directory fsync) *before* the
handoff is queued, so whatever instant a crash comes at:

- no record yet: nothing was queued; the retry queues it, once;
- a record: that name was planned.  The retry looks for the handoff wherever it can be
  by now (the sender's outbox, sent/ or failed/, any recipient's inbox) and queues the
  recorded bytes under the recorded name only if it is nowhere; `link` never replaces a
  file, so it lands at most once.

Every keyed call of a role runs under one lock on the records folder (`flock`, which the
kernel drops when its holder dies), so a retry racing its first call waits for it.
Records are untrusted, as is everything under `.swarmforge/`: never read through a
symlink, only when regular and at most LIMIT bytes; one that is not ours, whole, counts
as absent and is replaced.  Records older than TTL are removed by the next keyed call.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import time

from handoffd.core import durable
from handoffd.core import handoff as hf
from handoffd.core.config import Box, Role
from handoffd.core.outcome import OUTBOX_BUSY_MESSAGE, Exit, Result, refused
from handoffd.ops import steps
from handoffd.ops.context import Context
from handoffd.queue import outbox
from handoffd.queue.checks import MAX_BYTES
from handoffd.queue.draft import Draft
from handoffd.queue.lock import Busy, hold

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    Enqueue = Callable[[Role, Draft, float], str]  # queue a checked draft: its path
    Send = Callable[..., Result]  # `ops.queue.send`
    Queued = Callable[[str, str], Result]  # `ops.queue.queued`: what queueing prints

FOLDER = ".idempotency"
TTL = 24 * 3600.0  # seconds a record answers for its key, at least
LIMIT = 4 * MAX_BYTES  # bytes of a record read before refusing it (JSON escapes grow text)
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class Record:
    """What a key was first used for: the draft's digest, the queued name and bytes."""

    __slots__ = ("data", "digest", "name")

    def __init__(self, digest: str, name: str, data: bytes) -> None:
        self.digest = digest
        self.name = name
        self.data = data


def digest(text: str) -> str:
    """The digest of a draft: equal drafts, equal arguments (pure)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def record_name(key: str) -> str:
    """The record's file name: any key becomes a safe name of fixed length (pure)."""
    return digest(key)


def render(record: Record) -> bytes:
    """A record's bytes (pure); `parse` reads them back."""
    fields = {"digest": record.digest, "name": record.name, "data": record.data.decode()}
    return json.dumps(fields, ensure_ascii=False).encode() + b"\n"


def parse(raw: bytes, sender: str) -> Record | None:
    """The record in `raw`, or None when it is not a whole record of `sender`'s (pure)."""
    try:
        fields = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
        return None
    if not isinstance(fields, dict):
        return None
    found, name, data = fields.get("digest"), fields.get("name"), fields.get("data")
    if not (isinstance(found, str) and isinstance(name, str) and isinstance(data, str)):
        return None
    if not _planned_by(name, sender):
        return None
    body = data.encode("utf-8", "surrogatepass")
    return Record(found, name, body) if len(body) <= MAX_BYTES else None


def _planned_by(name: str, sender: str) -> bool:
    """Whether `name` is a queue file name `sender`'s outbox could hold: one plain name,
    in the §2 form, no archive tail, nothing a path or a terminal would take amiss (pure)."""
    parts = hf.parse_name(name)
    plain = name.isascii() and name.isprintable() and "/" not in name
    only = hf.split_copy(name)[1] is None  # not an archived `….2.handoff`
    return plain and only and parts is not None and parts.sender == sender


# --- the records folder -------------------------------------------------------------------


class Records:
    """A role's records folder, locked for one keyed call (a context manager)."""

    def __init__(self, handoffs: str) -> None:
        self.folder = os.path.join(handoffs, FOLDER)
        self.fd = -1

    def __enter__(self) -> Records:
        _make_folder(self.folder)
        self.fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            if not hold(self.fd):  # a keyed call hung holding it: never waited on for ever
                raise Busy(Exit.BUSY, OUTBOX_BUSY_MESSAGE.format(folder=self.folder))
            self.expire(time.time())
        except BaseException:
            os.close(self.fd)
            raise
        return self

    def __exit__(self, *_: object) -> None:
        os.close(self.fd)  # releases the lock

    def find(self, key: str, sender: str) -> Record | None:
        """The record of `key`, if there is a whole one of `sender`'s."""
        try:
            fd = os.open(record_name(key), _READ, dir_fd=self.fd)
        except OSError:  # absent, or a symlink (ELOOP): no record to trust
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None  # a FIFO or device is never read
            raw = os.read(fd, LIMIT + 1)
        finally:
            os.close(fd)
        return parse(raw, sender) if len(raw) <= LIMIT else None

    def write(self, key: str, record: Record) -> None:
        """Store `record` for `key`, durably (§5: temp, fsync, rename, folder fsync), all
        relative to the folder we locked; whatever had its name (a link too) is replaced."""
        name = record_name(key)
        temp = os.path.basename(durable.temp_name(self.folder, name))
        fd = os.open(temp, _CREATE, 0o644, dir_fd=self.fd)
        try:
            try:
                durable.write_all(fd, render(record))
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(temp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            _unlink(temp, self.fd)
            raise
        os.fsync(self.fd)

    def expire(self, now: float) -> None:
        """Remove records older than TTL, and temp files a killed call left (the lock is
        ours: no other call is writing one).  A future time counts as young."""
        with os.scandir(self.fd) as entries:
            for entry in entries:
                info = entry.stat(follow_symlinks=False)
                stale = entry.name.startswith(".") and entry.name.endswith(".tmp")
                if _is_record_name(entry.name) and not stat.S_ISDIR(info.st_mode):
                    stale = not stat.S_ISREG(info.st_mode) or now - info.st_mtime > TTL
                if stale:
                    _unlink(entry.name, self.fd)


def _is_record_name(name: str) -> bool:
    return len(name) == 64 and all(c in "0123456789abcdef" for c in name)


def _make_folder(folder: str) -> None:
    """Create the records folder if needed; anything else at its name (a symlink, a
    file) is replaced, never followed."""
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        info = None
    if info is not None and stat.S_ISDIR(info.st_mode):
        return
    if info is not None:
        os.unlink(folder)
    os.makedirs(os.path.dirname(folder), exist_ok=True)
    try:
        os.mkdir(folder)
    except FileExistsError:
        return  # another call made it meanwhile
    durable.fsync_dir(os.path.dirname(folder))  # the folder outlives a power cut


def _unlink(name: str, folder_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=folder_fd)
    except FileNotFoundError:
        pass


# --- the call -------------------------------------------------------------------------------


def send(caller: Context, key: str, text: str, queue_once: Send, queued: Queued) -> Result:
    """`send_handoff` with an idempotency key: the draft `text` queued once per key, by
    `queue_once` (the send without a key), or, on a repeat, `queued`'s answer again.  The
    two are given by `ops.queue`, which calls this: no import goes back to it.  A refusal
    (an outbox that is no folder of its own, say) or an I/O error is the operation's
    result, as from any operation (`spec.Op.call`)."""
    wanted = digest(text)
    with Records(caller.me.handoffs) as records:
        record = records.find(key, caller.me.name)
        if record is None:
            recording = _recording(records, key, wanted)
            return queue_once(caller, text, "send_handoff", enqueue=recording)
        if record.digest != wanted:
            return refused(f"IDEMPOTENCY_CONFLICT: {key}")
        return _again(caller, record, queued)


def _recording(records: Records, key: str, wanted: str) -> Enqueue:
    """`outbox.queue`, with the record of the name written before the file is queued."""

    def enqueue(sender: Role, draft: Draft, now: float) -> str:
        while True:
            number = outbox.next_sequence(sender.handoffs)
            name, content = outbox.compose(draft, sender.name, number, now)
            data = content.render()
            records.write(key, Record(wanted, name, data))
            path = outbox.publish(sender, name, data)
            if path is not None:
                return path

    return enqueue


def _again(caller: Context, record: Record, queued: Queued) -> Result:
    """A repeated call: the first call's answer, having queued the recorded handoff only if
    it is nowhere (that call died between its record and its file)."""
    sender, parts = caller.me, hf.parse_name(record.name)
    sent_to = ""
    if not outbox.handoff_exists(caller.roles, hf.name_id(record.name)):
        if outbox.publish(sender, record.name, record.data) is None:
            raise OSError(errno.EEXIST, "a different file holds the recorded name", record.name)
        sent_to = ",".join(parts.recipients if parts else [])
    outcome = queued(caller.root, os.path.join(sender.path(Box.OUTBOX), record.name))
    return steps.after_step(caller, outcome, alive=True, changed=bool(sent_to), sent_to=sent_to)
