"""The .handoff file, the one owner of its format (docs/protocol.md §2, §8): file names and
their parts, the queue-item test, the header block and the §2 times.

A file is `key: value` header lines, one empty line, then an opaque body.  The body
belongs to the sender and is kept byte for byte; tools only add or replace headers.
The daemon and the helpers read a file strictly (`parse`, `read`: a broken file is an
error); views read only its header block, leniently (`read_headers`: what can be read
of a broken file is shown), and always through the careful reader (`safeio`).

Every helper imports this module, so it uses nothing beyond `os` and `time` and the
leaf modules it names (see the start-up budget in docs/performance.md).
"""

from __future__ import annotations

import os
import time

from handoffd.core import durable, safeio
from handoffd.core.config import OPERATOR, valid_role_name

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: every helper imports this module
if TYPE_CHECKING:
    from collections.abc import Sequence

# The header names more than one module reads (docs/protocol.md §2, §8, §13).
ID, SENDER, RECIPIENTS, PRIORITY, TYPE = "id", "from", "to", "priority", "type"
DEPENDS_ON, BLOCKED_REASON = "depends_on", "blocked_reason"
TASK, COMMIT, MESSAGE = "task", "commit", "message"  # what a type carries
ROLE = "role"  # a git handoff's sender, as its role's name
RECIPIENT = "recipient"  # the one role a copy is for (a pool's, §17): the daemon stamps it
# The §2 times a copy is stamped with as it moves (reopened: §13).
CREATED_AT, ENQUEUED_AT, DEQUEUED_AT = "created_at", "enqueued_at", "dequeued_at"
COMPLETED_AT, RELEASED_AT, REOPENED_AT = "completed_at", "released_at", "reopened_at"
REOPENED_BY, REOPENED_REASON = "reopened_by", "reopened_reason"  # who and why (§15)
# How many times a copy was reopened: the takes and completions a reopen wipes the stamps
# of stay counted (docs/protocol.md §19), since the file is the only record of them.
REOPENS = "reopens"
# ...and each earlier life's wait and work (`<seconds>/<seconds>`, comma-separated, the
# newest SPANS_KEPT), which the reopen wipes the stamps of: the numbers' durations too
# only ever grow (§19).
REOPENED_SPANS, SPANS_KEPT = "reopened_spans", 50
# A pool's copy (§17): who claimed it, and when and from whom it was taken back.
CLAIMED_BY, RECLAIMED_AT, RECLAIMED_FROM = "claimed_by", "reclaimed_at", "reclaimed_from"
# The operator's handoffs (§18): who sent one, the card a reply answers, who closed a card.
SENT_BY, IN_REPLY_TO = "sent_by", "in_reply_to"
REPLIED_BY, ACKED_BY = "replied_by", "acked_by"
REASON_LIMIT = 200  # characters of a `blocked_reason`: one line the board and live file show
SEPARATOR = "\n\n"
SUFFIX = ".handoff"
# The daemon delivers nothing over 64 KiB; a copy gains a few stamped headers.  A file
# planted larger than this is refused, never read whole.
READ_LIMIT = 1024 * 1024
HEADER_LIMIT = 64 * 1024  # the daemon refuses larger files: never read more of a header block
CHUNK = 4096


class HandoffError(Exception):
    """A file that is not a handoff; the message names the file and what is wrong."""


# --- names ----------------------------------------------------------------------------


class Name:
    """The parts of a queue file name: `<pri>_<stamp>_<seq>_from_<sender>_to_<r1>[_<r2>…]`."""

    __slots__ = ("priority", "recipients", "sender", "seq", "timestamp")

    def __init__(
        self, priority: str, timestamp: str, seq: str, sender: str, recipients: list[str]
    ) -> None:
        self.priority = priority
        self.timestamp = timestamp
        self.seq = seq
        self.sender = sender
        self.recipients = recipients

    @property
    def id(self) -> str:
        """The handoff's id: `<stamp>_<seq>_from_<sender>` (docs/protocol.md §2)."""
        return f"{self.timestamp}_{self.seq}{FROM}{self.sender}"

    def __repr__(self) -> str:
        return f"Name({self.priority}, {self.id}, to={self.recipients})"


FROM, TO = "_from_", "_to_"  # the words between a name's parts (docs/protocol.md §2)


