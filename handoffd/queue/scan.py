"""One role's queue files, as a read-only listing: the entries every view is made of.

`scan_role` lists a role's folders in `State`s and reads each open file's header block
(never the body); the snapshot of a whole project (`handoffd.snapshot.snapshot`) is built from it,
and the live file reads its role through it after every helper call, so this module
imports only what the helpers have loaded already.  A listing never changes anything.

The queue moves while we read it.  Each move is a rename, so a file is always in one
folder, but two listings are not one instant: a file renamed between them is seen
twice (kept once, at the later of its two places) or, listed and then gone before its
headers are read, it moved — the role is listed again to find it where it went.
Only names ending in `.handoff` are queue items (docs/protocol.md §8): what a name, a
header block and a queue item are is `handoffd.core.handoff`'s to say.
"""

from __future__ import annotations

import os

from handoffd.core import handoff as hf
from handoffd.core import safeio
from handoffd.core.config import Box, Role
from handoffd.core.handoff import Handoff, Name

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: helpers reach this module (the live file)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator  # collections costs ~1.5 ms


RESCANS = 5  # listings of one role before a file that keeps vanishing is left out


class _Listed(type):
    """Lets `for state in State` walk the names, without the start-up cost of `enum`."""

    def __iter__(cls) -> Iterator[str]:
        return iter(cls.ALL)  # type: ignore[attr-defined]


class State(metaclass=_Listed):
    """Where a queue file is.  Each value is what `status --json` prints as `state`."""

    OUTBOX = "outbox"
    FAILED = "failed"
    NEW = "new"
    IN_PROCESS = "in_process"
    COMPLETED = "completed"
    SENT = "sent"
    DISMISSED = "dismissed"  # a refused original an operator put aside (§13): green
    ALL = (OUTBOX, FAILED, DISMISSED, NEW, IN_PROCESS, COMPLETED, SENT)
    OPEN = (OUTBOX, FAILED, NEW, IN_PROCESS)
    HISTORY = (COMPLETED, SENT)
    CLOSED = (COMPLETED, SENT, DISMISSED)  # what `Snapshot.history` lists
    GREEN = (COMPLETED, DISMISSED)  # the states of green cards
    ORIGINALS = (OUTBOX, FAILED, SENT)  # the sender's files; the others are copies


FOLDER = {
    State.OUTBOX: Box.OUTBOX,
    State.FAILED: Box.FAILED,
    State.NEW: Box.NEW,
    State.IN_PROCESS: Box.IN_PROCESS,
    State.COMPLETED: Box.COMPLETED,
    State.SENT: Box.SENT,
    State.DISMISSED: Box.DISMISSED,
}

# A file renamed while we list is kept at its later place: the order of each
# file's life (originals: outbox → failed or sent; copies: new → in_process → completed).
_LATER = {State.OUTBOX: 0, State.FAILED: 1, State.SENT: 2, State.DISMISSED: 2, State.NEW: 0,
          State.IN_PROCESS: 1, State.COMPLETED: 2}  # fmt: skip


_RANK = {state: n for n, state in enumerate(State.ALL)}


# --- the snapshot ---------------------------------------------------------------------


