"""One read-only scan of a project's queue, into a snapshot every view reads.

The board, `resume`, the live file, digests, the MCP tools, the audit, the demo's
summary, the history index and the daemon's idle check all read the queue through this
module, so there is one way to do it.  A scan never changes anything: it sweeps no temp
file and removes no empty batch folder (that is the inbox's business, under its lock).

What it reads:
- every role's open folders (`outbox/`, `failed/`, `inbox/new/`, `inbox/in_process/`,
  batch folders included), each file's header block only — never the body;
- history (`inbox/completed/`, `sent/`) as names only; a history file's headers are
  read when someone asks (`Entry.headers`), or all at once for `--all` (`load_history`);
- each role's heartbeat, its report folders (`H/reports/<id>/`) and each open card's
  latest report, each failed original's `.error` line, the completed copies of the
  handoffs open ones depend on, and from `daemon/` whether the daemon runs and the
  wake-ups in its log's tail: all a view shows, so the projection reads no file.

The queue moves while we read it.  Each move is a rename, so a file is always in one
folder, but two listings are not one instant: a file renamed between them is seen
twice (kept once, at the later of its two places) or, listed and then gone before its
headers are read, it moved — the role is listed again to find it where it went.
Only names ending in `.handoff` are queue items (docs/protocol.md §8): what a name, a
header block and a queue item are is `handoffd.handoff`'s to say.
"""

from __future__ import annotations

import os
import stat
import time

from handoffd import config, heartbeat, safeio
from handoffd import handoff as hf
from handoffd.config import Box, Role
from handoffd.handoff import Name
from handoffd.heartbeat import Heartbeat

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: helpers reach this module (the live file)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator  # collections costs ~1.5 ms

    from handoffd.held import Held
    from handoffd.lifecycle import DaemonState
    from handoffd.reports import Head

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

    __slots__ = ("_headers", "batch", "indexed", "mtime", "name", "path", "role", "state")

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
        return self.headers.get("task")

    @property
    def activity(self) -> str:
        """The newest §2 time its headers hold ('' if none); from history's index while
        its headers are not read."""
        if self._headers is None and self.indexed is not None:
            return self.indexed[1]
        return newest_time(self.headers)

    @property
    def parts(self) -> Name | None:
        return hf.parse_name(self.name)

    @property
    def name_id(self) -> str | None:
        """The id its file name spells, None for a name not in the §2 form."""
        return hf.parsed_id(self.name)

    @property
    def id(self) -> str:
        """The id its file name spells, whatever its `id` header says (`hf.file_id`: only a
        hand-made name's plain header stands in for one); read without opening a §2 name."""
        parts = self.parts
        return parts.id if parts else hf.file_id(self.name, self.headers.get("id"))

    @property
    def card(self) -> str:
        """The card it is shown as: `<id>@<role>` (docs/protocol.md §8)."""
        return f"{self.id}@{self.role}"

    @property
    def is_original(self) -> bool:
        return self.state in State.ORIGINALS or self.state == State.DISMISSED

    def __repr__(self) -> str:
        return f"Entry({self.role}, {self.state}, {self.name})"


