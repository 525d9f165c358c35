"""What a turn of Claude Code or Codex spent, read from the harness's own records at the end
of the turn (docs/protocol.md §19, "Tokens"), and added to the role's `H/usage.jsonl`.

- Claude Code's transcript (its Stop hook's `transcript_path`) is JSON lines; an
  assistant message carries `usage`, and a message of several content blocks is written
  as several lines with one `message.id` and the same usage: each id counts once.
- Codex's session record (`$CODEX_HOME`, else `~/.codex`, `sessions/YYYY/MM/DD/
  rollout-<time>-<thread id>.jsonl`) holds `token_count` events with the session's running
  totals: a turn spent the difference from the totals read at the previous turn's end.

Only what is new is read: `H/usage.offset` remembers the file, how far it was read, and
(Claude Code) the last message ids counted or (Codex) the totals.  A read is bounded in
bytes (`READ_CAP`, the rest is read at the next turn) and in time (it stops at the
caller's deadline with what it has).  The records are the harness's, the path comes from
the hook's input: each is opened the careful way (no link followed, no FIFO waited on),
and a line that does not hold what it should is skipped.  A record that cannot be read
adds nothing and says nothing: the hook goes on.
"""

from __future__ import annotations

import os
import time

from handoffd.core import durable, quickjson, safeio, tokens, usage
from handoffd.core import handoff as hf
from handoffd.core.config import Box, Role
from handoffd.core.tokens import Spend

OFFSET = "usage.offset"  # H/usage.offset
OFFSET_LIMIT = 64 * 1024
READ_CAP = 16 * 1024 * 1024  # bytes of a record read at one turn's end
CHUNK = 1024 * 1024
LAST_MESSAGE_WAIT = 0.5  # seconds the turn's last message may lag its Stop hook (of the 1 s)
IDS_KEPT = 512  # message ids remembered: a message rewritten later is not counted again
ID_LIMIT = 200
CLAUDE_USAGE = ("input_tokens", "output_tokens", "cache_read_input_tokens",
                "cache_creation_input_tokens")  # fmt: skip
CODEX_USAGE = ("input_tokens", "output_tokens", "cached_input_tokens",
               "cache_write_input_tokens")  # fmt: skip
DAYS_SEARCHED = 62  # day folders of Codex's sessions looked through for a new thread
_THREAD_CHARS = frozenset("0123456789abcdefABCDEF-")


class State:
    """`H/usage.offset`: which record was read (its path and identity), how far, and what
    a further read must not count again."""

    __slots__ = ("dev", "harness", "ids", "ino", "offset", "source", "thread", "totals")

    def __init__(self, harness: str, source: str, dev: int = 0, ino: int = 0, offset: int = 0,
                 ids: list[str] | None = None, thread: str = "",
                 totals: tuple[int, int, int, int] = (0, 0, 0, 0)) -> None:  # fmt: skip
        self.harness, self.source, self.dev, self.ino = harness, source, dev, ino
        self.offset = offset
        self.ids = ids or []
        self.thread = thread
        self.totals = totals

    def same_file(self, info: os.stat_result, source: str) -> bool:
        return (self.source == source and (self.dev, self.ino) == (info.st_dev, info.st_ino)
                and self.offset <= info.st_size)  # fmt: skip

    def encode(self) -> bytes:
        ids = ", ".join(quickjson.quote(one) for one in self.ids)
        return (f'{{"harness": {quickjson.quote(self.harness)}, '
                f'"source": {quickjson.quote(self.source)}, "dev": {self.dev}, '
                f'"ino": {self.ino}, "offset": {self.offset}, '
                f'"thread": {quickjson.quote(self.thread)}, '
                f'"totals": [{", ".join(map(str, self.totals))}], '
                f'"ids": [{ids}]}}\n').encode()  # fmt: skip


def load_state(handoffs: str) -> State | None:
    """What the last turn's read left, or None (never read, or nothing usable there)."""
    try:
        data = quickjson.loads(
            safeio.read_regular(os.path.join(handoffs, OFFSET), OFFSET_LIMIT).decode("utf-8")
        )
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    dev, ino, offset = (data.get(key) for key in ("dev", "ino", "offset"))
    harness, source, thread = (data.get(key) for key in ("harness", "source", "thread"))
    totals = tokens.counts(data.get("totals") or ())
    ids = data.get("ids")
    if not (type(dev) is int and type(ino) is int and type(offset) is int and offset >= 0):
        return None
    if not (isinstance(harness, str) and isinstance(source, str) and isinstance(thread, str)):
        return None
    if totals is None or not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        return None
    return State(harness, source, dev, ino, offset, ids[-IDS_KEPT:], thread, totals)


