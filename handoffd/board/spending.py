"""What the board shows of tokens and budgets (docs/protocol.md §19): each card's tokens,
each role's (a pool's: its members' together) and whether a budget holds it.  Pure over
the snapshot, which has read the records (`Snapshot.spending`, `Snapshot.budgets`)."""

from __future__ import annotations

from handoffd.board import colour
from handoffd.core import tokens
from handoffd.core.tokens import Spent, Tally, Totals
from handoffd.queue.scan import State
from handoffd.snapshot.snapshot import Snapshot

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Protocol

    class Named(Protocol):
        """What `dress` reads and sets of a card (`board.cards.Card` is one)."""

        card: str
        role: str
        state: str
        colour: str
        detail: str
        tokens: Totals


HELD = "held: budget spent"  # a waiting card's detail while its role's budget is spent


def tally(snapshot: Snapshot) -> Tally:
    """Every record of the project added up (the one tally every view shares)."""
    return tokens.tally(snapshot.spending())


def held(snapshot: Snapshot, now: float) -> dict[str, Spent]:
    """Each role (and pool) a spent budget holds now, with what it used.  A pool's members
    are held by its budget; the pool too, as the role its waiting cards belong to."""
    budgets = snapshot.budgets()
    if not budgets:
        return {}
    found = {}
    for name, role in snapshot.roles.items():
        budget = budgets.get(name) if role.is_pool else None
        if role.is_pool:
            spent = None if budget is None else tokens.spent(budget, _members(snapshot, name), now)
        else:
            spent = _holds(snapshot, name, now)
        if spent is not None:
            found[name] = spent
    return found


def dress(cards: Iterable[Named], snapshot: Snapshot, now: float) -> None:
    """Give every card its tokens, and a waiting card of a held role the detail `held:
    budget spent` (its colour stays: nothing is wrong with the card)."""
    found = tally(snapshot) if any(snapshot.spending().values()) else None
    stopped = held(snapshot, now)
    for card in cards:
        card.tokens = found.card(card.card) if found is not None else Totals()
        if card.role in stopped and card.state == State.NEW and card.colour == colour.ORANGE:
            card.detail = HELD


def _holds(snapshot: Snapshot, name: str, now: float) -> Spent | None:
    role = snapshot.roles[name]
    spending = snapshot.spending()
    found = []
    for who in (name, role.pool):
        budget = snapshot.budgets().get(who) if who else None
        if budget is not None:
            records = spending.get(who, []) if who == name else _members(snapshot, who)
            found.append(tokens.spent(budget, records, now))
    return tokens.most_spent(found)


def _members(snapshot: Snapshot, pool: str) -> list[tokens.Spend]:
    spending = snapshot.spending()
    team = [name for name, role in snapshot.roles.items() if role.pool == pool != name]
    return [one for name in team for one in spending.get(name, [])]


def role_tokens(snapshot: Snapshot, found: Tally, name: str) -> Totals:
    """A role's tokens; a pool's are its members' together."""
    role = snapshot.roles[name]
    if not role.is_pool:
        return found.role(name)
    return found.team(n for n, r in snapshot.roles.items() if r.pool == name != n)


def budget_json(snapshot: Snapshot, name: str, spent: Spent | None) -> dict[str, object] | None:
    """A role's budget as `status --roles --json` gives it (None: it has none): the budget,
    and while it is spent what was used and when work resumes."""
    role = snapshot.roles[name]
    budget = snapshot.budgets().get(name) or (
        snapshot.budgets().get(role.pool) if role.pool else None
    )
    if budget is None and spent is None:
        return None
    if spent is not None:
        budget = spent.budget
    assert budget is not None
    from handoffd.core import handoff as hf

    return {
        "who": budget.who,
        "tokens": budget.tokens,
        "per": budget.window,
        "spent": spent is not None,
        "used": spent.used if spent else None,
        "resumes_at": hf.iso_seconds(spent.resumes_s) if spent else None,
    }


def budget_remaining(snapshot: Snapshot, now: float) -> dict[str, int]:
    """`handoffd_tokens_budget_remaining{role}`: for each role (and pool) with a budget of
    its own, the tokens it may still spend over its window now (0 while spent)."""
    budgets = snapshot.budgets()
    left = {}
    for name, budget in budgets.items():
        if name not in snapshot.roles:
            continue
        role = snapshot.roles[name]
        records = _members(snapshot, name) if role.is_pool else snapshot.spending().get(name, [])
        left[name] = max(0, budget.tokens - tokens.used(budget, records, now))
    return left


def unreported(snapshot: Snapshot, harness_of: dict[str, str]) -> dict[str, str]:
    """The roles (role -> harness) whose agent ended turns (its Stop hook or notify ran:
    `H/idle`) but whose harness left no record of tokens: `stats` says `tokens: not
    reported by <harness>` for them.  `harness_of`: each role's harness, as `status` has it."""
    spending = snapshot.spending()
    return {
        name: harness
        for name, harness in harness_of.items()
        if harness in ("claude", "codex") and snapshot.idle_at.get(name) is not None
        and not spending.get(name)
    }  # fmt: skip