class Snapshot:
    """What one scan of a project found.  Read-only: nothing here changes the disk.

    Besides the queue files, the scan reads what the views show of them, so that the
    projection (`board/cards.project`) reads no file at all: each open card's latest
    report (`head`), each failed original's `.error` line (`error`) and the completed
    copies of the handoffs open ones depend on (`done`).

    History (`completed/`, `sent/`: it grows without bound) is listed on first use of
    `history`, once, and its headers only as each entry is asked for: a view that needs
    no history (the board without `--all`) never pays for it.  A view that shows it
    (`--all`) asks for all of it at once first: `load_history`.
    """

    def __init__(
        self, root: str, roles: dict[str, Role], taken_at: float, once: bool = True
    ) -> None:
        self.root = root
        self.roles = roles
        self.taken_at = taken_at
        self.open: list[Entry] = []  # outbox, failed, new, in_process; headers read
        self.heartbeats: dict[str, Heartbeat | None] = {}
        self.report_ids: dict[str, set[str]] = {}  # role -> ids with a reports folder
        self.daemon: DaemonState | None = None  # set by `scan`; None: not looked at
        self.wakes: dict[str, list[float]] = {}  # role -> wake-up times in the log's tail
        self.wake_failures: dict[str, list[float]] = {}  # role -> failed wake-ups, likewise
        self.wake_submitted: dict[str, list[bool | None]] = {}  # beside `wakes`, one per wake-up
        self.wake_via: dict[str, list[str]] = {}  # beside `wakes`: typed, or by a Stop hook
        self.daemon_options: dict[str, object] = {}  # the last `started` line of the log
        self.panes: dict[str, dict[str, object]] = {}  # role -> its pane as the daemon saw it
        self.held: Held | None = None  # the running daemon's NATS link and deferrals
        self.took_at: dict[str, float | None] = {}  # role -> when its in_process/ last changed
        self.idle_at: dict[str, float | None] = {}  # role -> its last `handoffd idle`
        self.reclaimed: dict[str, str] = {}  # card -> why it went back to its pool (§17)
        self._once = once
        self._history: list[Entry] | None = None
        self._completed_names: dict[str, str] | None = None  # role -> its names, joined
        self._hand_made_ids: dict[str, list[Entry]] | None = None  # see `_hand_made`
        self._green: list[Green] | None = None
        self._reports: dict[tuple[str, str], list[str]] = {}
        self.heads: dict[tuple[str, str], Head] = {}  # (role, id) -> its latest report's
        self.errors: dict[str, str] = {}  # a failed original's path -> its `.error` line
        self.dismissals: dict[str, str] = {}  # a dismissed one's path -> its `.dismissed` line
        self.dependencies: dict[str, list[Entry]] = {}  # id -> its completed copies, looked up
        self.history_loaded = False  # `load_history` read history's headers and reports

    @property
    def history(self) -> list[Entry]:
        """Completed copies, sent and dismissed originals, listed on first use (names
        only)."""
        if self._history is None:
            self._history = []
            for role in self.roles.values():
                self._history += scan_role(role, State.CLOSED, once=self._once)
            if self._once:
                self._drop_moved_on()
        return self._history

    def completed(self, ident: str) -> list[Entry]:
        """The completed copies of handoff `ident` (a dependency look-up).  The first call
        lists every `completed/` once, names only; each look-up then searches those names
        for the id, without opening a file or building an entry for a name not asked for."""
        if self._completed_names is None:
            self._completed_names = {
                name: _joined_names(role_folder(role, Box.COMPLETED))
                for name, role in self.roles.items()
            }
        found = []
        for role, joined in self._completed_names.items():
            for relative in _lines_with(joined, f"_{ident}_to_"):
                folder = self.roles[role].path(Box.COMPLETED)
                batch, _, name = relative.rpartition("/")
                if hf.is_item(name) and hf.name_id(name) == ident:
                    path, where = os.path.join(folder, relative), batch and folder + "/" + batch
                    found.append(Entry(role, State.COMPLETED, path, where or None))
        return found or self._hand_made().get(ident, [])

    def _hand_made(self) -> dict[str, list[Entry]]:
        """The completed copies whose names are not in the §2 form, by their `id` header:
        a hand-made `10_manual.handoff` with `id: manual-1` is done as `manual-1`, as the
        board names it.  Read on the first look-up that names spell no answer to, and only
        such names: a §2 name says its id without opening the file."""
        if self._hand_made_ids is None:
            self._hand_made_ids = {}
            for role, joined in (self._completed_names or {}).items():
                folder = self.roles[role].path(Box.COMPLETED)
                for relative in joined.split("\n"):
                    batch, _, name = relative.rpartition("/")
                    if not hf.is_item(name) or hf.parse_name(name) is not None:
                        continue
                    path, where = os.path.join(folder, relative), batch and folder + "/" + batch
                    entry = Entry(role, State.COMPLETED, path, where or None)
                    if entry.load().get("id"):
                        self._hand_made_ids.setdefault(entry.id, []).append(entry)
        return self._hand_made_ids

    def _drop_moved_on(self) -> None:
        """An open file found in history too was completed or sent while we read: it is
        kept at its later place, once."""
        later = {(e.role, e.is_original, e.name) for e in self._history or ()}
        self.open = [e for e in self.open if (e.role, e.is_original, e.name) not in later]

    def entries(self, states: Iterable[str] = State.ALL) -> Iterator[Entry]:
        """Every entry whose state is in `states`, open ones first."""
        wanted = set(states)
        history = self.history if wanted & set(State.CLOSED) else []
        for entry in (*self.open, *history):
            if entry.state in wanted:
                yield entry

    def reports(self, role: str, ident: str) -> list[str]:
        """Paths of `role`'s report files for `ident`, oldest first (listed on first ask)."""
        if ident not in self.report_ids.get(role, ()):
            return []
        key = (role, ident)
        if key not in self._reports:
            from handoffd.reports import report_paths

            self._reports[key] = report_paths(self.roles[role].handoffs, ident)
        return self._reports[key]

    # --- what the views show of the files: read here, never by the projection ----------

    def head(self, role: str, ident: str) -> Head | None:
        """The latest of `role`'s reports on `ident`, as the scan read it (None if none)."""
        return self.heads.get((role, ident))

    def error(self, path: str) -> str | None:
        """The `.error` line of the failed original at `path`, as the scan read it."""
        return self.errors.get(path)

    def done(self, ident: str) -> list[Entry]:
        """The completed copies of handoff `ident` that the scan looked up (an open handoff
        depends on it), headers read; none for a handoff it did not need to look up."""
        return self.dependencies.get(ident, [])

    def load_history(self) -> list[Entry]:
        """History as a view shows it (`--all`): listed, every header block read, and each
        completed copy's latest report and dependencies; once."""
        if not self.history_loaded:
            for entry in self.history:
                entry.load()
            done = [e for e in self.history if e.state == State.COMPLETED]
            self._read_dismissals()
            self._read_heads(done)
            self._look_up_dependencies(done)
            self.history_loaded = True
        return self.history

    def green(self, kept: GreenListing | None = None) -> list[Green]:
        """Every green card's file (completed copies, dismissed originals) by name alone,
        newest first by name: the archive's order, known without opening a file.  A
        long-running reader passes the listing it `kept`: folders unchanged since are not
        listed again."""
        if self._green is None:
            self._green = (kept or GreenListing()).rows(self.roles)
        return self._green

    def load_page(self, rows: list[Green]) -> list[Entry]:
        """The entries of a page of green files, with what a view shows of them read for
        those alone: header blocks, latest reports, dismissal notes."""
        from handoffd.failed import dismissal

        entries = [Entry(role, state, path, batch) for _, role, state, path, batch in rows]
        for entry in entries:
            entry.load()
            if entry.state == State.DISMISSED and (line := dismissal(entry.path)):
                self.dismissals[entry.path] = line
        self._read_heads(entries)
        return entries

    def _read_heads(self, entries: Iterable[Entry]) -> None:
        """The latest report on each of `entries` that has a report folder."""
        from handoffd.reports import head

        for entry in entries:
            key = (entry.role, entry.id)
            if key not in self.heads and (paths := self.reports(*key)):
                found = head(paths[-1])
                if found is not None:
                    self.heads[key] = found

    def dismissal(self, path: str) -> str | None:
        """The `.dismissed` line of the dismissed original at `path`, as the scan read it."""
        return self.dismissals.get(path)

    def _read_dismissals(self) -> None:
        from handoffd.failed import dismissal

        for entry in self.history:
            if entry.state == State.DISMISSED and (line := dismissal(entry.path)):
                self.dismissals[entry.path] = line

    def _read_errors(self) -> None:
        for entry in self.open:
            if entry.state == State.FAILED:
                line = _error_line(entry.path)
                if line is not None:
                    self.errors[entry.path] = line

    def _look_up_dependencies(self, entries: Iterable[Entry]) -> None:
        """Find in `completed/` each handoff `entries` depend on that may be done there, and
        in turn what those depend on: one with no open copy (but for one only its sender
        holds: never delivered, it has none), or one of whose recipients some hold none."""
        copies: dict[str, list[Entry]] = {}
        originals = set()
        for entry in self.open:
            if entry.state in (State.NEW, State.IN_PROCESS):
                copies.setdefault(entry.id, []).append(entry)
            else:
                originals.add(entry.id)
        wanted = [d for entry in entries for d in depends_on(entry.headers)]
        while wanted:
            ident = wanted.pop()
            held = copies.get(ident)
            if ident in self.dependencies or (held is None and ident in originals):
                continue
            if held is not None and not _some_not_held(held):
                continue
            found = self.completed(ident)
            for entry in found:
                entry.load()
            self.dependencies[ident] = found
            wanted += [d for entry in found for d in depends_on(entry.headers)]


