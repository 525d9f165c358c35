"""The daemon's loop: wait for an event or a timer, run one pass, repeat.

`step(now)` is one pass and takes the time as a parameter, so tests drive the daemon
without sleeping, and `run --once` is just "open, step until drained, wait for the
wake-ups, close".  Signal handlers and the stop file only set a flag: the pass in
flight always finishes.  SIGHUP reopens the log and re-reads roles.tsv, for an external
log rotator (see the README).
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import sys
import threading
import time

from handoffd.core import config, durable, lifecycle, limits, safeio
from handoffd.core import handoff as hf
from handoffd.core.config import Box, Role, linked_folders
from handoffd.core.lifecycle import daemon_path, notify
from handoffd.daemon import budgets
from handoffd.daemon.reclaim import Keeper
from handoffd.delivery.delivery import Courier
from handoffd.delivery.watch import Watcher
from handoffd.harness.roles import Harnesses
from handoffd.queue import heartbeat, pool
from handoffd.queue.items import Item, not_ready
from handoffd.queue.scan import State, listing
from handoffd.remote import held
from handoffd.wakeups import panes, wake, waker, wakeup
from handoffd.wakeups.waker import Renotifier, Unanswered, Waker

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from structlog.typing import FilteringBoundLogger

    from handoffd.daemon.bridge import Bridge

    # Whether the handoffs a role's waiting file depends on are done: (role, path, ids).
    # The rule is the board's (docs/protocol.md §13), so the caller above the core gives
    # it: `ops.readiness.for_daemon`, made once per re-notify check.
    Done = Callable[[str, str, list[str]], bool]
    Dependencies = Callable[[str, dict[str, Role]], Done]

WAKE_DRAIN = 10.0  # seconds `run --once` waits for its wake-ups before exiting
IN_FLIGHT = 2.0  # seconds a stopping daemon lets a wake-up being typed (and checked) finish
RESCAN = 2.0  # seconds between safety-net rescans (and re-notify checks)
SETTLE = 0.3  # seconds a changed roles.tsv must stand still before it is read
HANDOFF_DIRS = (Box.DRAFTS, Box.SENT, Box.FAILED, Box.NEW, Box.IN_PROCESS, Box.COMPLETED)
SETTLE_LIMIT = 15.0  # seconds `run --once` waits for files still being written in place


class Roles:
    """roles.tsv, re-read when it changes; a broken file keeps the last good roles.

    A file edited in place can be read half-written, and a role missing from that read
    would send its mail to failed/ as an unknown recipient.  So an in-place change
    younger than SETTLE is read only once it has stood still that long (a file replaced
    by rename is whole at once), and a file listing no role is never a good configuration.
    """

    def __init__(self, root: str, log: FilteringBoundLogger) -> None:
        self.root = root
        self.path = os.path.join(root, config.ROLES_FILE)
        self.log = log
        self.current: dict[str, Role] = {}
        self.settling = False  # a change waits to settle: look again in SETTLE seconds
        self._seen: object = None

    def reread(self) -> dict[str, Role]:
        """The roles with roles.tsv read now, settled or not: a recipient looks unknown, and
        may have just been added.  Raises `ConfigError` rather than answer from a stale view.

        A file read mid-write may lack roles, so only a read that adds roles replaces the
        current ones at once; any other change waits for the settled read of `get`.
        """
        fresh = config.load_swarm(self.root)
        if set(self.current) < set(fresh):
            self.current = fresh
            self.log.info("config_loaded", roles=_named(fresh))
        return {**self.current, **fresh}

    def forget(self) -> None:
        """Read the file again at the next `get`, changed or not (SIGHUP)."""
        self._seen = None

    def get(self) -> tuple[dict[str, Role], bool]:
        """The roles to use now, and whether they changed since the last call."""
        try:
            info = os.stat(self.path)
            seen: object = (info.st_mtime_ns, info.st_size, info.st_ino)
            in_place = isinstance(self._seen, tuple) and self._seen[2] == info.st_ino
            fresh = in_place and time.time() - info.st_mtime_ns / 1e9 < SETTLE
        except OSError as error:
            seen, fresh = error.strerror, False
        self.settling = seen != self._seen and fresh
        if seen == self._seen or self.settling:
            return self.current, False
        self._seen = seen
        try:
            roles = config.load_swarm(self.root)
            if not config.without_operator(roles):
                raise config.ConfigError(f"{self.path} lists no roles")
        except config.ConfigError as error:
            self.log.error("config_error", error=str(error), kept=_named(self.current))
            return self.current, False
        self.current = roles
        self.log.info("config_loaded", roles=_named(self.current))
        return self.current, True


class Daemon:
    """The delivery loop of one project."""

    def __init__(
        self,
        root: str,
        log: FilteringBoundLogger,
        renotify_after: float = limits.RENOTIFY_AFTER,
        lock: lifecycle.Lock | None = None,
        idle_after: float = limits.IDLE_AFTER,
        idle_wait: float = limits.IDLE_WAIT,
        dependencies: Dependencies | None = None,
        reclaim_after: float = limits.RECLAIM_AFTER,
    ) -> None:
        self.root = root
        self.log = log
        self.dependencies = dependencies  # None: only a blocked file is not ready
        self.lock = lock  # the project lock `handoffd run` holds, watched every pass
        self.roles = Roles(root, log)
        self.courier = Courier(root, log, self.roles.reread)
        self.panes = panes.Panes(idle_after or limits.IDLE_AFTER)
        self.harnesses = Harnesses(root, lambda: self.roles.current)  # docs/protocol.md §16
        self.held = held.Keeper(root)  # the link and deferrals `status` shows
        self.waker = Waker(root, log, on_failed=self._wake_failed, idle_after=idle_after,
                           idle_wait=idle_wait, idle_mark=self._idle_mark,
                           pane_states=self.panes, harness_of=self.harnesses.of,
                           marks=self.harnesses.marks)  # fmt: skip
        self.renotifier = Renotifier(renotify_after)
        self.unanswered = Unanswered()
        self.pools = Keeper(root, log, reclaim_after)  # docs/protocol.md §17
        self.budgets = budgets.Held(root, log)  # roles a spent budget holds (§19)
        self.rescan_every = min(RESCAN, renotify_after / 4)
        self.poke = threading.Event()
        self.panes.changed = self.poke.set  # a pane's new state: a pass saves it for `status`
        self.stopping = False
        self.hangup = False
        self.watcher: Watcher | None = None
        self.bridge: Bridge | None = None  # the NATS side of a swarm over several hosts
        self._next_rescan = 0.0
        self._took: dict[str, object] = {}  # role -> its in_process/ stamp at the last rescan
        self._stop_file = daemon_path(root, "stop")

    # --- life ---------------------------------------------------------------------------

    def open(self, watch: bool = True) -> None:
        """Recover from any crash, then start watching; the daemon is ready after this."""
        self._take_stop_file()  # left by an earlier stop: not meant for us
        roles, _ = self.roles.get()
        self._connect()
        self._make_dirs(roles)
        self.courier.recover(roles)
        if watch:
            self.watcher = Watcher(self.poke.set)
            self.courier.arrivals = self.watcher  # a file renamed in is taken at once
            self._rearm(roles)

    def _connect(self) -> None:
        """With `nats` in swarmforge.conf, start the link to the other hosts (docs/protocol.md
        §15); a project without it never imports the NATS client."""
        from handoffd.remote import settings

        try:
            self.courier.here = config.this_host(self.root)
            network = settings.load(self.root)
        except config.ConfigError as error:
            self.log.error("config_error", error=str(error))
            return
        if network is None:
            return
        try:
            from handoffd.daemon.bridge import Bridge
        except ImportError as error:
            missing = f"the NATS client is missing ({error.name}): pip install 'handoffd[nats]'"
            self.log.error("config_error", error=f"swarmforge.conf names NATS servers; {missing}")
            return
        self.bridge = Bridge(self.root, network, self.log, self.poke.set)
        self.courier.outgoing = self.bridge.outgoing
        self.bridge.start()

    def close(self, drain: float = 0.0) -> None:
        if drain:
            self.waker.drain(drain)
        self.waker.close(wait=IN_FLIGHT)
        if self.watcher:
            self.watcher.stop()
        if self.bridge is not None:
            self.bridge.close()

    def request_stop(self, *_: object) -> None:
        """Signal handler: finish the pass in flight, then leave."""
        self.stopping = True
        self.poke.set()

    def request_reload(self, *_: object) -> None:
        """SIGHUP handler: reopen the log and re-read roles.tsv at the next pass."""
        self.hangup = True
        self.poke.set()

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self.request_stop)
        signal.signal(signal.SIGINT, self.request_stop)
        signal.signal(signal.SIGHUP, self.request_reload)

    # --- the loop -----------------------------------------------------------------------

    def run(self) -> None:
        """Until asked to stop: a pass on every event, retry or rescan."""
        watchdog = _watchdog_interval()
        failures = 0
        while not self.stopping:
            self.poke.clear()
            failures = 0 if self.guarded_step(time.monotonic()) else failures + 1
            if watchdog:
                notify("WATCHDOG=1")
            if self.stopping or (self.courier.backlog and not failures):
                continue
            timeout = self._timeout(time.monotonic(), watchdog)
            if failures:  # a pass failing again at once must not spin: back off
                timeout = max(timeout, limits.retry_delay(failures + 1))
                timeout = min(timeout, watchdog) if watchdog else timeout
            self.poke.wait(timeout)

    def drain(self, settle_limit: float = SETTLE_LIMIT) -> None:
        """`run --once`: pass until nothing deliverable is left, waiting up to `settle_limit`
        seconds for files still being written in place (taken once whole, never skipped),
        for the stream's answers and for the copies it holds for this host."""
        deadline = time.monotonic() + settle_limit
        self.guarded_step(time.monotonic())
        while not self.stopping:
            if not self.courier.backlog:
                due = self.courier.next_settled()
                if (self._publishing() or self._receiving()) and time.monotonic() < deadline:
                    due = time.monotonic() + RESCAN  # woken by the stream's answer or a pull
                if due is None or due > deadline:
                    break
                self.poke.wait(max(0.0, due - time.monotonic()))
            self.poke.clear()  # before the pass: an answer during it wakes the next wait
            self.guarded_step(time.monotonic())
        for path in self.courier.settling:
            self.log.warning("left_unsettled", file=path, waited=settle_limit)

    def _receiving(self) -> bool:
        """Copies for this host's roles may still wait in the stream: `run --once` takes
        them too (docs/protocol.md §15), pulling until a pull comes back empty."""
        return self.bridge is not None and not self.bridge.received_all(time.monotonic())

    def _publishing(self) -> bool:
        """Copies for other hosts handed to the stream and not yet answered."""
        outgoing = self.courier.outgoing
        return outgoing is not None and outgoing.pending() > 0

    def guarded_step(self, now: float) -> bool:
        """A pass whose unexpected failure is logged, never fatal: the next pass retries."""
        try:
            self.step(now)
        except Exception as error:
            self.log.exception("pass_failed", error=str(error))
            return False
        return True

    def step(self, now: float) -> None:
        """One pass: configuration, stop file, deliveries and their wake-ups, the wake-ups
        commands asked for (`H/wake`), and on rescan ticks, re-armed watches and re-notify."""
        if self.hangup:
            self._reload()
        roles, changed = self.roles.get()
        if changed:
            self._make_dirs(roles)
        rescan = changed or now >= self._next_rescan
        if rescan:
            # Watch before scanning: a file landing after the scan then still sends an event
            # (re-armed after the scan, it would wait for the next rescan).
            self._rearm(roles)
        if self._take_stop_file():
            self.log.info("stop_file")
            self.stopping = True
        if self.lock is not None and self.lock.lost():
            # the project's root folder was removed or replaced: another daemon may lock the new one
            self.log.error("lock_lost", folder=self.lock.path)
            self.stopping = True
            return
        if rescan and self.lock is not None:
            self._restore_daemon_files()
        got_mail = self.courier.deliver(roles, now)
        local = self.courier.local(roles)
        if self.bridge is not None:
            got_mail |= self.bridge.incoming.receive(local)
        self._wake(got_mail, roles, now)
        if self.bridge is not None:
            self.bridge.incoming.acknowledge()  # only now: each copy is written, its role woken
        self._wake_refused(self.courier.refused_senders, roles)
        if rescan:
            self._next_rescan = now + self.rescan_every
            awake = config.without_operator(local)  # no pane to wake for its inbox (§18)
            waiting = _pool_states({name: _mail_states(role) for name, role in awake.items()},
                                   awake)  # fmt: skip
            self._renotify(awake, waiting, now)
            self._budget_resumed(awake, waiting)
            self._wake_asked(local)  # after re-notify, as ever
            self._look(local)
            self._watch_takes(local)
            self._watch_announcements(local, now)
            self._reclaim(local, time.time())  # heartbeats are wall-clock times
            if self.bridge is not None:
                self.bridge.follow(local)
                self.bridge.board.tick(local, now)
        else:  # a pass on an event: one may be `H/wake` (a stat a role when none is there)
            self._wake_asked(local)
        self.panes.save(self.root)  # what `status` shows of the panes, when it changed
        link = self.bridge.link.status() if self.bridge is not None else None
        self.held.update(link, self.courier.held())  # and of its link and deferrals

    def _restore_daemon_files(self) -> None:
        """Put back the pid file and the log if someone removed `daemon/` (the journal is
        recreated by its next commit) or left a link, FIFO or file where it or they should
        be (each is replaced, never written through); a write that fails is retried at the
        next rescan."""
        try:
            replaced = lifecycle.own_folder(self.root)
        except OSError as problem:
            self.log.warning("mkdir_failed", folder=daemon_path(self.root, ""), error=str(problem))
            return
        error = lifecycle.ensure_pid(self.root, os.getpid())
        if error is not None:
            self.log.warning("pid_file_not_written", error=str(error))
        log_file = daemon_path(self.root, "handoffd.log")
        if not _own_file(log_file):
            from handoffd.core import log as logging

            logging.reopen()  # never raises: a line that cannot be written is counted
            self.log.info("log_reopened", file=log_file)
        self._replaced(replaced)

    def _replaced(self, replaced: bool) -> None:
        """Say that `daemon/` was a link, and was replaced by a folder of our own."""
        if replaced:
            folder = daemon_path(self.root, "").rstrip(os.sep)
            self.log.error("linked_folder", folder=folder, replaced=True)

    def _reload(self) -> None:
        """After SIGHUP: a fresh log file where the rotator moved the old one away, and
        roles.tsv read again whether or not its stamp changed."""
        from handoffd.core import log as logging

        self.hangup = False
        logging.reopen()
        self.roles.forget()
        self.log.info("reloaded", pid=os.getpid())

    def _take_stop_file(self) -> bool:
        """Remove `daemon/stop` if it is there (whatever it is); True if it was."""
        if not os.path.lexists(self._stop_file):
            return False
        if os.path.isdir(self._stop_file) and not os.path.islink(self._stop_file):
            shutil.rmtree(self._stop_file, ignore_errors=True)
        else:
            durable.unlink_quietly(self._stop_file)
        return True

    def _timeout(self, now: float, watchdog: float | None) -> float:
        due = [self._next_rescan, self.courier.next_retry() or self._next_rescan]
        if self.roles.settling:
            due.append(now + SETTLE)
        timeout = max(0.0, min(due) - now)
        return min(timeout, watchdog) if watchdog else timeout

    # --- wake-ups -----------------------------------------------------------------------

    def _wake(self, names: set[str], roles: dict[str, Role], now: float) -> None:
        """One wake-up per recipient of this pass, but none for a role still sitting on an
        unanswered one: re-notify wakes that role when due (a burst types one line)."""
        roles = self.roles.current  # a recipient found by a re-read during the pass is here
        stamps = {name: _taken_stamp(roles[name]) for name in names
                  if name in roles and not roles[name].is_operator}  # fmt: skip
        due = [name for name, seen in stamps.items() if self.unanswered.due(name, seen)]
        for name in due:
            self.renotifier.woken(name, now)
        self._send(due, roles, stamps)

    def _not_ready(self, due: list[str], roles: dict[str, Role]) -> list[str]:
        """The roles among `due` with nothing ready in `new/`.  Whatever goes wrong in
        telling (the board is read from untrusted files) counts as ready: a wake-up too
        many, never the pass that delivers lost to it."""
        try:
            check = None if self.dependencies is None else self.dependencies(
                self.root, self.roles.current
            )  # fmt: skip
            return [name for name in due if not _has_ready(roles[name], check)]
        except Exception as error:  # logged, and the wake-ups go out
            self.log.warning("readiness_failed", error=f"{type(error).__name__}: {error}")
            return []

    def _renotify(self, roles: dict[str, Role], states: dict[str, set[str]], now: float) -> None:
        """Wake again a role that sits on mail it could take (§5, §13): a role whose `new/`
        holds only files that are not ready (blocked, or waiting on a dependency) is not
        nagged for them.  Readiness is read only when a re-notify is due (at most once per
        interval per role, headers only); a role found with nothing ready starts its clock
        again, so it is looked at once per interval until its mail is ready."""
        due = []
        for name in roles:
            if self._waits(name):  # its wake-up waits for an idle pane: none to repeat
                self.renotifier.woken(name, now)
            elif self.renotifier.observe(name, states[name] == {State.NEW}, now):
                due.append(name)
        if due:
            waiting = self._not_ready(due, roles)
            for name in waiting:
                self.renotifier.observe(name, False, now)  # its clock starts again
            due = [name for name in due if name not in waiting]
        for name in due:
            self.log.info("renotify", role=name)
        self._send(due, roles, {name: _taken_stamp(roles[name]) for name in due})

    def _budget_resumed(self, roles: dict[str, Role], states: dict[str, set[str]]) -> None:
        """Wake a role a budget held once its window has moved on, as for mail waiting
        (docs/protocol.md §19): only one that still has mail and holds nothing."""
        due = [name for name in self.budgets.resumed()
               if name in roles and states.get(name) == {State.NEW}]  # fmt: skip
        self._send(due, roles, {name: _taken_stamp(roles[name]) for name in due})

    def _waits(self, name: str) -> bool:
        """Whether `name`'s wake-up waits for its pane to be idle: a re-notify would only
        join it.  One waiting behind a person's text may wait for good, so its re-notifies
        go on, each counted as one more attempt that waits (docs/protocol.md §17)."""
        return self.waker.waiting(name) and not self.waker.held(name)

    def _send(self, names: list[str], roles: dict[str, Role], stamps: dict[str, object]) -> None:
        names = self.budgets.allowed(names, roles)  # none while spent (§19)
        for name in names:
            self.unanswered.woken(name, stamps[name])
        woken = [self._woken(roles, name) for name in names]
        self.waker.wake((role.name, role.session) for role in woken if role.session)

    def _woken(self, roles: dict[str, Role], name: str) -> Role:
        """The role a wake-up for `name` goes to: a pool's, one member (docs/protocol.md
        §17: the idle one longest idle, else the one woken least recently)."""
        role = roles[name]
        if not role.is_pool:
            return role
        member = self.pools.wake_one(name, roles, self.panes.idle_since(), time.time())
        return role if member is None else member

    def _reclaim(self, roles: dict[str, Role], now: float) -> None:
        """Give back what pool members that stopped answering hold (docs/protocol.md §17);
        `now` is the wall clock's, as heartbeats are."""
        for row in pool.pools(roles):
            for member in pool.members(row.name, roles):
                self.pools.seen(member.name, self.panes.state(member.name) == panes.GONE,
                                True, now)  # fmt: skip
        before = {name: _taken_stamp(role) for name, role in roles.items()
                  if role.pool and not role.is_pool}  # fmt: skip
        given = sorted({card.rpartition("@")[2] for card in self.pools.tick(roles, now)})
        if given:
            self._own_takes(roles, before)
        self._send(given, roles, dict.fromkeys(given))  # what went back wakes one member

    def _own_takes(self, roles: dict[str, Role], before: dict[str, object]) -> None:
        """A reclaim changed members' `in_process/`: that was the daemon, not the member
        taking work, so `status`'s "last take" of a dead member is not made fresh by it.
        Only a stamp the last rescan saw is moved on (a member's own take since is kept)."""
        for name, seen in before.items():
            if self._took.get(name, self) == seen:
                self._took[name] = _taken_stamp(roles[name])

    def _wake_asked(self, roles: dict[str, Role]) -> None:
        """Type the lines commands asked for (`answer`, `reopen`: `H/wake`) the way of every
        wake-up, once the pane is idle.  The file is untrusted: what is no one-line request
        (`wakeup.take_wake` says why), or not a line the daemon would have built itself
        (`wake.asked_problem`), is never typed, and logged."""
        for name, role in roles.items():
            try:
                request = wakeup.take_wake(role.handoffs)
            except wakeup.NotARequest as refusal:
                self.log.warning("wake_refused", role=name, error=str(refusal))
                continue
            if request is None:
                continue
            problem = wake.asked_problem(request.text, role.path(Box.FAILED))
            if problem:
                self.log.warning("wake_refused", role=name, error=problem)
                continue
            if not role.session:
                self.log.warning("wake_refused", role=name, error="no tmux session in roles.tsv")
                continue
            if wake.told_already(request.text, request.at, self.panes.woken_at(name)):
                self.log.info("wake_coalesced", role=name)
                continue
            self.log.info("wake_asked", role=name)
            self.waker.wake([(name, role.session)], request.text)

    def _look(self, roles: dict[str, Role]) -> None:
        """Read every role's pane at each rescan, for `status` and the web board: one tmux
        listing for all of them, and a read of those that printed since they were last
        read (`harness.listing`), so an idle swarm costs one tmux call a rescan however
        many panes it has, and a pane's state is never more than a rescan old."""
        self.waker.look((name, role.session) for name, role in roles.items() if role.session)

    def _watch_takes(self, roles: dict[str, Role]) -> None:
        """Note when each role's in_process/ changed since the last rescan, for `status`'s
        "last take" (the first look only learns the stamp)."""
        for name, role in roles.items():
            seen = _taken_stamp(role)
            if name in self._took and self._took[name] != seen:
                self.panes.took(name, role.session, time.time())
            self._took[name] = seen

    def _watch_announcements(self, roles: dict[str, Role], now: float) -> None:
        """A Stop hook that told its agent of mail (H/announced changed, docs/protocol.md
        §16) woke the role: logged as a wake-up `via: hook`, counted for re-notify and
        stalls, and the line the waker would have typed is taken back."""
        for name, at in self.harnesses.announced(roles):
            self.waker.cancel(name)
            self.unanswered.woken(name, _taken_stamp(roles[name]))
            self.renotifier.woken(name, now)
            self.panes.woken(name, at)
            self.log.info("wake", role=name, session=roles[name].session, via="hook",
                          submitted=True)  # fmt: skip

    def _idle_mark(self, name: str) -> float | None:
        """From a wake-up thread: when `name` last ran `handoffd idle` (its `H/idle`)."""
        role = self.roles.current.get(name)
        return None if role is None else heartbeat.idle_at(role.handoffs)

    def _wake_failed(self, role: str, text: str) -> None:
        """From a wake-up thread: a wake-up that never arrived leaves nothing unanswered."""
        if text == wake.TEXT:
            self.unanswered.forget(role)

    def _wake_refused(self, senders: set[str], roles: dict[str, Role]) -> None:
        """Once per pass, tell each sender whose handoff went to failed/ where to look."""
        for name in sorted(senders & config.without_operator(roles).keys()):
            text = wake.REFUSED.format(failed=roles[name].path(Box.FAILED))
            self.waker.wake([(name, roles[name].session)], text)

    def _make_dirs(self, roles: dict[str, Role]) -> None:
        """Create each local role's handoff folders, for roles whose worktree exists;
        durably, since helpers and later passes rely on them (and on what they later hold)."""
        for role in self.courier.local(roles).values():
            try:
                if os.path.isdir(role.worktree):
                    linked = linked_folders(role)  # never made through a link
                    for box in (Box.NEW,) if role.is_pool else HANDOFF_DIRS:  # a pool: §17
                        if box not in linked:
                            durable.makedirs(role.path(box))
            except OSError as error:
                self.log.warning("mkdir_failed", role=role.name, error=str(error))

    def _rearm(self, roles: dict[str, Role]) -> None:
        if self.watcher is None:
            return
        swarmforge = os.path.join(self.root, config.SWARMFORGE)
        directories = [swarmforge, os.path.join(swarmforge, "daemon")]
        for role in self.courier.local(roles).values():
            if not role.is_pool and Box.OUTBOX not in self.courier.linked.get(role.name, {}):
                directories.append(role.path(Box.OUTBOX))  # a linked one is not taken from
            if not os.path.islink(role.handoffs):  # `H/wake` asked for: typed at once
                directories.append(role.handoffs)
        try:
            self.watcher.update(directories)
        except OSError as error:  # e.g. out of inotify watches: the rescan still finds work
            self.log.warning("watch_failed", error=str(error))


