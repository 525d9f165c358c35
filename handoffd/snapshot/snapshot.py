"""The snapshot: one read-only scan of a whole project, which every view reads.

The board, `resume`, digests, the MCP tools, the audit, the demo's summary and the history
index read the project through `take_snapshot`, so there is one way to do it; the queue
files themselves are listed by `handoffd.queue.scan` (one role's folders, the helpers' cheap
path).  A snapshot never changes anything: it sweeps no temp file and removes no empty
batch folder (that is the inbox's business, under its lock).

What it reads:
- every role's open folders (`outbox/`, `failed/`, `inbox/new/`, `inbox/in_process/`,
  batch folders included), each file's header block only — never the body;
- history (`inbox/completed/`, `sent/`) as names only; a history file's headers are
  read when someone asks (`Entry.headers`), or all at once for `--all` (`load_history`);
- each role's heartbeat, its report folders (`H/reports/<id>/`) and each open card's
  latest report, each failed original's `.error` line, whether each file waiting in a
  pool's `new/` can be handed out (read whole: at most 1 MiB), the completed copies of the
  handoffs open ones depend on, and from `daemon/` whether the daemon runs and the
  wake-ups in its log's tail: all a view shows, so the projection reads no file.
"""

from __future__ import annotations

import os
import stat
import time

from handoffd.core import config, safeio
from handoffd.core import handoff as hf
from handoffd.core.config import Box, Role
from handoffd.queue import heartbeat
from handoffd.queue.heartbeat import Heartbeat
from handoffd.queue.scan import (
    FOLDER,
    Entry,
    State,
    dependencies,
    folder_files,
    handed,
    has_batches,
    joined_names,
    lines_with,
    recipients,
    role_folder,
    scan_role,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from handoffd.core.lifecycle import DaemonState
    from handoffd.core.tokens import Budget, Spend
    from handoffd.queue.items import Seen
    from handoffd.queue.reports import Head, Report
    from handoffd.remote.held import Held


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
        self.unfit: dict[str, str] = {}  # a pool's waiting file no member can take -> why
        self.dependencies: dict[str, list[Entry]] = {}  # id -> its completed copies, looked up
        self.history_loaded = False  # `load_history` read history's headers and reports
        self._harnesses: dict[str, str] | None = None
        self._spending: dict[str, list[Spend]] | None = None
        self._budgets: dict[str, Budget] | None = None

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
                name: joined_names(role_folder(role, Box.COMPLETED))
                for name, role in self.roles.items()
            }
        found = []
        for role, joined in self._completed_names.items():
            for relative in lines_with(joined, hf.id_mark(ident)):
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
                    if entry.load().get(hf.ID):
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
        """Paths of `role`'s report files for `ident`, oldest first (listed on first ask; a
        snapshot of one role, `take_role`, lists its report folders then too)."""
        if role not in self.report_ids and role in self.roles:
            from handoffd.queue.reports import report_ids

            self.report_ids[role] = report_ids(self.roles[role].handoffs)
        if ident not in self.report_ids.get(role, ()):
            return []
        key = (role, ident)
        if key not in self._reports:
            from handoffd.queue.reports import report_paths

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
        from handoffd.queue.failed import dismissal

        entries = [Entry(role, state, path, batch) for _, role, state, path, batch in rows]
        for entry in entries:
            entry.load()
            if entry.state == State.DISMISSED and (line := dismissal(entry.path)):
                self.dismissals[entry.path] = line
        self._read_heads(entries)
        return entries

    def _read_heads(self, entries: Iterable[Entry]) -> None:
        """The latest report on each of `entries` that has a report folder."""
        from handoffd.queue.reports import head

        for entry in entries:
            key = (entry.role, entry.id)
            if key not in self.heads and (paths := self.reports(*key)):
                found = head(paths[-1])
                if found is not None:
                    self.heads[key] = found

    def harnesses(self) -> dict[str, str]:
        """The `harness` lines of the project's stored configuration (docs/protocol.md
        §16), read on first ask: what `status` says runs in a pane the daemon has not
        seen."""
        if self._harnesses is None:
            from handoffd.core import project

            self._harnesses = project.harnesses(self.root)
        return self._harnesses

    def spending(self) -> dict[str, list[Spend]]:
        """Each role's `H/usage.jsonl` records (docs/protocol.md §19), read on first
        ask: the tokens and budgets a view shows."""
        if self._spending is None:
            from handoffd.core import usage

            self._spending = usage.read_roles(self.roles.values())  # a remote role: none
        return self._spending

    def budgets(self) -> dict[str, Budget]:
        """The `budget` lines of the project's stored configuration, read on first ask."""
        if self._budgets is None:
            from handoffd.core import tokens

            self._budgets = tokens.budgets(config.budget_text(self.root) or "")
        return self._budgets

    # --- one card's file and reports, for a view of that card ------------------------

    def file(self, path: str) -> tuple[list[tuple[str, str]], str]:
        """The header lines and body of the queue file at `path` (one of this snapshot's),
        leniently: a broken file shows what it holds.  Through the careful reader: never
        a link or a FIFO, never more than `BODY_LIMIT` bytes."""
        return read_file(path)

    def report_files(self, role: str, ident: str) -> list[tuple[str, Report | None]]:
        """Each of `role`'s reports on `ident`, oldest first, read whole (through the
        reports module's careful reader); None for one that cannot be read, or was pruned
        since the listing."""
        from handoffd.queue import reports

        found: list[tuple[str, Report | None]] = []
        for path in self.reports(role, ident):
            try:
                found.append((path, reports.read(path)))
            except OSError:
                found.append((path, None))
        return found

    def dismissal(self, path: str) -> str | None:
        """The `.dismissed` line of the dismissed original at `path`, as the scan read it."""
        return self.dismissals.get(path)

    def _read_dismissals(self) -> None:
        from handoffd.queue.failed import dismissal

        for entry in self.history:
            if entry.state == State.DISMISSED and (line := dismissal(entry.path)):
                self.dismissals[entry.path] = line

    def _read_errors(self) -> None:
        for entry in self.open:
            if entry.state == State.FAILED:
                line = _error_line(entry.path)
                if line is not None:
                    self.errors[entry.path] = line

    def _read_unfit(self) -> None:
        """Why each file waiting in a pool's `new/` that cannot be handed out cannot (§17:
        every member skips it, so only the board can say)."""
        for entry in self.open:
            row = self.roles.get(entry.role)
            if entry.state == State.NEW and row is not None and row.is_pool:
                why = hf.unfit(entry.path)
                if why is not None:
                    self.unfit[entry.path] = why

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
        wanted = [d for entry in entries for d in dependencies(entry)]
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
            wanted += [d for entry in found for d in dependencies(entry)]


