"""Reports: what an agent said about a handoff, kept beside the queue, never in it.

`H/reports/<id>/<yyyymmddThhmmss.ffffffZ>_<STATUS>.md` — Markdown with a YAML front
matter block (`status role agent conversation reported_at`), the newest `KEEP` per id
(docs/protocol.md §8).  Names sort by time, so "oldest first" is name order.
"""

from __future__ import annotations

import os
import time
from typing import Any

import frontmatter
import yaml
from frontmatter.default_handlers import YAMLHandler

from handoffd import durable
from handoffd.handoff import iso_from_stamp

KEEP = 50
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
    """Read a report; a field its front matter lacks (or a hand-broken one) reads as '',
    except the status and the time, which its file name also spells."""
    with open(path, encoding="utf-8", errors="replace") as file:
        text = file.read()
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
    """The paths of a handoff's reports, oldest first (by name)."""
    try:
        names = os.listdir(directory(handoffs, card_id))
    except (FileNotFoundError, NotADirectoryError):
        return []
    folder = directory(handoffs, card_id)
    return [os.path.join(folder, n) for n in sorted(names) if _is_report(n)]


def _is_report(name: str) -> bool:
    return not name.startswith(".") and name.endswith(".md")


def render(fields: dict[str, str], text: str) -> str:
    """The report file's text: front matter in `FIELDS` order, then the trimmed text."""
    post = frontmatter.Post(text.strip("\n"), handler=HANDLER, **fields)
    return frontmatter.dumps(post, handler=HANDLER, sort_keys=False) + "\n"


def file_stamp(micros: int) -> str:
    """`yyyymmddThhmmss.ffffffZ` of a time in epoch microseconds: names sort by time."""
    seconds, fraction = divmod(micros, 1_000_000)
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(seconds)) + f".{fraction:06d}Z"


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
    """Write a report durably (temp, fsync, rename), prune to the newest `KEEP`; its path."""
    folder = directory(handoffs, card_id)
    os.makedirs(folder, exist_ok=True)
    path, micros = _free_path(folder, now, status)
    # reported_at is the name's own time, to the microsecond: the two never disagree
    stamp = _iso(micros)
    fields = dict(zip(FIELDS, (status, role, agent, conversation, stamp), strict=True))
    data = render(fields, text).encode("utf-8")
    temp = durable.temp_name(folder, os.path.basename(path))
    durable.create(temp, data)
    try:
        os.rename(temp, path)
    except BaseException:
        durable.unlink_quietly(temp)
        raise
    durable.fsync_dir(folder)
    prune(handoffs, card_id)
    return path


def _free_path(folder: str, now: float, status: str) -> tuple[str, int]:
    """A report name no other report has, and its time in epoch microseconds: two in one
    microsecond take the next one."""
    micros = round(now * 1_000_000)
    while True:
        path = os.path.join(folder, f"{file_stamp(micros)}_{status}.md")
        if not os.path.lexists(path):
            return path, micros
        micros += 1


def _iso(micros: int) -> str:
    """The §2 timestamp of a time in epoch microseconds."""
    seconds, fraction = divmod(micros, 1_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{fraction:06d}Z"


def prune(handoffs: str, card_id: str, keep: int = KEEP) -> list[str]:
    """Remove all but the newest `keep` reports of a handoff; the paths removed."""
    stale = files(handoffs, card_id)[:-keep] if keep else files(handoffs, card_id)
    for path in stale:
        durable.unlink_quietly(path)
    return stale
