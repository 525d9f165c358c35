"""What a step on a role's inbox lists and reads, and the pure decisions over it: the work
in process (`current_*`, which refuse the shapes a mode cannot handle), a file's priority
and dependencies, and whether a waiting file is ready (docs/protocol.md §4, §13).  Nothing
here touches the disk but `Seen`'s bookkeeping of paths; `queue/inbox` does the I/O."""

from __future__ import annotations

import os

from handoffd.core import handoff as hf
from handoffd.core.config import Box
from handoffd.core.outcome import Exit, Refusal

TYPE_CHECKING = False  # helpers import this module: no `typing` at run time
if TYPE_CHECKING:
    from collections.abc import Callable

    Done = Callable[[str, list[str]], bool]  # whether the handoffs the file at a path
    # depends on (these ids) are all done

DEFAULT_PRIORITY = "50"
FOLDERS = (Box.NEW, Box.IN_PROCESS, Box.COMPLETED)  # every folder a step may touch
BLOCKED = hf.BLOCKED_REASON
DEPENDS_ON = hf.DEPENDS_ON

# Why a waiting file is not ready to take (docs/protocol.md §13); None: it is ready.
IS_BLOCKED, ON_DEPENDENCIES = "blocked", "dependencies"


class Listing:
    """The visible contents of `in_process/`: absolute paths of single files and batch dirs."""

    __slots__ = ("batches", "files")

    def __init__(self, files: list[str], batches: list[str]) -> None:
        self.files = files
        self.batches = batches


class Item:
    """A task file at `path` and its parsed content."""

    __slots__ = ("handoff", "path")

    def __init__(self, path: str, handoff: hf.Handoff) -> None:
        self.path = path
        self.handoff = handoff


class Work:
    """The work in process, whichever the mode: one task file, or a batch dir and its files."""

    __slots__ = ("files", "path")

    def __init__(self, path: str, files: list[str]) -> None:
        self.path = path
        self.files = files

    @property
    def batch(self) -> bool:
        return self.files != [self.path]


class Seen:
    """What one step listed and read of the role's own folders, kept in step with every
    rename, mkdir and rmdir the step makes: each folder is listed once a step, and the
    live file is rewritten from this record, under the same lock, instead of listing the
    folders again (docs/protocol.md §10).  Under the role's inbox lock no other command
    moves a file of the role's; the daemon only adds deliveries to `new/`, which any
    listing may miss by a moment, and the next call shows.  A pool's `new/`, which other
    members claim from meanwhile, is never kept."""

    __slots__ = ("answers", "folders", "read")

    def __init__(self) -> None:
        # folder -> {name: its `hf.kind`} of its visible entries, as they stand
        self.folders: dict[str, dict[str, str]] = {}
        self.read: dict[str, hf.Handoff] = {}  # path -> its content, as read or written
        self.answers: dict[str, bool] = {}  # id -> whether its report folder holds an answer

    def added(self, path: str, kind: str) -> None:
        folder, name = os.path.split(path)
        if folder in self.folders:
            self.folders[folder][name] = kind

    def gone(self, path: str) -> None:
        """`path` is no longer there (and nothing below it)."""
        folder, name = os.path.split(path)
        self.folders.get(folder, {}).pop(name, None)
        below = path + os.sep
        for key in [k for k in self.folders if k == path or k.startswith(below)]:
            del self.folders[key]
        for key in [k for k in self.read if k.startswith(below)]:
            del self.read[key]

    def moved(self, source: str, target: str, kind: str) -> None:
        """`source` was renamed to `target`: what was known of it (and below it) moves too."""
        folder, name = os.path.split(source)
        self.folders.get(folder, {}).pop(name, None)
        self.added(target, kind)
        below = source + os.sep
        for key in [k for k in self.folders if k == source or k.startswith(below)]:
            self.folders[target + key[len(source) :]] = self.folders.pop(key)
        for key in [k for k in self.read if k == source or k.startswith(below)]:
            self.read[target + key[len(source) :]] = self.read.pop(key)


def current_task(listing: Listing, *, finishing: bool) -> str | None:
    """The single task file in process (None if idle); refuses shapes task mode can't handle."""
    if listing.batches:
        message = (
            "CURRENT_WORK_IS_BATCH: use done_with_current.sh."
            if finishing
            else "TASK_IN_PROCESS_IS_BATCH: use ready_for_next.sh or done_with_current.sh."
        )
        raise Refusal(Exit.REFUSED, message, listing.batches)
    if len(listing.files) > 1:
        verb = "are" if finishing else "are already"
        raise Refusal(
            Exit.REFUSED, f"AMBIGUOUS_TASK_STATE: multiple tasks {verb} in process.", listing.files
        )
    return listing.files[0] if listing.files else None


def current_batch(listing: Listing, *, finishing: bool) -> str | None:
    """The single batch dir in process (None if idle); refuses shapes batch mode can't handle."""
    if listing.files:
        message = (
            "CURRENT_WORK_IS_SINGLE_TASK: use done_with_current.sh."
            if finishing
            else "TASK_IN_PROCESS_IS_SINGLE: use ready_for_next.sh or done_with_current.sh."
        )
        raise Refusal(Exit.REFUSED, message, listing.files)
    if len(listing.batches) > 1:
        verb = "are" if finishing else "are already"
        raise Refusal(
            Exit.REFUSED,
            f"AMBIGUOUS_TASK_STATE: multiple batches {verb} in process.",
            listing.batches,
        )
    return listing.batches[0] if listing.batches else None


def current_work(listing: Listing) -> str | None:
    """The one task file or batch dir in process, whatever the mode (None if idle)."""
    shapes = listing.files + listing.batches
    if len(shapes) > 1:
        raise Refusal(Exit.REFUSED, "AMBIGUOUS_TASK_STATE: multiple tasks are in process.", shapes)
    return shapes[0] if shapes else None


def names_match(name: str, ident: str) -> bool:
    """Whether `ident` names the file `name`: by its id, its file name, or its name's stem."""
    return ident in (name, name.removesuffix(hf.SUFFIX)) or hf.name_id(name) == ident


def priority(handoff: hf.Handoff) -> str:
    return handoff.get(hf.PRIORITY) or DEFAULT_PRIORITY


def dependencies(handoff: hf.Handoff) -> list[str]:
    """The ids its `depends_on` header names, in order."""
    return hf.comma_list(handoff.get(DEPENDS_ON) or "")


def not_ready(item: Item, done: Done | None) -> str | None:
    """Why a waiting file may not be taken yet, or None when it is ready: it is blocked, or
    some handoff it depends on is not done (`done` says, given the ids).  A file with
    neither header is always ready, so a project that never uses them keeps §4's order.
    A file both blocked and waiting on dependencies counts as blocked."""
    if item.handoff.get(BLOCKED):
        return IS_BLOCKED
    wanted = dependencies(item.handoff)
    if wanted and done is not None and not done(item.path, wanted):
        return ON_DEPENDENCIES
    return None


def not_ready_line(reasons: list[str]) -> str:
    """The one stderr line when only work that is not ready waits (docs/protocol.md §13)."""
    blocked = reasons.count(IS_BLOCKED)
    return (
        f"NOT_READY: {len(reasons)} waiting: {blocked} blocked, {len(reasons) - blocked} on "
        "dependencies (see handoffd status)"
    )
