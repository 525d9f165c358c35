"""Wake-ups: a short line typed into a role's tmux session.  Lossy by design.

The queue on disk is the truth; a wake-up only tells an idle agent to look.  So it
runs off the delivery path, on a thread per role (a hung tmux for one role never
delays another), each tmux call with a timeout, and any failure is logged, never
raised.  Requests for a role that is already waiting to be woken coalesce.

tmux is called directly rather than through libtmux: a wake-up needs a hard timeout
(a stopped or hung server must not wedge the waker), which libtmux does not offer.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time

from handoffd import panes, safeio
from handoffd.config import SWARMFORGE
from handoffd.harness import pane, profiles
from handoffd.harness.marks import Marks
from handoffd.harness.typist import DeadPane, Typist

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from structlog.typing import FilteringBoundLogger

# The lines handoffd types (docs/protocol.md §5, §13): the only ones, so the daemon types
# from `H/wake` nothing else (`asked_problem`).
TEXT = "You have new handoff mail. If idle, run ready_for_next.sh."
REFUSED = "A handoff you sent was refused: see the .error file beside it in {failed}/"
ANSWERED = "An operator answered you on {}. Run ready_for_next.sh to see it."
ELLIPSIS = "…"  # ends a label cut to fit
LABEL_LIMIT = 80  # characters of a name shown in a wake-up line (a draft's task: at most 80)
# What a name in a wake-up line may keep: the line is typed into a pane, which may hold a
# shell as well as an agent, so nothing a terminal obeys or a shell expands survives.
LABEL_PUNCTUATION = frozenset(" -_.,:/@+=")
SOCKET_FILE = os.path.join(SWARMFORGE, "tmux-socket")
SOCKET_LIMIT = 4096  # bytes: one path (PATH_MAX); never read more of the socket file
TMUX_TIMEOUT = 2.0  # seconds for one tmux call
# The older tool's cadence (docs/protocol.md §5.5): agent TUIs take text and Enter sent
# in one burst for a paste and leave it unsent, so the keys that submit come apart.
BEFORE_RETURN, BEFORE_LINE_FEED = 0.150, 0.050  # seconds
RENOTIFY_CAP = 16 * 60.0
IDLE_AFTER, IDLE_WAIT = 2.0, 300.0  # seconds: still this long is idle; typed anyway after
POLL, POLL_MAX = 0.25, 1.0  # seconds between two reads of a pane waited on
RETRY_AFTER = 0.5  # seconds before the one more C-m for a line left unsubmitted, and after
SHOWN_AFTER = 0.2  # seconds a program gets to take the line and redraw before the pane is read
WRAPPED_TAIL = 8  # characters of the text's end that, alone on the last row, are the text


def label(name: str, limit: int = LABEL_LIMIT) -> str:
    """`name` (a task from a header: untrusted) fit to be shown in a wake-up line: every
    character but a letter, a digit and ` -_.,:/@+=` as `_` (an escape sequence, a line
    break, a `$(…)` or a backquote typed into a pane is obeyed by what runs there), and
    cut to `limit` characters, so the line stays one short line."""
    kept = "".join(c if c.isalnum() or c in LABEL_PUNCTUATION else "_" for c in name.strip())
    return kept if len(kept) <= limit else kept[: limit - 1] + ELLIPSIS


def is_label(text: str, limit: int = LABEL_LIMIT) -> bool:
    """Whether `text` is what `label` makes of some name: only the characters it keeps, no
    space at either end, at most `limit` characters, and an ellipsis only as the last of
    exactly `limit` (a name that was cut; the cut may leave a space before it)."""
    cut = len(text) == limit and text.endswith(ELLIPSIS)
    body = text[:-1] if cut else text
    kept = all(c.isalnum() or c in LABEL_PUNCTUATION for c in body)
    return kept and len(text) <= limit and body == (body.lstrip() if cut else body.strip())


def asked_problem(text: str, failed: str) -> str:
    """Why `text`, a line a command left in a role's `H/wake`, is not one the daemon would
    have built itself for that role (`failed`: its `failed/` folder), or ''.  The file is
    anyone's to write: only the fixed lines of §5 and §13 are typed, an answer's with a
    card's label as `label` makes it (nothing a shell expands, nothing a terminal obeys)."""
    if text in (TEXT, REFUSED.format(failed=failed)):
        return ""
    head, _, tail = ANSWERED.partition("{}")
    if len(text) >= len(head) + len(tail) and text.startswith(head) and text.endswith(tail):
        if is_label(text[len(head) : len(text) - len(tail)]):
            return ""
        return "an answer's line whose label is not one handoffd makes"
    return "not a line handoffd types"


def check_line(text: str) -> None:
    """Refuse (ValueError) a wake-up line that is not one line of text: a control
    character, a line break or a lone surrogate in it is never typed."""
    from handoffd.terminal import has_control

    if not text or has_control(text):
        raise ValueError("the wake-up line is empty or holds a control character: not typed")