class Entry:
    """One queue file as the scan found it: a copy or an original, open or history."""

    __slots__ = ("_after", "_headers", "_parts", "_to", "batch", "indexed", "mtime", "name",
                 "path", "role", "state")  # fmt: skip

    def __init__(
        self,
        role: str,
        state: str,
        path: str,
        batch: str | None = None,
        headers: dict[str, str] | None = None,
        mtime: float | None = None,
        name: str | None = None,
    ) -> None:
        self.role = role
        self.state = state
        self.path = path
        self.name = name or os.path.basename(path)
        self.batch = batch  # the batch_* folder holding it, if any
        self.mtime = mtime
        self._headers = headers
        self._parts: Name | bool | None = False  # its name's parts, once parsed (False: not yet)
        self._to: list[str] | None = None  # its recipients, once read (`recipients`)
        self._after: list[str] | None = None  # what it depends on, once read (`dependencies`)
        self.indexed: tuple[str, str] | None = None  # (task, newest time), from history's index

    @property
    def headers(self) -> dict[str, str]:
        """Its header block; read now for a history file, `{}` if it has gone since."""
        return self.load()

    def load(self) -> dict[str, str]:
        """Read its header block if it is not read yet (through the careful reader)."""
        if self._headers is None:
            try:
                self._headers = hf.read_headers(self.path)
            except OSError:
                self._headers = {}
        return self._headers

    @property
    def task(self) -> str | None:
        """Its `task` header (a thread's key, docs/protocol.md §11); from history's index
        while its headers are not read."""
        if self._headers is None and self.indexed is not None:
            return self.indexed[0] or None
        return self.headers.get(hf.TASK)

    @property
    def activity(self) -> str:
        """The newest §2 time its headers hold ('' if none); from history's index while
        its headers are not read."""
        if self._headers is None and self.indexed is not None:
            return self.indexed[1]
        return newest_time(self.headers)

    @property
    def parts(self) -> Name | None:
        """The parts its file name spells, parsed once: the board asks for them (its id,
        sender, recipients, priority) several times a card."""
        if self._parts is False:
            self._parts = hf.parse_name(self.name)
        return self._parts  # type: ignore[return-value]

    @property
    def name_id(self) -> str | None:
        """The id its file name spells, None for a name not in the §2 form."""
        return hf.parsed_id(self.name)

    @property
    def id(self) -> str:
        """The id its file name spells, whatever its `id` header says (`hf.file_id`: only a
        hand-made name's plain header stands in for one); read without opening a §2 name."""
        parts = self.parts
        return parts.id if parts else hf.file_id(self.name, self.headers.get(hf.ID))

    @property
    def card(self) -> str:
        """The card it is shown as: `<id>@<role>` (docs/protocol.md §8)."""
        return f"{self.id}@{self.role}"

    @property
    def is_original(self) -> bool:
        return self.state in State.ORIGINALS or self.state == State.DISMISSED

    def __repr__(self) -> str:
        return f"Entry({self.role}, {self.state}, {self.name})"


TIMESTAMPS = (hf.CREATED_AT, hf.ENQUEUED_AT, hf.DEQUEUED_AT, hf.COMPLETED_AT, hf.RELEASED_AT)


def newest_time(headers: dict[str, str]) -> str:
    """The newest §2 time of a header block ('' if none): they sort as text."""
    return max(headers.get(key, "") for key in TIMESTAMPS)


def depends_on(headers: dict[str, str]) -> list[str]:
    """The ids a `depends_on` header names (docs/protocol.md §8), in order."""
    return hf.comma_list(headers.get(hf.DEPENDS_ON, ""))


def dependencies(entry: Entry) -> list[str]:
    """`depends_on(entry.headers)`, read once an entry: the scan's look-up and the board's
    card both ask."""
    if entry._after is None:
        entry._after = depends_on(entry.headers)
    return entry._after


def recipients(entry: Entry) -> list[str]:
    """Who a handoff is to: its `to` header, else the recipients its name spells (read once
    an entry: the board asks for each card's several times)."""
    if entry._to is None:
        if hf.RECIPIENTS in entry.headers:
            entry._to = hf.comma_list(entry.headers[hf.RECIPIENTS])
        else:
            parts = entry.parts
            entry._to = parts.recipients if parts else []
    return entry._to


def scan_role(
    role: Role, states: Iterable[str] = State.ALL, headers: bool = True, once: bool = True
) -> list[Entry]:
    """One role's queue files in `states`, each once (see `scan`); open files with their
    headers (unless `headers` is False: then names only, as the daemon's idle check wants)."""
    states = tuple(states)
    seen: dict[str, tuple[dict[str, str], float | None]] = {}  # path -> what was read there
    for _ in range(RESCANS):
        listed = _list(role, states)
        entries = _dedupe(listed) if once else sorted(listed, key=_in_order)
        if not headers:
            return entries
        if _load_open(entries, seen):
            return entries
    return [e for e in entries if e.state in State.CLOSED or e._headers is not None]


