"""A role's record of what its agent spent: `H/usage.jsonl` (docs/protocol.md §19, "Tokens").

One JSON object a line, appended by the role's Stop hook (or Codex's notify program) at
the end of each turn: `{"at", "card", "harness", "input", "output", "cache_read",
"cache_write"}`, and `"turns"` on a line that carries several turns over a rotation.

The file is written by the agent's own process, so it is read as untrusted: through the
careful reader (never a link or a FIFO, never more than `READ_LIMIT` bytes), each line
checked field by field (`tokens.count`), a bad line skipped.  It is kept bounded: an
append that would take it past `ROTATE_AT` first rewrites it shorter (`compact`): the
turns of the last day stay as they are, older ones are carried as one line per card and
harness, so every total stays what it was.

Which budgets hold a role is decided here too (`holds`), over the budgets of the project's
stored configuration — read only when it names a budget at all, the one cheap look a
helper of a project without budgets pays (`config.budget_text`).
"""

from __future__ import annotations

import os

from handoffd.core import durable, quickjson, safeio, tokens
from handoffd.core import handoff as hf
from handoffd.core.tokens import KINDS, Spend

TYPE_CHECKING = False  # helpers import this module where a budget is set
if TYPE_CHECKING:
    from collections.abc import Iterable

    from handoffd.core.config import Role

FILE = "usage.jsonl"  # H/usage.jsonl
ROTATE_AT = 1024 * 1024  # bytes: an append that would pass this rewrites the file first
READ_LIMIT = ROTATE_AT + 64 * 1024  # never read more of it (what lies past is not read)
LINE_LIMIT = 4096  # bytes of one record: a longer line is skipped
KEEP = 86400.0  # seconds of turns a rotation keeps one by one: the longest budget window
HARNESS_LIMIT = 32  # characters of a harness's name
CARD_LIMIT = 512  # characters of a card's name (an id of at most 255, `@`, a role)


# --- one line -------------------------------------------------------------------------


def parse_line(line: bytes) -> Spend | None:
    """The record one line holds, or None for a line that is not one (not JSON, a field
    missing or of the wrong type, a count out of range, a time that is no §2 time)."""
    if len(line) > LINE_LIMIT:
        return None
    try:
        data = quickjson.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    at = hf.epoch(data.get("at")) if isinstance(data.get("at"), str) else None
    card, harness = data.get("card"), data.get("harness")
    counts = tokens.counts(data.get(kind) for kind in KINDS)
    turns = tokens.count(data.get("turns", 1))
    if at is None or not (card is None or _name(card, CARD_LIMIT)) or not _name(harness):
        return None
    if counts is None or turns is None:
        return None
    return Spend(at, card, str(harness), counts, turns)


def _name(value: object, limit: int = HARNESS_LIMIT) -> bool:
    return isinstance(value, str) and 0 < len(value) <= limit and value.isprintable()


def encode(spend: Spend) -> bytes:
    """The line of a record (without `turns` when it is one turn)."""
    card = "null" if spend.card is None else quickjson.quote(spend.card)
    counts = [f'"{kind}": {value}' for kind, value in zip(KINDS, spend.counts, strict=True)]
    fields = [f'"at": "{hf.iso_now(spend.at)}"', f'"card": {card}',
              f'"harness": {quickjson.quote(spend.harness)}', *counts]  # fmt: skip
    if spend.turns != 1:
        fields.append(f'"turns": {spend.turns}')
    return ("{" + ", ".join(fields) + "}\n").encode()


# --- the file ---------------------------------------------------------------------------


def path(handoffs: str) -> str:
    return os.path.join(handoffs, FILE)


def read(handoffs: str) -> list[Spend]:
    """The records of a role's file, oldest first; none when there is no file, or only
    something else (a link, a FIFO, a folder) where it should be."""
    try:
        fd = safeio.open_regular(path(handoffs))
    except OSError:
        return []
    try:
        data = safeio.read_fd(fd, READ_LIMIT)
    except OSError:
        return []
    finally:
        os.close(fd)
    return records(data)