def take_snapshot(
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
    from handoffd.core import lifecycle  # not at the top: helpers import this module, and

    # lifecycle's subprocess would cost each of them its imports of re and enum
    from handoffd.queue.reports import report_ids

    roles = config.load_swarm(root) if roles is None else roles
    snapshot = Snapshot(root, roles, time.time() if now is None else now, once)
    for role in roles.values():
        snapshot.open += scan_role(role, State.OPEN, once=once)
        snapshot.heartbeats[role.name] = heartbeat.read(role.handoffs)
        snapshot.report_ids[role.name] = report_ids(role.handoffs)
    snapshot.daemon = lifecycle.daemon_state(root)
    _read_wakes(snapshot, root)
    snapshot._read_errors()
    snapshot._read_unfit()
    snapshot._read_heads(snapshot.open)
    snapshot._look_up_dependencies(snapshot.open)
    if history:
        snapshot.load_history()
    return snapshot


def take_role(
    root: str, role: Role, now: float | None = None, seen: Seen | None = None
) -> Snapshot:
    """A snapshot of `role` alone: its copies (`new/`, `in_process/`) with their header
    blocks, and nothing else (no other role, no original, no daemon state or log, no
    dependencies): all that finding one of its copies by the card the board names it
    takes (`cards.find_card`); that card's file and reports are read when asked (`file`,
    `report_files`), from the role's folders alone.  With `seen`, from what a step holding
    the role's inbox lock listed and read (`scan.handed`): nothing it listed is listed
    again."""
    snapshot = Snapshot(root, {role.name: role}, time.time() if now is None else now)
    copies = (State.NEW, State.IN_PROCESS)
    entries = None if seen is None else handed(role, copies, seen.folders, seen.read)
    snapshot.open = scan_role(role, copies) if entries is None else entries
    return snapshot


def _read_wakes(snapshot: Snapshot, root: str) -> None:
    """The wake-ups and the daemon's options from the log's tail; each role's pane as the
    daemon last saw it (only while a daemon runs: a dead one's file is stale) and when its
    `in_process/` last changed (docs/protocol.md §14)."""
    from handoffd.core import lifecycle
    from handoffd.remote import held
    from handoffd.wakeups import panes

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
        for path, name, batch in folder_files(folder, has_batches(state)):
            if batch is not None and batch not in stamps:
                stamps[batch] = _mtime_ns(batch)
            rows.append((hf.order_key(name), role, state, path, batch))
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


# what another long-running reader keeps between reads the same way (the swarm's numbers)
folders_unchanged, mtime_ns = _unchanged, _mtime_ns


def linked_folders(role: Role, boxes: tuple[str, ...]) -> list[str]:
    """Which of `boxes` of `role`'s handoff directory lie behind a symbolic link, and each
    `inbox/in_process/batch_…` that is one: what `status` warns of.  A few `lstat`s; an
    unreadable folder is no link (its commands say what is wrong)."""
    try:
        return safeio.linked_folders(role.handoffs, boxes) + _linked_batches(role.handoffs)
    except OSError:
        return []


def _linked_batches(handoffs: str) -> list[str]:
    """`inbox/in_process/batch_…` for each batch name in process that is a link."""
    try:
        fd = safeio.open_dir(os.path.join(handoffs, Box.IN_PROCESS), below=handoffs)
    except (FileNotFoundError, safeio.Refused):
        return []  # none, or the folder itself is the problem (said above)
    links = []
    try:
        for name in (n for n in os.listdir(fd) if n.startswith("batch_")):
            try:
                if stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                    links.append(f"{Box.IN_PROCESS}/{name}")
            except FileNotFoundError:
                continue  # finished or released since the listing
    finally:
        os.close(fd)
    return links


BODY_LIMIT = 1024 * 1024  # bytes of a queue file a view of one card shows


def read_file(path: str) -> tuple[list[tuple[str, str]], str]:
    """A queue file's header lines and body, leniently (`Snapshot.file`)."""
    try:  # the careful reader: never a link, a FIFO or more than the page shows
        fd = safeio.open_regular(path)
        try:
            data = safeio.read_fd(fd, BODY_LIMIT)
        finally:
            os.close(fd)
    except safeio.Refused as refusal:
        return [], f"(not shown: {refusal.why})"
    except OSError as error:
        return [], f"(cannot read {path}: {error.strerror})"
    return hf.split_lenient(data.decode("utf-8", errors="replace"))


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
    from handoffd.queue import failed  # only for an original found without its reason

    folder, name = os.path.split(path)
    try:
        return safeio.read_line(os.path.join(folder, failed.aside_name(name))) or None
    except OSError:
        return None