def scan(
    root: str,
    roles: dict[str, Role] | None = None,
    now: float | None = None,
    once: bool = True,
    history: bool = False,
) -> Snapshot:
    """Scan the project at `root` in one pass (roles.tsv is read unless `roles` is given).

    `once`: a name found in two folders of one role is a file caught mid-rename, kept once.
    An audit of a queue at rest passes False, to see a real duplicate as two entries.
    `history`: read the history too, as a view of green cards needs it (`load_history`).
    """
    from handoffd import lifecycle  # not at the top: helpers import this module, and

    # lifecycle's subprocess would cost each of them its imports of re and enum
    from handoffd.reports import report_ids

    roles = config.load_roles(root) if roles is None else roles
    snapshot = Snapshot(root, roles, time.time() if now is None else now, once)
    for role in roles.values():
        snapshot.open += scan_role(role, State.OPEN, once=once)
        snapshot.heartbeats[role.name] = heartbeat.read(role.handoffs)
        snapshot.report_ids[role.name] = report_ids(role.handoffs)
    snapshot.daemon = lifecycle.daemon_state(root)
    _read_wakes(snapshot, root)
    snapshot._read_errors()
    snapshot._read_heads(snapshot.open)
    snapshot._look_up_dependencies(snapshot.open)
    if history:
        snapshot.load_history()
    return snapshot