def send_keys(socket: str, session: str, text: str = TEXT, timeout: float = TMUX_TIMEOUT) -> None:
    """Type `text` into exactly `session`, then C-m and C-j at the older tool's cadence;
    raises on any failure (and sends nothing more after one), and on a `text` that is not
    one line of text (`check_line`) before anything is sent.

    `=name:` matches the session name exactly (a bare name is a prefix match, so
    `coder` would hit `coder-b`); `-l --` sends the text literally, even if it began
    with `-`.
    """
    check_line(text)
    target = f"={session}:"
    _tmux(socket, timeout, "send-keys", "-t", target, "-l", "--", text)
    time.sleep(BEFORE_RETURN)
    _tmux(socket, timeout, "send-keys", "-t", target, "C-m")
    time.sleep(BEFORE_LINE_FEED)
    _tmux(socket, timeout, "send-keys", "-t", target, "C-j")


def refusal(text: str) -> bool:
    """Whether `text` is the line telling a sender its handoff was refused (the log's
    `refused`): not the mail line, and not a line a command asked for (an answer's)."""
    return text.startswith(REFUSED.partition("{")[0])


def _tmux(socket: str, timeout: float, *args: str) -> None:
    command = ["tmux", "-S", socket, *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise RuntimeError(result.stderr.strip() or f"tmux exited with {result.returncode}")


class PaneDead(RuntimeError):
    """The pane's program has exited (a pane kept by `remain-on-exit`): no agent reads it."""


def capture(socket: str, session: str, timeout: float = TMUX_TIMEOUT) -> tuple[str, int]:
    """The visible content of `session`'s pane and its cursor's row, in one tmux call;
    `PaneDead` when the program in it has exited."""
    target = f"={session}:"
    command = ["tmux", "-S", socket, "capture-pane", "-p", "-t", target, ";",
               "display-message", "-p", "-t", target, "#{cursor_y} #{pane_dead}"]  # fmt: skip
    result = subprocess.run(command, capture_output=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise RuntimeError(result.stderr.decode(errors="replace").strip() or "capture failed")
    text = result.stdout.decode(errors="replace").rstrip("\n")
    content, _, last = text.rpartition("\n")
    cursor, _, dead = last.partition(" ")
    if dead.strip() == "1":
        raise PaneDead(f"the program in {session}'s pane has exited")
    return content, int(cursor) if cursor.strip().isdigit() else -1


def server_answers(socket: str, timeout: float = TMUX_TIMEOUT) -> bool:
    """Whether a tmux server answers on `socket` (a session missing from it is gone; no
    server at all is unknown: a project driven by hand has none)."""
    command = ["tmux", "-S", socket, "list-sessions", "-F", "#{session_name}"]
    try:
        result = subprocess.run(command, capture_output=True, timeout=timeout, check=False)
    except Exception:  # a socket path tmux cannot take (a NUL in it), a hung server
        return False
    return result.returncode == 0


def unsubmitted(content: str, cursor_y: int, text: str) -> bool:
    """Whether `text` still sits typed on the pane's last non-empty line with the cursor
    on it: typed, not submitted.  A program that printed the line back after reading it
    (the way `cat` does) has moved the cursor below it."""
    rows = content.split("\n")
    last = next((i for i in range(len(rows) - 1, -1, -1) if rows[i].strip()), None)
    if last is None or (cursor_y >= 0 and cursor_y != last):
        return False
    line = rows[last].strip()
    # a pane narrower than the text wraps it: its last row then holds the text's tail
    return text in line or (len(line) >= WRAPPED_TAIL and text.endswith(line))


def read_socket(root: str) -> str:
    """The tmux socket path named in `.swarmforge/tmux-socket`.  Read carefully: a FIFO,
    a device or a link in its place is refused (`safeio.Refused`, an `OSError`), never
    waited on, followed or read past one path's length (docs/protocol.md Part II)."""
    path = os.path.join(root, SOCKET_FILE)
    try:
        data = safeio.read_regular(path, SOCKET_LIMIT)
    except safeio.Refused as refusal:  # say how to get a good one back
        raise type(refusal)(path, f"{refusal.why}; `handoffd init` writes it again") from None
    raw = data.split(b"\n", 1)[0].strip()
    if not raw:
        raise RuntimeError(f"{SOCKET_FILE} is empty")
    # A path is bytes: whatever the file holds is passed on unchanged (tmux says whether
    # it names a socket), never decoded into an exception.
    return os.fsdecode(raw)


Look = tuple["pane.Pane | None", "profiles.Profile | None", panes.Seen]


class Waker:
    """Sends wake-ups on background threads, one per role; `wake` never blocks on tmux.

    A wake-up waits on its role's thread until the pane is idle (docs/protocol.md §14):
    its content unchanged for `idle_after` seconds, or the role marked itself idle since
    it last changed (`idle_mark(role)`: the time of its `H/idle`), or `idle_wait` seconds
    passed (`wake_forced`).  Each read is one tmux call with a timeout, on that role's own
    thread, so waiting for one pane never delays another role, a delivery or `close`.
    """

    def __init__(
        self,
        root: str,
        log: FilteringBoundLogger,
        timeout: float = TMUX_TIMEOUT,
        on_failed: Callable[[str, str], None] | None = None,
        idle_after: float = 0.0,
        idle_wait: float = IDLE_WAIT,
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
        self.panes = pane_states or panes.Panes(idle_after or IDLE_AFTER)
        # (role, harness `up` recorded on its session) -> its harness (docs/protocol.md §16)
        self.harness_of = harness_of or (lambda role, recorded: recorded)
        self._profiles: dict[str, profiles.Profile | None] = {}  # role -> as last read
        self._pending: dict[str, dict[str, str]] = {}  # role -> {text: session}, in order
        self._looks: dict[str, str] = {}  # role -> session: read its pane once, for status
        self._running: set[str] = set()  # roles whose thread is alive
        self._closed = False
        self._closing = threading.Event()  # set by close: a wait for idleness ends at once
        self._cond = threading.Condition()
        self.typist = Typist(log, timeout, self._closing,
                             marks or (lambda role: Marks(self.idle_mark(role), None)))  # fmt: skip

    def wake(self, roles: Iterable[tuple[str, str]], text: str = TEXT) -> None:
        """Ask for one wake-up of each (role, session); coalesces with pending requests."""
        with self._cond:
            for role, session in roles:
                if self._closed:
                    return
                self._pending.setdefault(role, {})[text] = session
                if role not in self._running:
                    self._start(role)

    def waiting(self, role: str) -> bool:
        """Whether a wake-up for `role` was asked for and is not typed yet (its pane is not
        idle yet): a re-notify now would only join it."""
        with self._cond:
            return bool(self._pending.get(role))

    def look(self, roles: Iterable[tuple[str, str]]) -> None:
        """Read each (role, session)'s pane once, on its thread, so its state stays current."""
        with self._cond:
            for role, session in roles:
                if self._closed or not session:
                    continue
                self._looks[role] = session
                if role not in self._running:
                    self._start(role)

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
        for text, where in queued.items():
            self._send(role, where, text, waited, forced)
        return True  # look again: what close() cleared is then gone

    def _await_idle(self, role: str, session: str) -> tuple[float, bool]:
        """Wait until `role`'s pane is idle: the seconds waited, and whether it never was
        (the wake-up is forced).  A known harness is waited on by its own markers."""
        if not session:
            return 0.0, False
        seen = self._read(role, session)
        prof = self._profiles.get(role)
        if prof is not None and seen is not None and seen.pane not in (panes.GONE, panes.UNKNOWN):
            return self._await_harness(role, session)
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

    def _look(self, role: str, session: str) -> Look | None:
        """Read the pane once and record what it shows (for `status`): the pane (None when
        it cannot be read), the profile of its harness, and the role's view; None without
        a socket to read it through."""
        try:
            socket = read_socket(self.root)
        except Exception:  # no socket file, or a bad one: the send logs why
            return None
        try:
            seen: pane.Pane | None = pane.read(socket, session, self.timeout)
        except Exception:  # the session is gone, or there is no server: which one?
            seen = None
        answers = seen is not None or server_answers(socket, self.timeout)
        kind = self.harness_of(role, seen.harness if seen is not None else "")
        prof = self._profiles[role] = profiles.profile(kind)
        content = None if seen is None or seen.dead else seen.content
        verdict = None
        if prof is not None and seen is not None and content is not None:
            verdict = profiles.state(seen.screen, prof)
        view = self.panes.observe(role, session, content, answers, time.time(),
                                  self.idle_mark(role), verdict, kind)  # fmt: skip
        return seen, prof, view

    def _harness_look(
        self, role: str, session: str
    ) -> tuple[pane.Pane, profiles.Profile | None] | None:
        found = self._look(role, session)
        return None if found is None or found[0] is None else (found[0], found[1])

    def _send(
        self, role: str, session: str, text: str, waited: float = 0.0, forced: bool = False
    ) -> None:
        """One wake-up; whatever goes wrong is a `wake_failed` line, never an exception."""
        prof = self._profiles.get(role)
        try:
            if not session:
                raise RuntimeError("no tmux session for this role in roles.tsv")
            socket = read_socket(self.root)
            if prof is None:
                send_keys(socket, session, text, self.timeout)
            else:
                check_line(text)
                self.typist.type(socket, session, prof, text)
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
            typed = {} if prof is None else {"via": "typed", "harness": prof.name}
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
            _tmux(socket, self.timeout, "send-keys", "-t", f"={session}:", "C-m")
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

    def __init__(self, after: float, cap: float = RENOTIFY_CAP) -> None:
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
