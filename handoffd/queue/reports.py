"""Reports: what an agent said about a handoff, kept beside the queue, never in it.

`H/reports/<id>/<yyyymmddThhmmss.ffffffZ>_<STATUS>.md` — Markdown with a YAML front
matter block (`status role agent conversation reported_at`), the newest `KEEP` per id
(docs/protocol.md §8).  "Newest" is the order they were written in: by mtime, then by
name (a name carries the writer's clock, which can be set back; and a name can be planted).

Anyone may write under `.swarmforge/`, so a folder here is opened without following a link
(a link where `reports/` or `reports/<id>/` should be is replaced by a real folder, never
written or pruned through), and a report is read with the careful reader: a link, a FIFO
or a file over the limit is skipped, never followed, waited on or read whole.

The scan reads each card's latest report here (`head`), and lists the report folders
(`report_ids`, `report_paths`); the front matter's YAML is imported only when a report
is read or written, so listing costs a view nothing more.
"""

from __future__ import annotations

import os
import stat

from handoffd.core import durable, safeio
from handoffd.core.handoff import epoch, file_stamp, is_visible, iso_from_stamp, iso_micros

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: a helper's take asks `has_answer`
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    T = TypeVar("T")

KEEP = 50
MAX_TEXT = 64 * 1024  # a report's text (docs/protocol.md §8)
MAX_FILE = MAX_TEXT + 16 * 1024  # the file: its text, and room for the front matter
STATUSES = ("RUNNING", "BLOCKED", "DONE")
FIELDS = ("status", "role", "agent", "conversation", "reported_at")
ANSWER = "ANSWER"  # an operator's reply (docs/protocol.md §13): its front matter adds `question`
ANSWER_SUFFIX = f"_{ANSWER}.md"


_handler: list[Any] = []  # the front matter handler, made on first use


def handler() -> Any:
    """The front matter handler whose every scalar stays a string: `05`, `yes` and dates
    are not coerced.  Made on first use: importing YAML costs a view that only lists
    report folders more than the listing."""
    if not _handler:
        import yaml
        from frontmatter.default_handlers import YAMLHandler

        class StringYAML(YAMLHandler):
            def load(self, fm: str, **kwargs: object) -> Any:
                # BaseLoader: every scalar a str.  Its libyaml twin, where built, reads the
                # same 25 times faster (a digest reads hundreds of reports: §11).
                return yaml.load(fm, Loader=getattr(yaml, "CBaseLoader", yaml.BaseLoader))

        _handler.append(StringYAML())
    return _handler[0]


class Report:
    """One stored report: its front matter fields, its text and where it lives."""

    __slots__ = (
        "agent", "conversation", "path", "question", "reported_at", "role", "status", "text",
    )  # fmt: skip

    def __init__(self, path: str, fields: dict[str, str], text: str) -> None:
        self.path = path
        self.question = fields.get("question", "")  # an answer's: the reason it answers
        self.status = fields.get("status", "")
        self.role = fields.get("role", "")
        self.agent = fields.get("agent", "")
        self.conversation = fields.get("conversation", "")
        self.reported_at = fields.get("reported_at", "")
        self.text = text

    @property
    def first_line(self) -> str:
        """Its text's first line that is not blank, stripped ('' for an empty report)."""
        return next((line.strip() for line in self.text.splitlines() if line.strip()), "")

    def __repr__(self) -> str:
        return f"Report({self.status!r}, {self.role!r}, {self.reported_at!r}, {self.path!r})"


class Head:
    """What a view shows of a card's latest report: status, who, when, its first line."""

    __slots__ = ("agent", "first_line", "path", "reported_at", "role", "status")

    def __init__(
        self, status: str, role: str, agent: str, reported_at: str, first_line: str, path: str
    ) -> None:
        self.status = status
        self.role = role
        self.agent = agent
        self.reported_at = reported_at
        self.first_line = first_line
        self.path = path

    def __repr__(self) -> str:
        return f"Head({self.status!r}, {self.reported_at!r}, {self.path!r})"


def head(path: str) -> Head | None:
    """The head of the report at `path`; None for one gone since it was listed, or that
    is not a file a reader may open."""
    try:
        report = read(path)
    except (OSError, ValueError):
        return None
    fields = (report.status, report.role, report.agent, report.reported_at)
    return Head(*fields, report.first_line, path)


