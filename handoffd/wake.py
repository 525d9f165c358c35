"""Wake-ups: a short line typed into a recipient's tmux session.  Lossy by design.

The queue on disk is the truth; a wake-up only tells an idle agent to look.  So it
runs off the delivery path, on its own thread, each tmux call with a timeout, and a
failure is logged, never raised.  Requests for a role that is already waiting to be
woken coalesce: one wake-up per role however many files arrived meanwhile.

tmux is called directly rather than through libtmux: a wake-up needs a hard timeout
(a stopped or hung server must not wedge the waker), which libtmux does not offer.
"""

from __future__ import annotations

import os
import subprocess
import threading

from handoffd.config import SWARMFORGE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from structlog.typing import FilteringBoundLogger

TEXT = "You have new handoff mail. If idle, run ready_for_next.sh."
SOCKET_FILE = os.path.join(SWARMFORGE, "tmux-socket")
TMUX_TIMEOUT = 2.0  # seconds for one tmux call
RENOTIFY_CAP = 16 * 60.0


def send_keys(socket: str, session: str, timeout: float = TMUX_TIMEOUT) -> None:
    """Type the wake-up line and Enter into exactly `session`; raises on any failure.

    `=name:` matches the session name exactly (a bare name is a prefix match, so
    `coder` would hit `coder-b`); `-l --` sends the text literally, even if it began
    with `-`.
    """
    target = f"={session}:"
    command = ["tmux", "-S", socket, "send-keys", "-t", target, "-l", "--", TEXT]
    command += [";", "send-keys", "-t", target, "Enter"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise RuntimeError(result.stderr.strip() or f"tmux exited with {result.returncode}")


def read_socket(root: str) -> str:
    """The tmux socket path named in `.swarmforge/tmux-socket`."""
    with open(os.path.join(root, SOCKET_FILE), encoding="utf-8") as file:
        socket = file.readline().strip()
    if not socket:
        raise RuntimeError(f"{SOCKET_FILE} is empty")
    return socket


class Waker:
    """Sends wake-ups on a background thread; `wake` never blocks on tmux."""

    def __init__(self, root: str, log: FilteringBoundLogger, timeout: float = TMUX_TIMEOUT) -> None:
        self.root = root
        self.log = log
        self.timeout = timeout
        self._pending: dict[str, str] = {}  # role -> session, in request order
        self._busy = False
        self._closed = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._loop, name="waker", daemon=True)
        self._thread.start()

    def wake(self, roles: Iterable[tuple[str, str]]) -> None:
        """Ask for one wake-up of each (role, session); coalesces with pending requests."""
        with self._cond:
            self._pending.update(roles)
            self._cond.notify()

    def drain(self, timeout: float) -> bool:
        """Wait until every requested wake-up was attempted; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending and not self._busy, timeout)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._busy = False
                self._cond.notify_all()
                self._cond.wait_for(lambda: self._pending or self._closed)
                if self._closed:
                    return
                batch, self._pending = self._pending, {}
                self._busy = True
            for role, session in batch.items():
                self._send(role, session)

    def _send(self, role: str, session: str) -> None:
        try:
            if not session:
                raise RuntimeError("no tmux session for this role in roles.tsv")
            send_keys(read_socket(self.root), session, self.timeout)
        except subprocess.TimeoutExpired:
            self.log.warning("wake_failed", role=role, error=f"tmux timed out ({self.timeout}s)")
        except (OSError, RuntimeError) as error:
            self.log.warning("wake_failed", role=role, error=str(error))
        else:
            self.log.info("wake", role=role, session=session)


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