def _named(roles: dict[str, Role]) -> list[str]:
    """The roles of roles.tsv a log line names (the operator's mailbox is always there)."""
    return sorted(config.without_operator(roles))


def _own_file(path: str) -> bool:
    """Whether `path` is a regular file itself (a link to one is not) that no other name
    shares (a hard link put in the log's place is moved aside when the log is reopened)."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_nlink == 1


def _pool_states(states: dict[str, set[str]], roles: dict[str, Role]) -> dict[str, set[str]]:
    """A pool's mail counts as waiting on an idle role (for re-notify) only while one of
    its members has nothing in process: busy members are not nagged for it."""
    for row in pool.pools(roles):
        team = [states.get(member.name, set()) for member in pool.members(row.name, roles)]
        if row.name in states and not any(State.IN_PROCESS not in got for got in team):
            states[row.name] = states[row.name] | {State.IN_PROCESS}
    return states


def _taken_stamp(role: Role) -> object:
    """The stamp of the role's in_process/: it changes when the role takes or finishes work."""
    return waker.stamp(role.path(Box.IN_PROCESS))


def _mail_states(role: Role) -> set[str]:
    """Which of new/ and in_process/ hold something: {new} alone is an agent that may have
    missed its wake-up.  Nothing for an inbox that is no folder of its own: what a link
    there shows is not mail the role can take (docs/protocol.md Part II)."""
    if safeio.linked_folders(role.handoffs, (Box.NEW, Box.IN_PROCESS)):
        return set()
    return {e.state for e in listing(role, (State.NEW, State.IN_PROCESS))}