def _read_wakes(snapshot: Snapshot, root: str) -> None:
    """The wake-ups and the daemon's options from the log's tail; each role's pane as the
    daemon last saw it (only while a daemon runs: a dead one's file is stale) and when its
    `in_process/` last changed (docs/protocol.md §14)."""
    from handoffd import held, lifecycle, panes

    tail = lifecycle.log_tail(root)
    snapshot.wakes, snapshot.wake_failures = tail.sent, tail.failed
    snapshot.wake_submitted, snapshot.daemon_options = tail.submitted, tail.options
    snapshot.wake_via = tail.via
    snapshot.reclaimed = tail.reclaimed
    if snapshot.daemon is not None and snapshot.daemon.running:
        snapshot.panes = panes.load(root)
        snapshot.held = held.load(root)
    for name, role in snapshot.roles.items():
        snapshot.idle_at[name] = heartbeat.idle_at(role.handoffs)
        try:
            info = os.lstat(role.path(Box.IN_PROCESS))
            snapshot.took_at[name] = info.st_mtime if stat.S_ISDIR(info.st_mode) else None
        except OSError:
            snapshot.took_at[name] = None
    _merge_pools(snapshot)


def _merge_pools(snapshot: Snapshot) -> None:
    """A pool's wake-ups and takes are its members' (docs/protocol.md §17): merged under the
    pool's name, in time order, once per scan, for the board's stall rule and counts."""
    teams: dict[str, list[str]] = {n: [] for n, role in snapshot.roles.items() if role.is_pool}
    for name, role in snapshot.roles.items():
        if role.pool in teams and not role.is_pool:
            teams[role.pool].append(name)
    for pool, team in teams.items():
        wakes: list[tuple[float, bool | None, str]] = []
        for name in team:
            times = snapshot.wakes.get(name, [])
            submitted = [*snapshot.wake_submitted.get(name, []), *[None] * len(times)]
            via = [*snapshot.wake_via.get(name, []), *["typed"] * len(times)]
            wakes += zip(times, submitted[: len(times)], via[: len(times)], strict=True)
        wakes.sort(key=lambda wake: wake[0])
        snapshot.wakes[pool] = [at for at, _, _ in wakes]
        snapshot.wake_submitted[pool] = [ok for _, ok, _ in wakes]
        snapshot.wake_via[pool] = [how for _, _, how in wakes]
        failed = [at for name in team for at in snapshot.wake_failures.get(name, [])]
        snapshot.wake_failures[pool] = sorted(failed)
        took = [snapshot.took_at.get(name) for name in team]
        snapshot.took_at[pool] = max((t for t in took if t is not None), default=None)


