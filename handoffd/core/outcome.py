"""What an operation returns, and the contract's exit codes by name.

Operations (taking work, reporting, answering…) return a `Result` instead of printing and
exiting from deep inside, so the console scripts, the click commands, the MCP tools and
the web forms are each a thin adapter that renders the same result.  A state an operation
will not act on is a `Refusal`, raised from wherever it is found and turned into a result
in one place.  Helpers import this module, so it uses nothing at all.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import NoReturn


class Exit:
    """The exit codes of docs/protocol.md §3, §4, §8, by name."""

    OK = 0
    FAILED = 1  # nothing to act on (`NO_CURRENT_TASK`), or no project or role to act for
    REFUSED = 2  # the input or the queue's state is refused; nothing was changed
    BUSY = 2  # the role's inbox is locked by another process past the wait (`INBOX_BUSY`)


# The refusal of a command that found a role's inbox lock held for longer than it waits
# (docs/protocol.md §15, Part III); the web board answers it 503.
INBOX_BUSY = "INBOX_BUSY"
BUSY_MESSAGE = INBOX_BUSY + ": {role}'s inbox is locked by another process; try again"
# The same for the lock a send takes to number its handoff (`swarm_handoff`, §3): nothing
# was queued, and the draft is kept.
OUTBOX_BUSY = "OUTBOX_BUSY"
OUTBOX_BUSY_MESSAGE = (
    OUTBOX_BUSY + ": {folder} is locked by another process; nothing was queued; try again"
)


class Result:
    """A finished operation: `code` is the process exit code the contract names, `out` and
    `err` the text a command prints, `data` the structure its `--json` prints (or None)."""

    __slots__ = ("code", "data", "err", "out")

    def __init__(self, code: int = Exit.OK, out: str = "", err: str = "", data: object = None):
        self.code = code
        self.out = out
        self.err = err
        self.data = data

    @property
    def ok(self) -> bool:
        return self.code == Exit.OK

    # the older names, which the operations' tests and a few adapters still read
    @property
    def stdout(self) -> str:
        return self.out

    @property
    def stderr(self) -> str:
        return self.err

    def __repr__(self) -> str:
        return f"Result({self.code}, out={self.out!r}, err={self.err!r})"


class Refusal(Exception):
    """A state the operation will not act on: its token line, the paths involved, its code."""

    def __init__(self, code: int, message: str, paths: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.paths = list(paths)

    def render(self) -> str:
        return "".join(f"{line}\n" for line in [self.message, *(f"- {p}" for p in self.paths)])

    def result(self, out: str = "") -> Result:
        """The refusal as a result; `out` is what was done (and printed) before it."""
        return Result(self.code, out, self.render())


def refused(message: str, code: int = Exit.REFUSED) -> Result:
    """A one-line refusal, as every adapter prints it."""
    return Result(code, "", message.rstrip("\n") + "\n")


def failure(error: Refusal | OSError) -> Result:
    """A refusal or an I/O error raised below an operation, as its result: the one place
    either becomes one."""
    if isinstance(error, Refusal):
        return error.result()
    return Result(Exit.FAILED, "", f"I/O error: {error}\n")


def emit(result: Result) -> NoReturn:
    """Print a result the way every command and helper does, then exit with its code: the
    one way out of a process, for the console scripts and the click commands alike."""
    import sys  # built in, and loaded before any helper runs

    # surrogateescape: a file name that is not UTF-8 prints as its bytes, not a traceback
    sys.stdout.buffer.write(result.out.encode("utf-8", "surrogateescape"))
    sys.stdout.flush()
    sys.stderr.write(result.err)
    raise SystemExit(result.code)
