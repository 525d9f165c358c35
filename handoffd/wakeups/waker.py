"""The daemon's waker: each wake-up typed on a thread of its role's own, once its pane is
idle (docs/protocol.md §14), through its harness's profile or the older tool's keys, and
checked for submission; the roles woken and not answered since; the re-notify schedule.

The lines it types and the tmux calls it makes are `handoffd.wakeups.wake`'s.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time

from handoffd.core import limits
from handoffd.harness import listing, pane, profiles
from handoffd.harness.marks import Marks
from handoffd.harness.recognise import Recognition
from handoffd.harness.typist import DeadPane, Typist
from handoffd.wakeups import panes
from handoffd.wakeups.wake import (
    TEXT,
    TMUX_TIMEOUT,
    PaneDead,
    capture,
    check_line,
    read_socket,
    refusal,
    run_tmux,
    send_keys,
    unsubmitted,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from structlog.typing import FilteringBoundLogger

POLL, POLL_MAX = 0.25, 1.0  # seconds between two reads of a pane waited on
RETRY_AFTER = 0.5  # seconds before the one more C-m for a line left unsubmitted, and after
SHOWN_AFTER = 0.2  # seconds a program gets to take the line and redraw before the pane is read


# a read of a pane: the pane (None: unreadable), its harness's profile, the role's view,
# and the state its profile reads (None for a generic pane, or one not read)
Look = tuple["pane.Pane | None", "profiles.Profile | None", panes.Seen, "str | None"]


class Waker:
    """Sends wake-ups on background threads, one per role; `wake` never blocks on tmux.

    A wake-up waits on its role's thread until the pane is idle (docs/protocol.md §14):
    its content unchanged for `idle_after` seconds, or the role marked itself idle since
    it last changed (`idle_mark(role)`: the time of its `H/idle`), or `idle_wait` seconds
    passed (`wake_forced`).  Each read is one tmux call with a timeout, on that role's own
    thread, so waiting for one pane never delays another role, a delivery or `close`.

    A read goes by a listing of every pane (`harness.listing`): a pane that printed
    nothing since it was last read is not read again, and `look`, the daemon's glance at
    every role each rescan, is one listing on one thread for all of them.
    """

    def __init__(
        self,
        root: str,
        log: FilteringBoundLogger,
        timeout: float = TMUX_TIMEOUT,
        on_failed: Callable[[str, str], None] | None = None,
        idle_after: float = 0.0,
        idle_wait: float = limits.IDLE_WAIT,
        idle_mark: Callable[[str], float | None] | None = None,
        pane_states: panes.Panes | None = None,
        harness_of: Callable[[str, str], str] | None = None,
        marks: Callable[[str], Marks] | None = None,
    ) -> None:
        self.root = root
        self.log = log
        self.timeout = timeout
        self.on_failed = on_failed  # (role, text) of a wake-up that did not reach its session
        self.idle_after = idle_after
        self.idle_wait = idle_wait
        self.idle_mark = idle_mark or (lambda role: None)
        self.panes = pane_states or panes.Panes(idle_after or limits.IDLE_AFTER)
        # (role, harness `up` recorded on its session) -> its harness (docs/protocol.md §16)
        self.harness_of = harness_of or (lambda role, recorded: recorded)
        self._profiles: dict[str, profiles.Profile | None] = {}  # role -> as last read
        self._recognition: dict[str, Recognition] = {}  # role -> its screens as its profile sees
        self._pending: dict[str, dict[str, str]] = {}  # role -> {text: session}, in order
        self._looks: dict[str, str] = {}  # role -> session: read its pane once, for status
        self._running: set[str] = set()  # roles whose thread is alive
        self._glancing = False  # a `look` at the idle roles' panes is under way
        self.screens = listing.Screens(timeout)
        self._held: set[str] = set()  # roles whose wake-up waits behind a person's text
        self._closed = False
        self._closing = threading.Event()  # set by close: a wait for idleness ends at once
        self._cond = threading.Condition()
        self.typist = Typist(log, timeout, self._closing,
                             marks or (lambda role: Marks(self.idle_mark(role), None)),
                             self._on_held)  # fmt: skip

    def wake(self, roles: Iterable[tuple[str, str]], text: str = TEXT) -> None:
        """Ask for one wake-up of each (role, session); coalesces with pending requests.  A
        role whose wake-up waits behind a person's text is sent nothing more, but the
        request counts as one more attempt that waits (docs/protocol.md §17)."""
        with self._cond:
            for role, session in roles:
                if self._closed:
                    return
                self._pending.setdefault(role, {})[text] = session
                if role in self._held:
                    self._log_held(role, session, text, self._profiles.get(role))
                if role not in self._running:
                    self._start(role)

    def held(self, role: str) -> bool:
        """Whether `role`'s wake-up waits because its input box holds a person's text: it
        may wait for good, so re-notify keeps counting (docs/protocol.md §17)."""
        with self._cond:
            return role in self._held and bool(self._pending.get(role))

    def waiting(self, role: str) -> bool:
        """Whether a wake-up for `role` was asked for and is not typed yet (its pane is not
        idle yet): a re-notify now would only join it."""
        with self._cond:
            return bool(self._pending.get(role))

    def look(self, roles: Iterable[tuple[str, str]]) -> None:
        """Read each (role, session)'s pane once, so its state stays current: a role whose
        thread runs reads it there; the others all from one listing, on one thread (none
        while the last such look still runs: a hung tmux is not asked twice)."""
        with self._cond:
            idle = []
            for role, session in roles:
                if self._closed or not session:
                    continue
                if role in self._running:
                    self._looks[role] = session
                else:
                    idle.append((role, session))
            if not idle or self._glancing:
                return
            thread = threading.Thread(target=self._glance, args=(idle,), name="look-panes")
            thread.daemon = True
            try:
                thread.start()
            except RuntimeError as error:  # no thread to be had: the next rescan looks again
                self.log.warning("look_failed", error=f"no thread: {error}")
                return
            self._glancing = True

    def _glance(self, roles: list[tuple[str, str]]) -> None:
        """`look`'s thread: one listing, then each role's pane from it."""
        try:
            try:
                socket = read_socket(self.root)
            except Exception:  # no socket file, or a bad one: a wake-up's send says why
                return
            listed = self.screens.listing(socket)
            for role, session in roles:
                if self._closing.is_set():
                    return
                self._look(role, session, socket, listed)
        finally:
            with self._cond:
                self._glancing = False

    def cancel(self, role: str, text: str = TEXT) -> bool:
        """Take back a line not yet typed (an agent's Stop hook told it of its mail): True
        if one was waiting."""
        with self._cond:
            return self._pending.get(role, {}).pop(text, None) is not None

    def drain(self, timeout: float) -> bool:
        """Wait until every requested wake-up was attempted; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._running, timeout)

    def close(self, wait: float = 0.0) -> None:
        """Send nothing more; wait up to `wait` seconds for the wake-ups being typed, so a
        stopping daemon does not leave a line typed but never submitted.  A wake-up still
        waiting for its pane to go quiet is dropped at once."""
        with self._cond:
            self._closed = True
            self._closing.set()
            self._pending.clear()
            self._looks.clear()
            self._cond.notify_all()
            if wait:
                self._cond.wait_for(lambda: not self._running, wait)

    def _start(self, role: str) -> None:
        thread = threading.Thread(target=self._serve, args=(role,), name=f"wake-{role}")
        thread.daemon = True
        try:
            thread.start()
        except RuntimeError as error:  # no thread to be had: this wake-up is lost, logged
            self._pending.pop(role, None)
            self._looks.pop(role, None)
            self.log.warning("wake_failed", role=role, error=f"no thread: {error}")
            return
        self._running.add(role)

    def _serve(self, role: str) -> None:
        """A role's thread: wait for its pane to be idle, send what is queued for it (a
        request arriving meanwhile joins the same wake-up), until nothing is."""
        try:
            while self._next(role):
                pass
        finally:
            with self._cond:
                self._running.discard(role)
                self._cond.notify_all()

    def _next(self, role: str) -> bool:
        """One round of a role's thread; False when nothing is left for it."""
        with self._cond:
            asked = dict(self._pending.get(role, {}))
            looked = self._looks.pop(role, None)
            if not asked and looked is None:
                self._pending.pop(role, None)
                return False
        if not asked:
            self._read(role, looked or "")
            return True
        waited, forced = self._await_idle(role, next(iter(asked.values())))
        with self._cond:
            queued = self._pending.pop(role, {})
        if self._closing.is_set() and not queued:  # dropped by close(): say so, once each
            for text in asked:
                self.log.warning("wake_failed", role=role, refused=refusal(text),
                                 error="stopped before the pane went quiet")  # fmt: skip
        with self._cond:
            after_held = role in self._held
            self._held.discard(role)
        for text, where in queued.items():
            self._send(role, where, text, waited, forced, after_held)
        return True  # look again: what close() cleared is then gone

    def _await_idle(self, role: str, session: str) -> tuple[float, bool]:
        """Wait until `role`'s pane is idle: the seconds waited, and whether it never was
        (the wake-up is forced).  A known harness is waited on by its own markers."""
        if not session:
            return 0.0, False
        seen = self._read(role, session)
        prof = self._profiles.get(role)
        if prof is not None and seen is not None and seen.pane not in (panes.GONE, panes.UNKNOWN):
            waited, forced = self._await_harness(role, session)
            known = self._profiles.get(role) is not None
            if known or self._closing.is_set() or not self._asked(role):
                return waited, forced
            seen = self._read(role, session)  # its screen is not recognised: wait as generic
        if self.idle_after <= 0:
            return 0.0, False
        started = time.monotonic()
        while not self._closing.is_set():
            waited = time.monotonic() - started
            if seen is None or seen.pane in (panes.GONE, panes.UNKNOWN) or self._idle(role, seen):
                return waited, False  # idle, or no pane to wait for: the send says what is wrong
            if waited >= self.idle_wait:
                self.log.info("wake_forced", role=role, session=session, waited=round(waited, 1))
                return waited, True
            self._closing.wait(min(self._poll(waited), max(0.0, self.idle_wait - waited)))
            seen = self._read(role, session)
        return time.monotonic() - started, False

    def _await_harness(self, role: str, session: str) -> tuple[float, bool]:
        """`_await_idle` for Claude Code or Codex (docs/protocol.md §16).  When the agent's
        Stop hook announced its mail meanwhile, the mail line is taken back; any other line
        asked for waits on."""
        while True:
            waited, forced, cancelled = self.typist.wait(
                role, session, lambda: self._harness_look(role, session), self.idle_wait,
                lambda: self._asked(role),
            )  # fmt: skip
            if not cancelled:
                return waited, forced
            self.cancel(role)
            if not self._asked(role):
                return waited, forced

    def _asked(self, role: str) -> bool:
        with self._cond:
            return bool(self._pending.get(role))

    def _ours(self, role: str) -> set[str]:
        """The lines handoffd may have typed into `role`'s box: the mail line, and those
        asked for (a box holding one of them exactly is no person's)."""
        with self._cond:
            return {TEXT, *self._pending.get(role, {})}

    def _on_held(self, role: str, session: str, prof: profiles.Profile) -> None:
        """From the role's thread: its wait found a person's text in the box."""
        with self._cond:
            self._held.add(role)
            for text in self._pending.get(role, {}):
                self._log_held(role, session, text, prof)

    def _log_held(self, role: str, session: str, text: str,
                  prof: profiles.Profile | None) -> None:  # fmt: skip
        """A wake-up attempt that waits behind a person's text: a `wake` with `held`, so
        the board counts it for stalls as one sent (nothing was typed)."""
        self.log.info("wake", role=role, session=session, refused=refusal(text),
                      submitted=False, forced=False, held=True, via="typed",
                      harness=prof.name if prof else "generic")  # fmt: skip

    def _poll(self, waited: float) -> float:
        """Seconds until the next read of a pane waited on: a quarter of --idle-after (at
        least POLL), slower as the wait grows (a pane busy for minutes is read once a
        second), so many busy panes cost the daemon little."""
        return min(POLL_MAX, max(POLL, self.idle_after / 4, waited / 20))

    def _idle(self, role: str, seen: panes.Seen) -> bool:
        if panes.marked_idle(seen, self.idle_mark(role)):
            return True
        return seen.looks > 1 and time.time() - seen.still_since() >= self.idle_after

    def _read(self, role: str, session: str) -> panes.Seen | None:
        """One read of the pane, recorded; None when there is no socket to read it through."""
        found = self._look(role, session)
        return None if found is None else found[2]

    def _look(
        self, role: str, session: str, socket: str | None = None,
        listed: listing.Listed | None = None,
    ) -> Look | None:  # fmt: skip
        """Read the pane once (from `listed`, else a fresh listing) and record what it
        shows (for `status`): the pane (None when it cannot be read), the profile of its
        harness, and the role's view; None without a socket to read it through."""
        if socket is None:
            try:
                socket = read_socket(self.root)
            except Exception:  # no socket file, or a bad one: the send logs why
                return None
        try:  # gone, or no server: `answers` says which
            seen, answers = self.screens.read(socket, session, listed)
        except Exception:  # whatever tmux did, the thread goes on (the state: unknown)
            seen, answers = None, False
        kind = self.harness_of(role, seen.harness if seen is not None else "")
        prof = profiles.profile(kind)
        content = None if seen is None or seen.dead else seen.content
        verdict, unrecognised = None, None
        if prof is not None and seen is not None and content is not None:
            if self._recognised(role, seen, prof):
                verdict = profiles.state(seen.screen, prof, self._ours(role))
            else:  # driven as generic (docs/protocol.md §17), and `status` says why
                prof, unrecognised = None, " ".join(filter(None, (kind, seen.version)))
        self._profiles[role] = prof
        view = self.panes.observe(role, session, content, answers, time.time(),
                                  self.idle_mark(role), verdict, kind, unrecognised)  # fmt: skip
        return seen, prof, view, verdict

    def _recognised(self, role: str, seen: pane.Pane, prof: profiles.Profile) -> bool:
        """Whether the profile of the role's harness recognises its pane's screen."""
        recognition = self._recognition.setdefault(role, Recognition())
        return recognition.see(seen.screen, prof, seen.created, time.time())

    def _harness_look(
        self, role: str, session: str
    ) -> tuple[pane.Pane, profiles.Profile | None, str] | None:
        found = self._look(role, session)
        if found is None or found[0] is None:
            return None
        return found[0], found[1], found[3] or ""

    def _send(
        self, role: str, session: str, text: str, waited: float = 0.0, forced: bool = False,
        after_held: bool = False,
    ) -> None:  # fmt: skip
        """One wake-up; whatever goes wrong is a `wake_failed` line, never an exception.
        `after_held`: it waited behind a person's text, and the board counted it then."""
        prof = self._profiles.get(role)
        try:
            if not session:
                raise RuntimeError("no tmux session for this role in roles.tsv")
            socket = read_socket(self.root)
            if prof is None:
                send_keys(socket, session, text, self.timeout)
            else:
                check_line(text)
                self.typist.type(socket, session, prof, text, self._ours(role))
        except subprocess.TimeoutExpired:
            self._failed(role, text, f"tmux timed out ({self.timeout}s)")
        except Exception as error:  # this thread must outlive any failure
            self._failed(role, text, str(error) or type(error).__name__)
        else:
            try:
                if prof is None:
                    submitted = self._submitted(role, socket, session, text)
                else:
                    submitted = self.typist.taken(role, socket, session, prof, text)
            except (PaneDead, DeadPane) as dead:  # tmux takes keys for a dead pane and drops them
                self._failed(role, text, str(dead))
                return
            self.panes.woken(role, time.time())
            typed: dict[str, object] = (
                {} if prof is None else {"via": "typed", "harness": prof.name}
            )
            if after_held:
                typed["after_held"] = True
            self.log.info("wake", role=role, session=session, refused=refusal(text),
                          submitted=submitted, forced=forced, waited=round(waited, 2),
                          **typed)  # fmt: skip

    def _submitted(self, role: str, socket: str, session: str, text: str) -> bool:
        """Read the pane after the keys: a line still typed there gets one more C-m, and
        `wake_unsubmitted` if even that left it (docs/protocol.md §14)."""
        try:
            time.sleep(SHOWN_AFTER)
            if not unsubmitted(*capture(socket, session, self.timeout), text):
                return True
            time.sleep(RETRY_AFTER)
            run_tmux(socket, self.timeout, "send-keys", "-t", f"={session}:", "C-m")
            time.sleep(RETRY_AFTER)
            if not unsubmitted(*capture(socket, session, self.timeout), text):
                return True
        except PaneDead:
            raise
        except Exception as error:  # cannot tell: say so, never count it as submitted
            self.log.warning("wake_unchecked", role=role, error=str(error) or repr(error))
            return False
        self.log.warning("wake_unsubmitted", role=role, session=session)
        return False

    def _failed(self, role: str, text: str, error: str) -> None:
        self.log.warning("wake_failed", role=role, error=error, refused=refusal(text))
        if self.on_failed is not None:
            self.on_failed(role, text)


