"""The waker's side of a known harness (docs/protocol.md §16): wait on one role's pane
until `keys.Watch` says to type, then type the line and see it taken.

`Waker` (handoffd/wakeups/wake.py) keeps the threads, the queue of lines and the log; for a role
whose harness is Claude Code or Codex it hands the waiting and the typing to a `Typist`,
which reads the pane through the waker's own `read` (so `status` sees every read) and
knows nothing of threads.
"""

from __future__ import annotations

import subprocess
import time

from handoffd.harness import keys, pane
from handoffd.harness.marks import Marks
from handoffd.harness.profiles import Profile, Screen

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading
    from collections.abc import Callable, Collection

    from structlog.typing import FilteringBoundLogger

POLL, POLL_MAX = 0.1, 1.0  # seconds between two reads of a pane waited on (slower as it waits)


class Typist:
    """Waits on and types into known harnesses, for a waker."""

    def __init__(
        self,
        log: FilteringBoundLogger,
        timeout: float,
        closing: threading.Event,
        marks: Callable[[str], Marks],
        on_held: Callable[[str, str, Profile], None] | None = None,
    ) -> None:
        self.log = log
        self.timeout = timeout
        self.closing = closing
        self.marks = marks
        # (role, session, profile): a wait found a person's text in the box, once a wait
        self.on_held = on_held or (lambda role, session, prof: None)

    def wait(
        self,
        role: str,
        session: str,
        look: Callable[[], tuple[pane.Pane, Profile | None, str] | None],
        idle_wait: float,
        wanted: Callable[[], bool],
    ) -> tuple[float, bool, bool]:
        """Wait until the line may be typed: (seconds waited, forced, cancelled).  `look`
        reads the pane, with the role's harness profile (None: it cannot be read, and the
        send will say why) and the pane's state (`profiles.state`); `wanted` says
        whether a line is still asked for (an announcement takes the mail line away)."""
        started = time.time()
        watch, held = keys.Watch(started, idle_wait), False
        while not self.closing.is_set():
            found = look()
            seen, prof, state = found if found is not None else (None, None, "")
            if seen is None or seen.dead or prof is None or not wanted():
                return watch.waited(time.time()), False, not wanted()
            marks, now = self.marks(role), time.time()
            announced = marks.announced is not None and marks.announced >= started
            hooked = marks.hooked(seen.created)
            decision = watch.see(state, now, hooked, marks.idle, announced, prof.tells)
            if decision == keys.HELD and not held:
                held = True
                self.on_held(role, session, prof)
            if decision == keys.CANCEL:
                return watch.waited(now), False, True
            if decision == keys.FORCED:
                self.log.info("wake_forced", role=role, session=session, reason=watch.reason,
                              waited=round(now - started, 1))  # fmt: skip
                return watch.waited(now), True, False
            if decision == keys.TYPE:
                return watch.waited(now), False, False
            self.closing.wait(min(POLL_MAX, max(POLL, (now - started) / 20)))
        return watch.waited(time.time()), False, False

    def type(self, socket: str, session: str, prof: Profile, text: str,
             ours: Collection[str] = ()) -> None:  # fmt: skip
        """Type `text`; a box holding another of `ours` (handoffd's lines) is emptied first,
        one holding a person's text raises `keys.BoxHeld` before any key."""
        keys.type_line(self._sender(socket, session), lambda: self._screen(socket, session),
                       prof, text, ours)  # fmt: skip

    def taken(self, role: str, socket: str, session: str, prof: Profile, text: str) -> bool:
        """Whether the harness took the line typed (docs/protocol.md §16): `wake_unsubmitted`
        when even the one more Enter left it in the box (which is then emptied).  Raises
        `DeadPane` when the pane's program has exited."""
        try:
            took, cleared = keys.submitted(lambda: self._screen(socket, session),
                                           self._sender(socket, session), prof, text)  # fmt: skip
        except DeadPane:
            raise
        except Exception as error:  # cannot tell: say so, never count it as submitted
            self.log.warning("wake_unchecked", role=role, error=str(error) or repr(error))
            return False
        if not took:
            self.log.warning("wake_unsubmitted", role=role, session=session, cleared=cleared)
        return took

    def _screen(self, socket: str, session: str) -> Screen:
        seen = pane.read(socket, session, self.timeout)
        if seen.dead:
            raise DeadPane(f"the program in {session}'s pane has exited")
        return seen.screen

    def _sender(self, socket: str, session: str) -> Callable[..., None]:
        target = f"={session}:"

        def send(*keys_: str) -> None:
            command = ["tmux", "-S", socket, "send-keys", "-t", target, *keys_]
            result = subprocess.run(command, capture_output=True, text=True,
                                    timeout=self.timeout, check=False)  # fmt: skip
            if result.returncode != 0:
                raise RuntimeError(result.stderr.strip() or f"tmux exited {result.returncode}")

        return send


class DeadPane(RuntimeError):
    """The pane's program has exited: tmux takes keys for it and drops them."""