def compose_id(stamp: str, sequence: int, sender: str) -> str:
    """The id of `sender`'s handoff number `sequence`, sent at `stamp` (`id_stamp`)."""
    return f"{stamp}_{sequence:06d}{FROM}{sender}"


def compose_name(priority: str, ident: str, recipients: Sequence[str]) -> str:
    """The queue file name of handoff `ident` to `recipients` (docs/protocol.md §2)."""
    return f"{priority}_{ident}{TO}{'_'.join(recipients)}{SUFFIX}"


def id_sender(ident: str) -> str | None:
    """The sender an id of the §2 form names (`<stamp>_<seq>_from_<sender>`, read by
    position as `parse_name` reads a name); None for an id not in that form."""
    fields = ident.split("_")
    if len(fields) != 4 or fields[2] != "from":
        return None
    stamp, seq, _, sender = fields
    return sender if _well_formed("00", stamp, seq, sender, [sender]) else None


def id_stamp_of(ident: str) -> str:
    """The §2 stamp an id starts with (all of it for an id with no `_`)."""
    return ident.partition("_")[0]


def id_mark(ident: str) -> str:
    """What a queue file name of handoff `ident` holds, wherever it lies in a listing."""
    return f"_{ident}{TO}"


def order_key(name: str) -> str:
    """A queue file's place by its name: the time and sequence it spells (the later sent,
    the higher), then the name; a name not in the §2 form sorts before every one that is."""
    if len(name) > 27 and name[2] == "_" and name[19] == "_" and name[26] == "_":
        return name[3:26] + "/" + name
    return "/" + name


def comma_list(value: str) -> list[str]:
    """The names a comma-separated header value lists (`to`, `depends_on`), in order, with
    blank ones dropped."""
    return [part for part in list_parts(value) if part]


def list_parts(value: str) -> list[str]:
    """Every part of a comma-separated value, stripped, blank ones kept (a draft's check
    refuses an empty name rather than pass over it)."""
    return [part.strip() for part in value.split(",")]


def parse_name(name: str) -> Name | None:
    """The parts of a queue file's name, or None for a name not in that form.

    The one rule of §2, by position: a role name holds no `_`, so the fifth field is the
    one sender, the sixth is `to`, and every field after it a recipient, each once.  A
    name is never searched for `_from_` or `_to_` (a recipient list that spells a second
    `_from_x_to_` is recipients named so, never a second sender).  An archived duplicate
    (`….2.handoff`, named so by `durable.free_name`) parses as the original: role names
    hold no `.`, so a dotted tail is never part of a recipient.
    """
    if not name.endswith(SUFFIX):
        return None
    fields = name[: -len(SUFFIX)].split(".", 1)[0].split("_")
    if len(fields) < 7 or fields[3] != "from" or fields[5] != "to":
        return None
    priority, stamp, seq, _, sender, _ = fields[:6]
    recipients = fields[6:]
    if not _well_formed(priority, stamp, seq, sender, recipients):
        return None
    return Name(priority, stamp, seq, sender, recipients)


def _well_formed(priority: str, stamp: str, seq: str, sender: str, to: list[str]) -> bool:
    return (
        len(priority) == 2
        and priority.isdigit()
        and len(stamp) == 16
        and stamp[8] == "T"
        and stamp.endswith("Z")
        and len(seq) == 6
        and seq.isdigit()
        and valid_role_name(sender)
        and bool(to)
        and all(valid_role_name(r) for r in to)
        and len(set(to)) == len(to)
    )


NAME_FORM = f"<priority>_<yyyymmddThhmmssZ>_<seq6>{FROM}<sender>{TO}<r1>[_<r2>…]{SUFFIX}"


def misnamed(name: str, sender: str, recipients: list[str]) -> str | None:
    """Why an original's name does not say what its headers say (docs/protocol.md §5.1),
    or None: read by `parse_name`'s one rule, it must spell exactly one sender, `sender`
    (its outbox's role and its `from`), and `recipients` (its `to`), in order."""
    parts = parse_name(name)
    if parts is None:
        return f"file name is not of the form {NAME_FORM} (each role named once)"
    if parts.sender != sender:
        return f"file name says it is from '{parts.sender}', not from the sending role '{sender}'"
    if parts.recipients != recipients:
        spelled, given = ", ".join(parts.recipients), ", ".join(recipients)
        return f"file name is addressed to ({spelled}), its 'to' header to ({given})"
    return None