class Unanswered:
    """Roles that were woken and have not taken anything since (docs/protocol.md §5.5).

    Pure: the caller passes a stamp of the role's `inbox/in_process` folder.  Taking work
    renames a file (or a batch folder) into it and finishing renames it out, and either
    changes the folder's stamp, so "nothing taken since the wake-up" is "the stamp is the
    one seen when it was sent": one stat per recipient, no listing of new/, however long.
    """

    def __init__(self) -> None:
        self._stamps: dict[str, object] = {}

    def due(self, role: str, stamp: object) -> bool:
        """Whether new mail may wake `role` now: it has no unanswered wake-up."""
        return stamp is None or self._stamps.get(role) != stamp

    def woken(self, role: str, stamp: object) -> None:
        self._stamps[role] = stamp

    def forget(self, role: str) -> None:
        """The wake-up never reached the role: the next mail wakes it again."""
        self._stamps.pop(role, None)


def stamp(folder: str) -> object:
    """What changes when an entry enters or leaves `folder`; None if it cannot be read.

    The size and link count join the mtime because some filesystems stamp times with a
    coarse clock; a folder removed and made again has a new inode.
    """
    try:
        info = os.stat(folder)
    except OSError:
        return None
    return (info.st_ino, info.st_mtime_ns, info.st_size, info.st_nlink)


class Renotifier:
    """When to wake a role again that has mail waiting and is not working on anything.

    Pure: the caller observes each role and passes the time.  The interval doubles after
    each re-notify, up to 16 minutes, and resets once the role takes work or runs dry.
    """

    def __init__(self, after: float, cap: float = limits.RENOTIFY_CAP) -> None:
        self.after = after
        self.cap = max(cap, after)
        self._since: dict[str, tuple[float, float]] = {}  # role -> (clock start, interval)

    def observe(self, role: str, idle_with_mail: bool, now: float) -> bool:
        """Record what the role looks like now; True when it is due for a wake-up."""
        if not idle_with_mail:
            self._since.pop(role, None)
            return False
        since, interval = self._since.setdefault(role, (now, self.after))
        if now - since < interval:
            return False
        self._since[role] = (now, min(interval * 2, self.cap))
        return True

    def woken(self, role: str, now: float) -> None:
        """A regular wake-up was just sent: count the waiting time from now."""
        if role in self._since:
            self._since[role] = (now, self._since[role][1])