def save_state(handoffs: str, state: State, before: State | None) -> None:
    """Keep how far the record was read, when that changed.  Replaced atomically but not
    fsynced: it is read again at the next turn's end, and `H/usage.jsonl` (fsynced) is
    the record; a state lost to a power cut costs a turn read twice at worst."""
    data = state.encode()
    if before is None or before.encode() != data:
        durable.replace(os.path.join(handoffs, OFFSET), data, sync=False)


# --- reading only what is new -----------------------------------------------------------


def _new_lines(fd: int, start: int, deadline: float) -> tuple[list[bytes], int]:
    """The whole lines from byte `start` on (at most READ_CAP bytes, and only until
    `deadline`), and the offset after the last of them.  A line longer than the cap is
    passed over (no record of ours is that long)."""
    os.lseek(fd, start, os.SEEK_SET)
    chunks: list[bytes] = []
    size = 0
    while size < READ_CAP and time.monotonic() < deadline:
        chunk = os.read(fd, min(CHUNK, READ_CAP - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    data = b"".join(chunks)
    end = data.rfind(b"\n") + 1
    if end == 0 and size >= READ_CAP:
        return [], start + size  # one endless line: skipped, its rest is no whole line
    return data[:end].split(b"\n")[:-1], start + end


def _open_record(path: str) -> tuple[int, os.stat_result]:
    """A descriptor on the regular file at `path` (no link, no FIFO) and its identity."""
    fd = safeio.open_regular(path)
    try:
        return fd, os.fstat(fd)
    except OSError:
        os.close(fd)
        raise


# --- Claude Code ------------------------------------------------------------------------


def claude_turn(
    transcript: str, state: State | None, deadline: float
) -> tuple[tuple[int, int, int, int], State]:
    """The tokens of the assistant messages written to `transcript` since the last read,
    each message once, and the state to keep."""
    fd, info = _open_record(transcript)
    found: dict[str, tuple[int, int, int, int]] = {}
    try:
        same = state is not None and state.harness == "claude" and state.same_file(info, transcript)
        end = state.offset if same and state is not None else 0
        # Claude Code may run the Stop hook before it has written the turn's last message:
        # while the newest message read stopped for a tool, read on for a moment
        last_wait = min(deadline, time.monotonic() + LAST_MESSAGE_WAIT)
        while True:
            lines, end = _new_lines(fd, end, deadline)
            ended = _read_messages(lines, found)
            if ended is not False or time.monotonic() >= last_wait:
                break
            time.sleep(0.01)
    finally:
        os.close(fd)
    seen = list(state.ids) if state is not None else []
    known = set(seen)
    total = [0, 0, 0, 0]
    for ident, counts in found.items():
        if ident in known:
            continue
        seen.append(ident)
        total = [a + b for a, b in zip(total, counts, strict=True)]
    kept = State("claude", transcript, info.st_dev, info.st_ino, end, seen[-IDS_KEPT:])
    return (total[0], total[1], total[2], total[3]), kept


def _read_messages(lines: list[bytes], found: dict[str, tuple[int, int, int, int]]) -> bool | None:
    """Add each assistant message of `lines` to `found` (a later line of the same message
    wins); whether the newest one ended the turn (None: none was read)."""
    ended = None
    for line in lines:
        message = _assistant(line)
        if message is not None:
            found[message[0]] = message[1]
            ended = b'"stop_reason":"tool_use"' not in line.replace(b" ", b"")
    return ended


def _assistant(line: bytes) -> tuple[str, tuple[int, int, int, int]] | None:
    """(message id, its usage) of a transcript line that is an assistant message with
    usage; None for any other line, or one whose numbers are not token counts."""
    if b'"assistant"' not in line or b'"usage"' not in line:
        return None
    try:
        data = quickjson.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("type") != "assistant":
        return None
    message = data.get("message")
    if not isinstance(message, dict):
        return None
    ident, spent = message.get("id"), message.get("usage")
    if not isinstance(ident, str) or not 0 < len(ident) <= ID_LIMIT or not isinstance(spent, dict):
        return None
    counts = tokens.counts(spent.get(key, 0) for key in CLAUDE_USAGE)
    return None if counts is None else (ident, counts)


# --- Codex ------------------------------------------------------------------------------


def codex_home() -> str:
    """Where Codex keeps its records: `$CODEX_HOME`, else `~/.codex` (the notify program
    runs in Codex's own environment)."""
    return os.environ.get("CODEX_HOME") or os.path.join(os.path.expanduser("~"), ".codex")


def find_rollout(home: str, thread: str, deadline: float) -> str | None:
    """The session record of Codex thread `thread`: the newest day folders first."""
    suffix = f"-{thread}.jsonl"
    sessions = os.path.join(home, "sessions")
    looked = 0
    for year in _folders(sessions):
        for month in _folders(year):
            for day in _folders(month):
                looked += 1
                if looked > DAYS_SEARCHED or time.monotonic() > deadline:
                    return None
                for name in _names(day):
                    if name.startswith("rollout-") and name.endswith(suffix):
                        return os.path.join(day, name)
    return None


def _names(folder: str) -> list[str]:
    try:
        return sorted(os.listdir(folder), reverse=True)
    except OSError:
        return []


def _folders(folder: str) -> list[str]:
    return [os.path.join(folder, name) for name in _names(folder) if name.isdigit()]


def codex_turn(
    thread: str, state: State | None, deadline: float, home: str | None = None
) -> tuple[tuple[int, int, int, int], State] | None:
    """The tokens Codex thread `thread` spent since the last read (the newest running
    totals less those read then), and the state to keep; None when Codex keeps no record
    of the thread (its title request, a release that writes none)."""
    same_thread = state is not None and state.harness == "codex" and state.thread == thread
    rollout = state.source if same_thread and state is not None else None
    if rollout is None or not os.path.lexists(rollout):
        rollout = find_rollout(home or codex_home(), thread, deadline)
    if rollout is None:
        return None
    fd, info = _open_record(rollout)
    try:
        same = same_thread and state is not None and state.same_file(info, rollout)
        lines, end = _new_lines(fd, state.offset if same and state is not None else 0, deadline)
    finally:
        os.close(fd)
    before = state.totals if same_thread and state is not None else (0, 0, 0, 0)
    newest = before
    for line in reversed(lines):
        totals = _token_totals(line)
        if totals is not None:
            newest = totals
            break
    spent = tuple(max(0, now - then) for now, then in zip(newest, before, strict=True))
    kept = State("codex", rollout, info.st_dev, info.st_ino, end, thread=thread, totals=newest)
    return (spent[0], spent[1], spent[2], spent[3]), kept


def _token_totals(line: bytes) -> tuple[int, int, int, int] | None:
    """(fresh input, output, cache read, cache write) of a `token_count` event's running
    totals; None for any other line.  Codex counts cached input inside `input_tokens`."""
    if b'"token_count"' not in line:
        return None
    try:
        data = quickjson.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    payload = data.get("payload") if isinstance(data, dict) else None
    if not isinstance(payload, dict) or payload.get("type") != "token_count":
        return None
    info = payload.get("info")
    total = info.get("total_token_usage") if isinstance(info, dict) else None
    given = (
        tokens.counts(total.get(key, 0) for key in CODEX_USAGE) if isinstance(total, dict) else None
    )
    if given is None:
        return None
    fresh, output, cached, written = given
    return max(0, fresh - cached), output, cached, written


# --- the turn's record ------------------------------------------------------------------


def card_in_process(role: Role) -> str | None:
    """The card the role holds at the end of its turn: `<id>@<role>`, `<id>@<pool>` for a
    copy it claimed from its pool (docs/protocol.md §17); a batch's first file; None."""
    for entry in sorted(hf.visible(role.path(Box.IN_PROCESS)), key=lambda e: e.name):
        name, folder = entry.name, role.path(Box.IN_PROCESS)
        if entry.is_dir(follow_symlinks=False) and name.startswith("batch_"):
            inside = sorted(e.name for e in hf.visible(entry.path) if hf.is_item(e.name))
            if not inside:
                continue
            folder, name = entry.path, inside[0]
        elif not hf.is_item_entry(entry):
            continue
        return f"{hf.file_id(name)}@{_holder(role, os.path.join(folder, name))}"
    return None


def _holder(role: Role, path: str) -> str:
    if not role.pool or role.is_pool:
        return role.name
    try:
        claimed = hf.read_headers(path).get("claimed_by")
    except OSError:
        return role.name
    return role.pool if claimed == role.name else role.name


def record_turn(role: Role, data: dict[str, object], deadline: float,
                now: float | None = None) -> Spend | None:  # fmt: skip
    """Read what the turn the hook's input `data` ends spent, append it to `H/usage.jsonl`
    and keep how far was read; the record, or None when nothing was read (no record of
    the harness's, unreadable, or nothing spent)."""
    state = load_state(role.handoffs)
    transcript, thread = data.get("transcript_path"), data.get("thread-id")
    read: tuple[tuple[int, int, int, int], State] | None
    if isinstance(transcript, str) and os.path.isabs(transcript):
        harness, read = "claude", claude_turn(transcript, state, deadline)
    elif data.get("type") == "agent-turn-complete" and _thread(thread):
        harness, read = "codex", codex_turn(str(thread), state, deadline)
    else:
        return None
    if read is None:
        return None
    counts, kept = read
    spend = None
    if any(counts):
        at = time.time() if now is None else now
        spend = Spend(at, card_in_process(role), harness, counts)
        usage.append(role.handoffs, spend, at)
    save_state(role.handoffs, kept, state)
    return spend


def _thread(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 64 and set(value) <= _THREAD_CHARS