def checked_sender(name: str, sender: str | None) -> str | None:
    """Who sent a queue file, as the daemon checks it before delivery (docs/protocol.md
    §5.1): its `from` header `sender` when its name, read by `parse_name`, names that one
    sender too; None when either says none or they differ (a file planted in an inbox by
    hand, its name forged to say another sender)."""
    parts = parse_name(name)
    return sender if parts is not None and sender and parts.sender == sender else None


def name_id(name: str) -> str:
    """The id a queue file name carries: `50_<stamp>_<seq>_from_a_to_b.handoff` →
    `<stamp>_<seq>_from_a` (docs/protocol.md §2).  For any name, well formed or not: one
    in the §2 form by `parse_name`'s rule (a sender named `to` included); any other (a
    hand-made file's) sliced up to its first `_to_` after the priority."""
    parts = parse_name(name)
    if parts is not None:
        return parts.id
    return name.removesuffix(SUFFIX)[3:].partition(TO)[0]


def split_copy(name: str) -> tuple[str, str | None]:
    """A queue file's name and the copy number an archive or an arrival added to it:
    `…_to_b.2.handoff` → (`…_to_b.handoff`, `2`); a plain name → (name, None).  A role
    name holds no `.`, so the first dot ends the fields; the tail is returned as found
    (whether it is a number is the caller's question: a peer may have chosen it)."""
    fields, dot, tail = name.removesuffix(SUFFIX).partition(".")
    return fields + SUFFIX, (tail if dot else None)


def file_id(name: str, header: str | None = None) -> str:
    """The id handoffd knows a queue file by, for every key and path (a report's folder, an
    answer, a card's name, a dependency, a look-up; docs/protocol.md §15, "Names"): the id
    its name spells (§2), whatever its `id` header says, which is only shown.  A name not
    in that form (a file made by hand) spells none: its `id` header then, when that is one
    plain name (`plain_id`), else the file name itself."""
    parts = parse_name(name)
    if parts is not None:
        return parts.id
    return header if header and plain_id(header) else name


def path_id(path: str) -> str:
    """The id the queue file at `path` goes by (`file_id`), its reports filed under and
    looked up by: the id its name spells, never an `id` header that differs from it; the
    header is read only for a name not in the §2 form."""
    name = os.path.basename(path)
    if parse_name(name) is not None:
        return file_id(name)
    try:
        header = read(path).get(ID)
    except HandoffError:
        header = None
    return file_id(name, header)


def plain_id(text: str) -> bool:
    """Whether `text` can name a handoff as a key and as a path's one segment: no `/`, no
    leading `.`, nothing unprintable (a control character, a line break), at most 255
    bytes, as a file name."""
    return (
        "/" not in text
        and not text.startswith(".")
        and text.isprintable()
        and len(text.encode("utf-8", "surrogatepass")) <= durable.NAME_MAX
    )


def parsed_id(name: str) -> str | None:
    """The id a queue file name in the §2 form carries; None for a name not in that form
    (`name_id` slices one out of any name)."""
    parts = parse_name(name)
    return parts.id if parts else None


def is_item(name: str) -> bool:
    """A queue item: a visible name ending in `.handoff` (docs/protocol.md §8; an editor's
    `x.handoff~`, a `notes.txt` or a hidden temp file is not)."""
    return name.endswith(SUFFIX) and not name.startswith(".")


def is_item_entry(entry: os.DirEntry[str], plain: bool = False) -> bool:
    """A listed queue item: `is_item`, and a regular file (a link, a FIFO or a folder by
    that name is no item, and is never followed); with `plain`, also a name fit to be
    printed on a TASK line (`name_problem`): what an agent takes."""
    if plain and name_problem(entry.name) is not None:
        return False
    return is_item(entry.name) and entry.is_file(follow_symlinks=False)


# What a listed entry is, as `os.DirEntry` tells without following a link (`kind`).
FILE, FOLDER, OTHER = "file", "folder", "other"


def kind(entry: os.DirEntry[str]) -> str:
    if entry.is_file(follow_symlinks=False):
        return FILE
    return FOLDER if entry.is_dir(follow_symlinks=False) else OTHER