def handed(
    role: Role,
    states: Iterable[str],
    folders: dict[str, dict[str, str]],
    read: dict[str, Handoff],
    loaded: Iterable[str] = State.OPEN,
) -> list[Entry] | None:
    """`scan_role(role, states)` from what a step under the role's lock listed (`folders`:
    each folder's visible entries, by name, as `items.Seen` keeps them) and read (`read`:
    path -> content); a folder it did not list is listed now, a file in `loaded` states it
    did not read is read now (the others' headers on first ask).  None when one of them
    has gone since (the caller scans again).  Under the lock the step's record is the
    folders as they stand: nothing else moves a file out."""
    entries = []
    for state in (s for s in State.ALL if s in states):
        folder = role.path(FOLDER[state])
        if folder not in folders and role_folder(role, FOLDER[state]) is None:
            continue  # one behind a link, listed now: never through it, as `scan_role`
        for path, batch in _handed_files(folder, has_batches(state), folders):
            entries.append(Entry(role.name, state, path, batch))
    entries.sort(key=_in_order)
    for entry in (e for e in entries if e.state in loaded):
        known = read.get(entry.path)
        if known is not None:  # what `read_head` would read of it: its first 64 KiB
            entry._headers = hf.parse_headers(known.render()[: hf.HEADER_LIMIT])
            continue
        try:
            entry._headers, entry.mtime = _read_open(entry.path)
        except FileNotFoundError:
            return None
    return entries


def _handed_files(
    folder: str, descend: bool, folders: dict[str, dict[str, str]]
) -> Iterator[tuple[str, str | None]]:
    """(path, batch folder) of each queue file of `folder` as `folders` has it (else as
    listed now), as `folder_files` lists them: regular files by an item's name, and with
    `descend` those in its `batch_*` folders."""
    listed = folders.get(folder)
    if listed is None:
        for path, _, batch in folder_files(folder, descend):
            yield path, batch
        return
    for name, kind in sorted(listed.items()):
        path = os.path.join(folder, name)
        if kind == hf.FILE and hf.is_item(name):
            yield path, None
        elif descend and kind == hf.FOLDER and name.startswith("batch_"):
            for inner, _ in _handed_files(path, False, folders):
                yield inner, path


def listing(role: Role, states: Iterable[str]) -> list[Entry]:
    """Names only: `role`'s queue files in `states`, no file opened."""
    return scan_role(role, states, headers=False)


def _list(role: Role, states: tuple[str, ...]) -> Iterator[Entry]:
    """Every queue file of `role` in `states`, upstream folders first, batches included."""
    for state in State.ALL:  # in life order, so a file moving on is seen at least once
        folder = role_folder(role, FOLDER[state]) if state in states else None
        if folder is not None:
            for path, name, batch in folder_files(folder, has_batches(state)):
                yield Entry(role.name, state, path, batch, name=name)


def role_folder(role: Role, box: str) -> str | None:
    """`role`'s folder `box`, or None when it lies behind a symbolic link: what would be
    listed through one is outside the project, so no view shows it (`status` warns)."""
    try:
        linked = safeio.linked_folders(role.handoffs, (box,))
    except OSError:
        linked = []  # an unreadable folder lists nothing anyway
    return None if linked else role.path(box)


def has_batches(state: str) -> bool:
    return state in (State.IN_PROCESS, State.COMPLETED)


def folder_files(directory: str, descend: bool) -> Iterator[tuple[str, str, str | None]]:
    """(path, name, batch folder) of each queue file in `directory` and, if `descend`, in its
    `batch_*` folders.  A missing or unreadable folder holds nothing."""
    return queue_files(directory, (lambda batch: True) if descend else None)