def _has_ready(role: Role, check: Done | None) -> bool:
    """Whether `role`'s `new/` holds a file `ready_for_next` would take now (inbox's rule,
    docs/protocol.md §13): read in queue order up to the first ready one, each through the
    careful reader and its header block only.  A file gone since the listing was taken; one
    that cannot be read is the agent's to hear about, from its helper; but one in a pool's
    `new/` that cannot be handed out is skipped, as every member skips it (§17)."""
    done = None if check is None else (lambda path, wanted: check(role.name, path, wanted))
    for entry in listing(role, (State.NEW,)):
        if role.is_pool and hf.unfit(entry.path) is not None:
            continue
        try:
            headers = hf.read_headers(entry.path)
        except FileNotFoundError:
            continue
        except OSError:
            return True
        if not_ready(Item(entry.path, hf.Handoff(list(headers.items()), "")), done) is None:
            return True
    return False


def _watchdog_interval() -> float | None:
    """Half of systemd's watchdog timeout, if one is set for us."""
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    return int(usec) / 2_000_000


def serve(
    root: str,
    once: bool = False,
    renotify_after: float = limits.RENOTIFY_AFTER,
    idle_after: float = limits.IDLE_AFTER,
    idle_wait: float = limits.IDLE_WAIT,
    stall_wakes: int = limits.STALL_WAKES,
    dependencies: Dependencies | None = None,
    reclaim_after: float = limits.RECLAIM_AFTER,
) -> int:
    """`handoffd run`: hold the project's lock and deliver until stopped (or drained).  The
    `started` line carries the options a reader of the log needs (`status` reads
    `stall_wakes` there).  `dependencies` tells the re-notify check whether a waiting
    file's dependencies are done (the command passes the board's rule)."""
    from handoffd.core import log as logging
    from handoffd.core.lifecycle import AlreadyRunning, Lock

    lock = Lock(root)
    try:
        lock.acquire()
    except AlreadyRunning as running:
        print(f"handoffd is already running for {root} ({running})", file=sys.stderr)
        return 1
    try:
        log = logging.configure(daemon_path(root, "handoffd.log"))
    except OSError:  # daemon/ cannot be made (disk full?): retried at each rescan
        log = logging.configure(None)
    daemon = Daemon(root, log, renotify_after, lock, idle_after, idle_wait, dependencies,
                    reclaim_after)  # fmt: skip
    daemon._replaced(lock.replaced)
    if lock.pid_error is not None:
        log.warning("pid_file_not_written", error=str(lock.pid_error))
    daemon.install_signal_handlers()
    try:
        daemon.open(watch=not once)
        log.info("started", pid=os.getpid(), root=root, once=once, renotify_after=renotify_after,
                 idle_after=idle_after, idle_wait=idle_wait, stall_wakes=stall_wakes,
                 reclaim_after=reclaim_after)  # fmt: skip
        notify("READY=1")
        daemon.drain() if once else daemon.run()
        notify("STOPPING=1")
    finally:
        daemon.close(drain=WAKE_DRAIN if once else 0.0)
        log.info("stopped", pid=os.getpid())
        lock.release()
    return 0