def name_problem(name: str) -> str | None:
    """Why `name` cannot be a queue file's name (docs/protocol.md §15, "Names"), or None: a
    control character in it (it would reach an agent's TASK line, a console or a pane as
    something to obey), or more bytes than a file name may have.  The daemon refuses such
    a file; no helper takes one."""
    if not name.isprintable():
        from handoffd.core.terminal import escape, has_control

        if has_control(name):
            first = next(char for char in name if has_control(char))
            return f"its file name holds a control character ({escape(first)})"
    if len(name) * 4 > durable.NAME_MAX and len(name.encode("utf-8", "surrogateescape")) > (
        durable.NAME_MAX
    ):
        return f"its file name is longer than {durable.NAME_MAX} bytes"
    return None


def plain_name(name: str) -> str:
    """`name` with each control character written as its escape (`\\x1b`): the name a
    refused file with such a name is archived under, safe to list and to print."""
    if name.isprintable():
        return name
    from handoffd.core.terminal import escape

    return escape(name)


def is_visible(name: str) -> bool:
    """Entries starting with `.` are working files of some tool, never queue items."""
    return not name.startswith(".")


def visible(directory: str) -> list[os.DirEntry[str]]:
    """The visible entries of `directory`, sorted by name; a missing folder is an empty one.
    Other errors (an unreadable folder, say) are the caller's to report."""
    try:
        with os.scandir(directory) as entries:
            return sorted((e for e in entries if is_visible(e.name)), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []


# --- the header block: strictly, for the daemon and the helpers -----------------------


class Handoff:
    """Parsed headers (in file order) and the untouched body text."""

    __slots__ = ("body", "headers")

    def __init__(self, headers: list[tuple[str, str]], body: str) -> None:
        self.headers = headers
        self.body = body

    def get(self, key: str, default: str | None = None) -> str | None:
        """The value of the first `key` header, or `default`."""
        for name, value in self.headers:
            if name == key:
                return value
        return default

    def set(self, key: str, value: str) -> None:
        """Replace `key`'s line in place, or append it at the end of the header block."""
        for index, (name, _) in enumerate(self.headers):
            if name == key:
                self.headers[index] = (key, value)
                return
        self.headers.append((key, value))

    def without(self, key: str) -> list[tuple[str, str]]:
        """The headers, less every `key` line."""
        return [(name, value) for name, value in self.headers if name != key]

    def render(self) -> bytes:
        """The file's bytes; `parse(h.render())` gives back the same headers and body."""
        head = "\n".join(f"{name}: {value}" for name, value in self.headers)
        return (head + SEPARATOR + self.body).encode("utf-8")


def parse(data: bytes, source: str) -> Handoff:
    """Parse a handoff file's bytes; `source` names the file in errors."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise HandoffError(f"{source}: not UTF-8 text (bad byte at offset {error.start})") from None
    end = -1 if text.startswith("\n") else text.find(SEPARATOR)
    if end < 0:
        raise HandoffError(f"{source}: no header block (header lines, then an empty line)")
    headers = []
    for number, line in enumerate(text[:end].split("\n"), start=1):
        name, sep, value = line.partition(": ")
        if not sep or not name:
            raise HandoffError(f"{source}: header line {number} is not 'key: value': {line!r}")
        headers.append((name, value))
    return Handoff(headers, text[end + len(SEPARATOR) :])


def read(path: str) -> Handoff:
    """Read and parse the handoff at `path`."""
    try:  # never through a link, from a FIFO or past the limit
        data = safeio.read_regular(path, READ_LIMIT)
    except safeio.Refused as refusal:
        raise HandoffError(f"{path}: cannot read: {refusal.why}") from None
    except OSError as error:
        raise HandoffError(f"{path}: cannot read: {error.strerror}") from None
    return parse(data, path)


def unfit(path: str) -> str | None:
    """Why the file at `path` cannot be handed out (`read` refuses it: too large, not UTF-8,
    no header block…), said without its path; None when it can, or when it is gone (taken
    meanwhile).  A pool's `new/` is every member's: such a file there is skipped, and the
    board shows it red with this (docs/protocol.md §17)."""
    try:
        read(path)
    except HandoffError as error:
        if not os.path.lexists(path):
            return None
        return str(error).removeprefix(f"{path}: ")
    return None


def stamp(path: str, key: str, value: str) -> Handoff:
    """Set one header of the file at `path`, replacing the file atomically."""
    handoff = read(path)
    handoff.set(key, value)
    durable.replace(path, handoff.render())
    return handoff


# --- the header block: leniently, for views ---------------------------------------------


def read_headers(path: str) -> dict[str, str]:
    """The header block of the file at `path`, read with the careful reader in chunks up to
    its first empty line; the body is never read.  Raises `FileNotFoundError` if the file
    is gone (it moved), and `safeio.Refused` for a link, FIFO or anything else that is not
    a regular file."""
    fd = safeio.open_regular(path)
    try:
        return parse_headers(read_head(fd))
    finally:
        os.close(fd)


def read_head(fd: int) -> bytes:
    """Bytes of the file open at `fd` up to the end of its header block (or of the file, or
    of the limit)."""
    data = b""
    while len(data) < HEADER_LIMIT:
        chunk = os.read(fd, CHUNK)
        if not chunk:
            break
        start = max(0, len(data) - 1)  # the empty line may straddle two chunks
        data += chunk
        end = 0 if data.startswith(b"\n") else data.find(b"\n\n", start)
        if end >= 0:
            return data[:end]
    return data


def parse_headers(head: bytes) -> dict[str, str]:
    """`key: value` lines into a dict (the first of a repeated key wins).  Lenient: a
    broken file (say, one in `failed/`) yields what can be read, never an error."""
    text = head.decode("utf-8", errors="replace")
    end = text.find(SEPARATOR)
    headers: dict[str, str] = {}
    for key, value in header_lines(text if end < 0 else text[:end]):
        headers.setdefault(key, value)
    return headers


def header_lines(head: str) -> list[tuple[str, str]]:
    """A header block's `key: value` lines in file order, repeats included; a line that is
    not one is left out."""
    pairs = (line.partition(": ") for line in head.split("\n"))
    return [(key, value) for key, sep, value in pairs if sep and key]


def split_lenient(text: str) -> tuple[list[tuple[str, str]], str]:
    """A file's header lines and its body, leniently: a file with no empty line is all
    body, with no headers (what a broken file holds is shown, never refused)."""
    head, sep, body = text.partition(SEPARATOR)
    return (header_lines(head), body) if sep else ([], text)


def label(headers: dict[str, str]) -> str:
    """What a handoff is about, in a few words: its task, else its note, else its id."""
    task, message = headers.get(TASK), headers.get(MESSAGE)
    if task:
        return task
    if message:
        return f'note "{message}"'
    return headers.get(ID) or "an untitled handoff"


def sender_shown(sender: str, headers: dict[str, str]) -> str:
    """How the views name a handoff's sender: `operator (<name>)` for one the operator sent
    with its `sent_by` (docs/protocol.md §18), else the sender itself."""
    who = headers.get(SENT_BY)
    return f"{sender} ({who})" if who and sender == OPERATOR else sender


# --- §2 times ---------------------------------------------------------------------------


def reopen_count(count: str | None, reopened_at: str | None) -> int:
    """How many times a copy was reopened, as its headers say: its `reopens` count (at
    most a million: a hand-written figure is not believed past it), else one if it carries
    a `reopened_at` (reopened before the count was kept), else none."""
    if count is not None and count.isdigit() and len(count) <= 6:
        return int(count)
    return 1 if reopened_at else 0


def life_spans(headers: Handoff) -> str:
    """`reopened_spans` with the life a reopen now ends added: its wait (since it arrived,
    or was last reopened, until taken) and its work (until completed); `-` for one whose
    stamps are missing."""
    start = epoch(headers.get(REOPENED_AT)) or epoch(headers.get(ENQUEUED_AT))
    taken, done = epoch(headers.get(DEQUEUED_AT)), epoch(headers.get(COMPLETED_AT))
    wait = _span(start, taken)
    work = _span(taken, done)
    kept = [f"{_seconds(a)}/{_seconds(b)}" for a, b in spans(headers.get(REOPENED_SPANS))]
    return ",".join([*kept, f"{_seconds(wait)}/{_seconds(work)}"][-SPANS_KEPT:])


def spans(value: str | None) -> list[tuple[float | None, float | None]]:
    """The earlier lives a `reopened_spans` header holds, each (wait, work) in seconds;
    a part that is not one is left out (a hand-edited header is not believed)."""
    found: list[tuple[float | None, float | None]] = []
    for part in (value or "").split(",")[-SPANS_KEPT:]:
        wait, slash, work = part.partition("/")
        if slash:
            found.append((_number(wait), _number(work)))
    return found


def _span(start: float | None, end: float | None) -> float | None:
    return None if start is None or end is None or end < start else end - start


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0 <= value < 1e10 else None  # NaN and infinities fail both


def epoch(stamp: str | None) -> float | None:
    """Seconds since 1970 of a §2 time (one without a zone is UTC); None if it is not one.

    The §2 form (`2026-06-15T14:05:31.482113Z`) is read by hand: a helper reads one on
    every call, and importing `datetime` would cost it more than its whole rewrite.  Any
    other ISO 8601 form (a date, an offset) goes through `datetime`, which gives the same
    number for the §2 form, to the bit.
    """
    if not stamp:
        return None
    quick = _epoch_of_form(stamp)
    if quick is not None:
        return quick
    from datetime import UTC, datetime

    try:
        moment = datetime.fromisoformat(stamp)
    except (TypeError, ValueError):
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _epoch_of_form(stamp: str) -> float | None:
    """`epoch` of a stamp of the §2 form with a valid date and time; None for any other."""
    if len(stamp) < 19 or stamp[4::3][:5] != "--T::":  # the separators at 4, 7, 10, 13, 16
        return None
    rest = stamp[19:].removesuffix("Z")
    if rest and (rest[0] != "." or len(rest) == 1):
        return None
    fraction = rest[1:]
    digits = stamp[:4] + stamp[5:7] + stamp[8:10] + stamp[11:13] + stamp[14:16] + stamp[17:19]
    if not ((digits + fraction).isascii() and (digits + fraction).isdigit()):
        return None
    year, month, day = int(stamp[:4]), int(stamp[5:7]), int(stamp[8:10])
    hour, minute, second = int(stamp[11:13]), int(stamp[14:16]), int(stamp[17:19])
    if not (year and 1 <= month <= 12 and 1 <= day <= _month_days(year, month)):
        return None
    if hour > 23 or minute > 59 or second > 59:
        return None
    micros = int(fraction[:6].ljust(6, "0")) if fraction else 0  # datetime cuts past 6 digits
    seconds = _days(year, month, day) * 86400 + hour * 3600 + minute * 60 + second
    return (seconds * 1_000_000 + micros) / 1_000_000  # as timedelta.total_seconds counts


def _month_days(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _days(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to a date of the proleptic Gregorian calendar."""
    year -= month <= 2
    era = year // 400
    of_era = year - era * 400
    of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    of_cycle = of_era * 365 + of_era // 4 - of_era // 100 + of_year
    return era * 146097 + of_cycle - 719468


def iso_now(now: float | None = None) -> str:
    """An audit timestamp: ISO 8601 UTC with microseconds, ending in `Z`."""
    now = time.time() if now is None else now
    micros = int(now * 1_000_000) % 1_000_000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{micros:06d}Z"


def iso_micros(micros: int) -> str:
    """The §2 timestamp of a time in epoch microseconds (exact: no float rounding)."""
    seconds, fraction = divmod(micros, 1_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{fraction:06d}Z"


def iso_seconds(now: float) -> str:
    """`2026-06-15T14:05:31Z`: a §2 timestamp to the second."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))


def id_stamp(now: float | None = None) -> str:
    """The compact UTC timestamp used in filenames and ids: `yyyymmddThhmmssZ`."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))


def file_stamp(micros: int) -> str:
    """`yyyymmddThhmmss.ffffffZ` of a time in epoch microseconds (a report's file name):
    names sort by time."""
    seconds, fraction = divmod(micros, 1_000_000)
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(seconds)) + f".{fraction:06d}Z"


def iso_from_stamp(stamp: str) -> str:
    """The §2 time a compact stamp spells (`20260615T140531[.482113]Z`, as in ids and report
    names) -> `2026-06-15T14:05:31[.482113]Z`; anything else unchanged."""
    if len(stamp) < 16 or stamp[8] != "T":
        return stamp
    return f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}T{stamp[9:11]}:{stamp[11:13]}:{stamp[13:]}"


def short_time(stamp: str) -> str:
    """`2026-06-15 14:05Z`, enough to place a time in a day (a row of a view); the stamp
    unchanged if it is not a time."""
    when = epoch(stamp)
    return time.strftime("%Y-%m-%d %H:%MZ", time.gmtime(when)) if when is not None else stamp