def queue_files(
    directory: str, descend: Callable[[os.DirEntry[str]], bool] | None
) -> Iterator[tuple[str, str, str | None]]:
    """(path, name, batch folder) of each queue file in `directory` and in those of its
    `batch_*` folders that `descend` says to list (the history index lists only the batch
    folders that changed since it last did).  A missing or unreadable folder holds nothing."""
    for entry in _scandir(directory):
        if hf.is_item_entry(entry):
            yield entry.path, entry.name, None
        elif descend and _is_batch(entry) and descend(entry):
            for inner in _scandir(entry.path):
                if hf.is_item_entry(inner):
                    yield inner.path, inner.name, entry.path


def _is_batch(entry: os.DirEntry[str]) -> bool:
    return entry.name.startswith("batch_") and entry.is_dir(follow_symlinks=False)


def joined_names(folder: str | None) -> str:
    """The names in `folder` and, as `batch_…/name`, in its batch folders (never one that
    is a link): one per line, with a line break at each end, so one `str.find` searches
    them all.  No folder (a linked one) holds no name."""
    entries = _scandir(folder) if folder is not None else []
    names = [entry.name for entry in entries]
    for batch in filter(_is_batch, entries):
        names += [f"{batch.name}/{inner.name}" for inner in _scandir(batch.path)]
    return "\n" + "\n".join(names) + "\n"


def lines_with(joined: str, needle: str) -> Iterator[str]:
    """Each line of `joined` that contains `needle`."""
    at = joined.find(needle)
    while at >= 0:
        start = joined.rfind("\n", 0, at) + 1
        end = joined.find("\n", at)
        yield joined[start:end]
        at = joined.find(needle, end)


def _scandir(directory: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as entries:
            return list(entries)
    except OSError:
        return []


def _dedupe(entries: Iterable[Entry]) -> list[Entry]:
    """`dedupe`, in life order; then each file `dedupe` set aside that is still at its
    earlier place: seen at its later place, a file caught mid-rename has left the earlier
    one (a rename is atomic), so a name still there is a second file of that name, such
    as an outbox original beside a refused one in `failed/`.  It comes last, so the file
    that was there first keeps its card's name (docs/protocol.md §8)."""
    listed = list(entries)
    kept = dedupe(listed)
    chosen = {id(entry) for entry in kept}
    twins = [e for e in listed if id(e) not in chosen and os.path.lexists(e.path)]
    return sorted(kept, key=_in_order) + sorted(twins, key=_in_order)


def dedupe(entries: Iterable[Entry]) -> list[Entry]:
    """A file seen twice mid-rename (one role, same side, same name) is kept once, at its
    later place; in the order first seen."""
    kept: dict[tuple[str, bool, str], Entry] = {}
    for entry in entries:
        key = (entry.role, entry.is_original, entry.name)
        if key not in kept or _LATER[entry.state] >= _LATER[kept[key].state]:
            kept[key] = entry
    return list(kept.values())


def _in_order(entry: Entry) -> tuple[int, str]:
    """States in life order; within one, queue order (paths: a batch's files together)."""
    return _RANK[entry.state], entry.path


def _load_open(entries: list[Entry], seen: dict[str, tuple[dict[str, str], float | None]]) -> bool:
    """Read the header block and mtime of every open entry; False if one has vanished.
    `seen` keeps what earlier listings read, so a relisting reads only what moved."""
    complete = True
    for entry in entries:
        if entry.state in State.OPEN:
            if entry.path not in seen:
                try:
                    seen[entry.path] = _read_open(entry.path)
                except FileNotFoundError:
                    complete = False  # it moved: the next listing finds it where it went
                    continue
            entry._headers, entry.mtime = seen[entry.path]
    return complete


def _read_open(path: str) -> tuple[dict[str, str], float | None]:
    """An open file's header block and mtime, from one open; an unreadable file has none."""
    try:
        fd = safeio.open_regular(path)  # never a FIFO swapped in since the listing
    except FileNotFoundError:
        raise
    except OSError:
        return {}, None
    try:
        return hf.parse_headers(hf.read_head(fd)), os.fstat(fd).st_mtime
    except OSError:
        return {}, None
    finally:
        os.close(fd)