def read(path: str) -> Report:
    """Read the report at `H/reports/<id>/<name>`, reached from `H` through no link; a
    field its front matter lacks (or a hand-broken one) reads as '', except the status
    and the time, which its file name also spells.  `safeio.Refused` (an `OSError`) for a
    file that is not a regular one, or that is larger than any report can be."""
    import frontmatter
    import yaml

    handoffs = os.path.dirname(os.path.dirname(os.path.dirname(path)))
    text = safeio.read_regular(path, MAX_FILE, below=handoffs).decode("utf-8", "replace")
    try:
        post = frontmatter.loads(text, handler=handler())
        metadata, content = post.metadata, post.content
    except yaml.YAMLError:
        metadata, content = {}, text.strip("\n")
    fields = {key: value for key, value in metadata.items() if isinstance(value, str)}
    if not fields.get("status"):
        fields["status"] = _status_of(os.path.basename(path))
    if not fields.get("reported_at"):
        fields["reported_at"] = name_time(os.path.basename(path))
    return Report(path, fields, content)


def name_time(name: str) -> str:
    """The §2 time a report's file name starts with (`<stamp>_<STATUS>.md`)."""
    return iso_from_stamp(name.partition("_")[0])


def _status_of(name: str) -> str:
    """The status a report's file name carries (`…_DONE.md` → `DONE`)."""
    stem = name[:-3] if name.endswith(".md") else name
    return stem.rpartition("_")[2]


def directory(handoffs: str, card_id: str) -> str:
    return os.path.join(handoffs, "reports", card_id)


def render(fields: dict[str, str], text: str) -> str:
    """The report file's text: front matter in `FIELDS` order, then the trimmed text."""
    import frontmatter

    post = frontmatter.Post(text.strip("\n"), handler=handler(), **fields)
    return frontmatter.dumps(post, handler=handler(), sort_keys=False) + "\n"


def store(
    handoffs: str,
    card_id: str,
    status: str,
    role: str,
    agent: str,
    conversation: str,
    text: str,
    now: float,
    extra: dict[str, str] | None = None,
) -> str:
    """Write a report durably (temp, fsync, rename), prune to the newest `KEEP`; its path.
    `extra`: front matter fields after the usual ones (an answer's `question`).
    Every step names the file relative to the folder's descriptor, opened without
    following a link: nothing is ever written or removed through one."""
    fd = open_folder(handoffs, card_id)
    try:
        durable.sweep_stale_at(fd)  # what a writer killed mid-report left: unseen, for good
        name, micros = _free_name(fd, now, status)
        # reported_at is the name's own time, to the microsecond: the two never disagree
        stamp = iso_micros(micros)
        fields = dict(zip(FIELDS, (status, role, agent, conversation, stamp), strict=True))
        fields.update(extra or {})
        data = render(fields, text).encode("utf-8")
        durable.replace_at(fd, name, data)
        _prune(fd, KEEP, written=name)
    finally:
        os.close(fd)
    return os.path.join(directory(handoffs, card_id), name)