def records(data: bytes) -> list[Spend]:
    """The records among the lines of `data` (a last line without its newline is a write
    still under way, or cut by the read limit: not counted)."""
    lines = data.split(b"\n")[:-1]
    return [spend for line in lines if (spend := parse_line(line)) is not None]


def append(handoffs: str, spend: Spend, now: float) -> None:
    """Add one record to the role's file, rotating it first when it would grow past
    `ROTATE_AT`.  Never written through a link: a hard link is moved aside, a symlink or
    FIFO in its place is replaced by a file of our own; `H` itself behind a link is refused."""
    linked = safeio.linked_handoffs(handoffs)
    if linked:
        raise safeio.Refused(linked, "a symbolic link, not a folder; handoffd never follows it")
    target, line = path(handoffs), encode(spend)
    try:
        fd, _ = durable.open_own(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    except safeio.NotRegular:
        durable.unlink_quietly(target)  # not ours (a link, a FIFO): a file of our own instead
        fd, _ = durable.open_own(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL)
    try:
        if os.fstat(fd).st_size + len(line) > ROTATE_AT:
            kept = compact([*read(handoffs), spend], now, ROTATE_AT // 2)
            durable.replace(target, b"".join(encode(one) for one in kept))
            return
        durable.write_all(fd, line)
        os.fdatasync(fd)
    finally:
        os.close(fd)


def compact(spent: list[Spend], now: float, limit: int) -> list[Spend]:
    """The records of a rotated file: the same totals in fewer lines.  The last `KEEP`
    seconds stay turn by turn (a budget's window reads them); older turns become one line
    per card and harness, dated at their latest turn.  Should that still pass `limit`
    bytes, every turn is carried so, and then the oldest cards are carried together under
    no card — the role's totals are kept whatever is given up."""
    old = [one for one in spent if one.at < now - KEEP]
    recent = [one for one in spent if one.at >= now - KEEP]
    kept = _carried(old, by_card=True) + recent
    if _size(kept) > limit:
        kept = _carried(spent, by_card=True)
    if _size(kept) > limit:
        kept = _carried(spent, by_card=False)
    return sorted(kept, key=lambda one: one.at)


def _carried(spent: list[Spend], by_card: bool) -> list[Spend]:
    groups: dict[tuple[str | None, str], list[Spend]] = {}
    for one in spent:
        groups.setdefault((one.card if by_card else None, one.harness), []).append(one)
    carried = []
    for (card, harness), ones in groups.items():
        total = tokens.summed(ones)
        counts = (total.input, total.output, total.cache_read, total.cache_write)
        carried.append(Spend(max(one.at for one in ones), card, harness, counts, total.turns))
    return carried


def _size(spent: list[Spend]) -> int:
    return sum(len(encode(one)) for one in spent)


def read_roles(roles: Iterable[Role]) -> dict[str, list[Spend]]:
    """Every role's records (a pool's own row keeps none), by role: what `tokens.tally`
    adds up for every view."""
    return {role.name: read(role.handoffs) for role in roles if not role.is_pool}


# --- budgets ----------------------------------------------------------------------------


def holds(
    budgets: dict[str, tokens.Budget], role: Role, roles: dict[str, Role], now: float
) -> tokens.Spent | None:
    """The budget that holds `role` now, if any, of `budgets` (the stored configuration's,
    `config.budget_text`): its own, or its pool's, which counts all its members' spending;
    the one that holds it longest."""
    found = []
    for name in (role.name, role.pool):
        budget = budgets.get(name) if name else None
        if budget is not None:
            found.append(tokens.spent(budget, _spending(name, roles), now))
    return tokens.most_spent(found)


def _spending(name: str, roles: dict[str, Role]) -> list[Spend]:
    """The records a budget on `name` counts: a pool's are all its members'."""
    row = roles.get(name)
    if row is None:
        return []
    if not row.is_pool:
        return read(row.handoffs)
    return [one for r in roles.values() if r.pool == name and not r.is_pool
            for one in read(r.handoffs)]  # fmt: skip