TIMESTAMPS = ("created_at", "enqueued_at", "dequeued_at", "completed_at", "released_at")


# --- the archive's listing ---------------------------------------------------------------

Green = tuple[str, str, str, str, "str | None"]  # (order key, role, state, path, batch folder)
SETTLED_NS = 2_000_000_000  # a folder's mtime younger than this may hide a change


class GreenListing:
    """The green files of a project by name, newest first, kept from one scan to the next
    by a long-running reader (the web board).  A folder is listed again only when its
    mtime moved, or is too young to be trusted (a change within the clock tick of the
    listing leaves the mtime as it was); a batch folder inside one is checked the same way.
    So an archive page at 50,000 completed cards costs a few stats, not a listing of all."""

    def __init__(self) -> None:
        self._folders: dict[str, tuple[dict[str, int], list[Green]]] = {}
        self._rows: tuple[tuple[int, ...], list[Green]] | None = None

    def rows(self, roles: dict[str, Role]) -> list[Green]:
        parts = []
        for role in roles.values():
            for state in State.GREEN:
                folder = role_folder(role, FOLDER[state])
                if folder is not None:
                    parts.append(self._listed(role.name, state, folder))
        key = tuple(id(part) for part in parts)
        if self._rows is None or self._rows[0] != key:
            merged = [row for part in parts for row in part]
            merged.sort(reverse=True)
            self._rows = key, merged
        return self._rows[1]

    def _listed(self, role: str, state: str, folder: str) -> list[Green]:
        kept = self._folders.get(folder)
        if kept is not None and _unchanged(kept[0], time.time_ns()):
            return kept[1]
        stamps = {folder: _mtime_ns(folder)}  # before the listing: a change during it shows
        rows: list[Green] = []
        for path, name, batch in _files(folder, _has_batches(state)):
            if batch is not None and batch not in stamps:
                stamps[batch] = _mtime_ns(batch)
            rows.append((_order(name), role, state, path, batch))
        self._folders[folder] = stamps, rows
        return rows


def _unchanged(stamps: dict[str, int], now_ns: int) -> bool:
    """Whether every folder still has the mtime it had when listed (a missing one is still
    missing), and had it long enough before then to be trusted."""
    for path, stamp in stamps.items():
        if _mtime_ns(path) != stamp or now_ns - stamp < SETTLED_NS:
            return False
    return True


def _mtime_ns(path: str) -> int:
    try:
        return os.stat(path, follow_symlinks=False).st_mtime_ns
    except OSError:
        return -1