def open_folder(handoffs: str, card_id: str) -> int:
    """A descriptor on `H/reports/<id>/`, made if missing; `H` is the role's handoff
    directory (trusted, as by every command), the two folders below it are not."""
    durable.makedirs(handoffs)  # durable: `REPORTED:` must name a report a power cut keeps
    top = os.open(handoffs, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        folder = _own_folder(top, "reports", os.path.join(handoffs, "reports"))
    finally:
        os.close(top)
    try:
        return _own_folder(folder, card_id, directory(handoffs, card_id))
    finally:
        os.close(folder)


def _own_folder(parent: int, name: str, shown: str) -> int:
    """The folder `name` in the folder open at `parent`, made if missing.  A link in its
    place is removed (the link itself: what it points at is not ours) and a folder made."""
    for _ in range(3):  # a writer racing us may put the link back: try a few times
        try:
            return safeio.open_dir(name, dir_fd=parent)
        except FileNotFoundError:
            pass
        except safeio.NotRegular:
            mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
            if not stat.S_ISLNK(mode):  # a file or a FIFO by that name: refused, never removed
                what = safeio.kind(mode) or "a regular file"
                raise safeio.NotRegular(shown, f"{what}, not a folder: remove it, then run "
                                        "this again (no report was written)") from None  # fmt: skip
            durable.unlink_quietly(name, dir_fd=parent)
        try:
            os.mkdir(name, 0o755, dir_fd=parent)
            os.fsync(parent)  # the new folder's name is durable before a report is in it
        except FileExistsError:
            pass
    raise safeio.NotRegular(shown, "kept being replaced by a link; no report was written")


def _free_name(fd: int, now: float, status: str) -> tuple[str, int]:
    """A report name no other report in the folder `fd` has, and its time in epoch
    microseconds: two in one microsecond take the next one."""
    micros = round(now * 1_000_000)
    while True:
        name = f"{file_stamp(micros)}_{status}.md"
        try:
            os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return name, micros
        micros += 1


def prune(handoffs: str, card_id: str, keep: int = KEEP) -> list[str]:
    """Remove all but the newest `keep` reports of a handoff; the paths removed."""
    try:
        fd = safeio.open_dir(directory(handoffs, card_id), below=handoffs)
    except OSError:  # no folder, or a link: nothing of ours to remove
        return []
    try:
        return [os.path.join(directory(handoffs, card_id), n) for n in _prune(fd, keep)]
    finally:
        os.close(fd)


def _prune(fd: int, keep: int, written: str | None = None) -> list[str]:
    """Remove all but the newest `keep` reports in the folder open at `fd` (regular files
    only); never `written`, the report just stored, whatever its time or name says, and
    never an answer: an operator's reply is kept while its card is open (a report is
    stored only on an open card), whatever the count (docs/protocol.md §13)."""
    order = [
        name
        for name in written_order(fd, ".md")
        if name != written and not name.endswith(ANSWER_SUFFIX)
    ]
    if written is not None and written.endswith(ANSWER_SUFFIX):
        written = None  # not one of the role's own: the count of those is unchanged
    others = keep - 1 if written is not None else keep
    stale = order[: max(len(order) - others, 0)] if keep else order
    for name in stale:
        durable.unlink_quietly(name, dir_fd=fd)
    return stale


# --- the report folders (`H/reports/<id>/`) -------------------------------------------


def report_ids(handoffs: str) -> set[str]:
    """The ids with a report folder in `H/reports/`.  A link where `reports/` or one of its
    folders should be is not followed: it holds no reports (docs/protocol.md Part II)."""

    def folders(fd: int) -> set[str]:
        with os.scandir(fd) as entries:
            return {
                e.name for e in entries if is_visible(e.name) and e.is_dir(follow_symlinks=False)
            }

    return _in_folder(handoffs, "reports", folders, set())


def report_paths(handoffs: str, ident: str) -> list[str]:
    """The paths of the reports in `H/reports/<ident>/`, oldest first (`written_order`);
    none when that folder, or `reports/`, is missing or a link."""
    folder = os.path.join(handoffs, "reports", ident)
    names: list[str] = _in_folder(
        handoffs, f"reports/{ident}", lambda fd: written_order(fd, ".md"), []
    )
    return [os.path.join(folder, name) for name in names]


def has_answer(handoffs: str, ident: str) -> bool:
    """Whether `H/reports/<ident>/` holds an answer's name: one listing of the folder, opened
    as `report_paths` opens it (no link followed), no file read.  A helper asks it of each
    card it takes; the careful read is `latest_answer`'s."""
    if not ident or "/" in ident or not is_visible(ident) or "\0" in ident:
        return False

    def answered(fd: int) -> bool:
        return any(name.endswith(ANSWER_SUFFIX) for name in os.listdir(fd))

    return _in_folder(handoffs, f"reports/{ident}", answered, False)


def _in_folder(handoffs: str, relative: str, look: Callable[[int], T], none: T) -> T:
    """What `look` finds in the folder `H/<relative>`, opened without following a link on
    the way (`safeio.open_dir`); `none` when it is missing, a link, or cannot be listed."""
    try:
        fd = safeio.open_dir(os.path.join(handoffs, relative), below=handoffs)
    except OSError:
        return none
    try:
        return look(fd)
    except OSError:
        return none
    finally:
        os.close(fd)


def written_order(fd: int, suffix: str) -> list[str]:
    """The visible regular files named `*<suffix>` in the folder open at `fd`, oldest first
    by mtime, then by name.  Not by name alone: a name carries the writer's clock, and a
    clock set back (or a planted `2999…` name) must not make a new report the oldest."""
    found = []
    for name in os.listdir(fd):
        if is_visible(name) and name.endswith(suffix):
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:  # pruned since the listing
                continue
            if stat.S_ISREG(info.st_mode):  # a link or a FIFO is no report
                found.append((info.st_mtime_ns, name))
    return [name for _, name in sorted(found)]


def latest_answer(handoffs: str, ident: str, since: str | None = None) -> Report | None:
    """The newest answer on `ident` in `H/reports/<ident>/`, while no report of the role's
    own is newer than it (the role has not spoken since: docs/protocol.md §13), nor is the
    time `since` (a §2 timestamp: the copy was reopened after it, §15); None otherwise, or
    when it cannot be read."""
    after = epoch(since) if since else None
    for path in reversed(report_paths(handoffs, ident)):  # newest first, as written
        if not path.endswith(ANSWER_SUFFIX):
            return None
        try:
            found = read(path)
        except (OSError, ValueError):
            continue
        said = epoch(found.reported_at)
        return None if after is not None and said is not None and said < after else found
    return None
