"""Reports: what an agent said about a handoff, kept beside the queue, never in it.

`H/reports/<id>/<yyyymmddThhmmss.ffffffZ>_<STATUS>.md` — Markdown with a YAML front
matter block (`status role agent conversation reported_at`), the newest `KEEP` per id
(docs/protocol.md §8).  "Newest" is the order they were written in: by mtime, then by
name (a name carries the writer's clock, which can be set back; and a name can be planted).

Anyone may write under `.swarmforge/`, so a folder here is opened without following a link
(a link where `reports/` or `reports/<id>/` should be is replaced by a real folder, never
written or pruned through), and a report is read with the careful reader: a link, a FIFO
or a file over the limit is skipped, never followed, waited on or read whole.
"""

from __future__ import annotations

import os
import stat
from typing import Any

import frontmatter
import yaml
from frontmatter.default_handlers import YAMLHandler

from handoffd import durable, safeio, scan
from handoffd.handoff import file_stamp, iso_from_stamp, iso_micros

KEEP = 50
MAX_TEXT = 64 * 1024  # a report's text (docs/protocol.md §8)
MAX_FILE = MAX_TEXT + 16 * 1024  # the file: its text, and room for the front matter
STATUSES = ("RUNNING", "BLOCKED", "DONE")
FIELDS = ("status", "role", "agent", "conversation", "reported_at")


class _StringYAML(YAMLHandler):
    """Front matter whose every scalar stays a string: `05`, `yes` and dates are not coerced."""

    def load(self, fm: str, **kwargs: object) -> Any:
        # BaseLoader: every scalar a str.  Its libyaml twin, where built, reads the same
        # 25 times faster (a digest reads hundreds of reports: docs/protocol.md §11).
        return yaml.load(fm, Loader=getattr(yaml, "CBaseLoader", yaml.BaseLoader))


HANDLER = _StringYAML()


class Report:
    """One stored report: its front matter fields, its text and where it lives."""

    __slots__ = ("agent", "conversation", "path", "reported_at", "role", "status", "text")

    def __init__(self, path: str, fields: dict[str, str], text: str) -> None:
        self.path = path
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


def read(path: str) -> Report:
    """Read the report at `H/reports/<id>/<name>`, reached from `H` through no link; a
    field its front matter lacks (or a hand-broken one) reads as '', except the status
    and the time, which its file name also spells.  `safeio.Refused` (an `OSError`) for a
    file that is not a regular one, or that is larger than any report can be."""
    handoffs = os.path.dirname(os.path.dirname(os.path.dirname(path)))
    text = safeio.read_regular(path, MAX_FILE, below=handoffs).decode("utf-8", "replace")
    try:
        post = frontmatter.loads(text, handler=HANDLER)
        metadata, content = post.metadata, post.content
    except yaml.YAMLError:
        metadata, content = {}, text.strip("\n")
    fields = {key: value for key, value in metadata.items() if isinstance(value, str)}
    if not fields.get("status"):
        fields["status"] = _status_of(os.path.basename(path))
    if not fields.get("reported_at"):
        fields["reported_at"] = iso_from_stamp(os.path.basename(path).partition("_")[0])
    return Report(path, fields, content)


def _status_of(name: str) -> str:
    """The status a report's file name carries (`…_DONE.md` → `DONE`)."""
    stem = name[:-3] if name.endswith(".md") else name
    return stem.rpartition("_")[2]


def directory(handoffs: str, card_id: str) -> str:
    return os.path.join(handoffs, "reports", card_id)


def files(handoffs: str, card_id: str) -> list[str]:
    """The paths of a handoff's reports, oldest first (in the order they were written)."""
    return scan.report_paths(handoffs, card_id)


def render(fields: dict[str, str], text: str) -> str:
    """The report file's text: front matter in `FIELDS` order, then the trimmed text."""
    post = frontmatter.Post(text.strip("\n"), handler=HANDLER, **fields)
    return frontmatter.dumps(post, handler=HANDLER, sort_keys=False) + "\n"


def store(
    handoffs: str,
    card_id: str,
    status: str,
    role: str,
    agent: str,
    conversation: str,
    text: str,
    now: float,
) -> str:
    """Write a report durably (temp, fsync, rename), prune to the newest `KEEP`; its path.
    Every step names the file relative to the folder's descriptor, opened without
    following a link: nothing is ever written or removed through one."""
    fd = open_folder(handoffs, card_id)
    try:
        name, micros = _free_name(fd, now, status)
        # reported_at is the name's own time, to the microsecond: the two never disagree
        stamp = iso_micros(micros)
        fields = dict(zip(FIELDS, (status, role, agent, conversation, stamp), strict=True))
        data = render(fields, text).encode("utf-8")
        temp = os.path.basename(durable.temp_name("", name))
        durable.create(temp, data, dir_fd=fd)
        try:
            os.rename(temp, name, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:
            durable.unlink_quietly(temp, dir_fd=fd)
            raise
        os.fsync(fd)
        _prune(fd, KEEP, written=name)
    finally:
        os.close(fd)
    return os.path.join(directory(handoffs, card_id), name)


def open_folder(handoffs: str, card_id: str) -> int:
    """A descriptor on `H/reports/<id>/`, made if missing; `H` is the role's handoff
    directory (trusted, as by every command), the two folders below it are not."""
    os.makedirs(handoffs, exist_ok=True)
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
            if not stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
                raise  # a file or a FIFO by that name: refused, never removed
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
    only); never `written`, the report just stored, whatever its time or name says."""
    order = [name for name in scan.written_order(fd, ".md") if name != written]
    others = keep - 1 if written is not None else keep
    stale = order[: max(len(order) - others, 0)] if keep else order
    for name in stale:
        durable.unlink_quietly(name, dir_fd=fd)
    return stale