def _order(name: str) -> str:
    """A green file's place in the archive: the time and sequence its name spells (the
    later sent, the higher), then the name; a name not in the §2 form sorts as the oldest."""
    if len(name) > 27 and name[2] == "_" and name[19] == "_" and name[26] == "_":
        return name[3:26] + "/" + name
    return "/" + name


def newest_time(headers: dict[str, str]) -> str:
    """The newest §2 time of a header block ('' if none): they sort as text."""
    return max(headers.get(key, "") for key in TIMESTAMPS)


def depends_on(headers: dict[str, str]) -> list[str]:
    """The ids a `depends_on` header names (docs/protocol.md §8), in order."""
    return [part.strip() for part in headers.get("depends_on", "").split(",") if part.strip()]


def recipients(entry: Entry) -> list[str]:
    """Who a handoff is to: its `to` header, else the recipients its name spells."""
    if "to" in entry.headers:
        return [part.strip() for part in entry.headers["to"].split(",") if part.strip()]
    parts = entry.parts
    return parts.recipients if parts else []


def _some_not_held(copies: list[Entry]) -> bool:
    """Whether some recipient of a delivered handoff holds no open copy of it: theirs may
    be done already."""
    return bool(set(recipients(copies[0])) - {copy.role for copy in copies})


def _error_line(path: str) -> str | None:
    """The one line of a failed original's `<name>.error`, or of the reason a retry cut
    short moved aside for it (`failed.aside_name`: put back by the next command)."""
    try:  # the careful reader: an `.error` linked to /dev/zero or to a secret is skipped
        return safeio.read_line(path + ".error") or None
    except safeio.Refused as refusal:
        return f"(its .error is not read: {refusal.why})"
    except FileNotFoundError:
        pass
    except OSError:
        return None
    from handoffd import failed  # only for an original found without its reason

    folder, name = os.path.split(path)
    try:
        return safeio.read_line(os.path.join(folder, failed.aside_name(name))) or None
    except OSError:
        return None


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


def listing(role: Role, states: Iterable[str]) -> list[Entry]:
    """Names only: `role`'s queue files in `states`, no file opened."""
    return scan_role(role, states, headers=False)


def _list(role: Role, states: tuple[str, ...]) -> Iterator[Entry]:
    """Every queue file of `role` in `states`, upstream folders first, batches included."""
    for state in State.ALL:  # in life order, so a file moving on is seen at least once
        folder = role_folder(role, FOLDER[state]) if state in states else None
        if folder is not None:
            for path, name, batch in _files(folder, _has_batches(state)):
                yield Entry(role.name, state, path, batch, name=name)


def role_folder(role: Role, box: str) -> str | None:
    """`role`'s folder `box`, or None when it lies behind a symbolic link: what would be
    listed through one is outside the project, so no view shows it (`status` warns)."""
    try:
        linked = safeio.linked_folders(role.handoffs, (box,))
    except OSError:
        linked = []  # an unreadable folder lists nothing anyway
    return None if linked else role.path(box)


def _has_batches(state: str) -> bool:
    return state in (State.IN_PROCESS, State.COMPLETED)


def _files(directory: str, descend: bool) -> Iterator[tuple[str, str, str | None]]:
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


def _joined_names(folder: str | None) -> str:
    """The names in `folder` and, as `batch_…/name`, in its batch folders (never one that
    is a link): one per line, with a line break at each end, so one `str.find` searches
    them all.  No folder (a linked one) holds no name."""
    entries = _scandir(folder) if folder is not None else []
    names = [entry.name for entry in entries]
    for batch in filter(_is_batch, entries):
        names += [f"{batch.name}/{inner.name}" for inner in _scandir(batch.path)]
    return "\n" + "\n".join(names) + "\n"


def _lines_with(joined: str, needle: str) -> Iterator[str]:
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
