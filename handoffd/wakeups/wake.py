"""Wake-ups: a short line typed into a role's tmux session.  Lossy by design.

The queue on disk is the truth; a wake-up only tells an idle agent to look.  So it
runs off the delivery path, on a thread per role (a hung tmux for one role never
delays another), each tmux call with a timeout, and any failure is logged, never
raised.  Requests for a role that is already waiting to be woken coalesce.

tmux is called directly rather than through libtmux: a wake-up needs a hard timeout
(a stopped or hung server must not wedge the waker), which libtmux does not offer.

This module holds the lines handoffd types and the direct tmux calls: `send_keys`, which
a command's wake-up makes, and `capture`, the waker's look at a pane.  The daemon's
waker, which waits for an idle pane and types through each harness's profile, is
`handoffd.wakeups.waker`.
"""

from __future__ import annotations

import os
import subprocess
import time

from handoffd.core import safeio
from handoffd.core.config import SWARMFORGE

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


def told_already(text: str, asked_at: float, woken_at: float | None) -> bool:
    """Whether a request for the mail line (`up`'s) was answered before it was taken: the
    daemon's own wake-up was typed since it was asked, so typing it too would wake the
    agent twice for the same mail.  Other lines (an answer's) say something new."""
    return text == TEXT and woken_at is not None and woken_at >= asked_at


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
    from handoffd.core.terminal import has_control

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
    run_tmux(socket, timeout, "send-keys", "-t", target, "-l", "--", text)
    time.sleep(BEFORE_RETURN)
    run_tmux(socket, timeout, "send-keys", "-t", target, "C-m")
    time.sleep(BEFORE_LINE_FEED)
    run_tmux(socket, timeout, "send-keys", "-t", target, "C-j")


def refusal(text: str) -> bool:
    """Whether `text` is the line telling a sender its handoff was refused (the log's
    `refused`): not the mail line, and not a line a command asked for (an answer's)."""
    return text.startswith(REFUSED.partition("{")[0])


def run_tmux(socket: str, timeout: float, *args: str) -> None:
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
