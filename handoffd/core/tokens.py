"""What the agents spent, added up, and whether a role may spend more (docs/protocol.md §19,
"Tokens" and "Budgets").  Pure: records in, totals and decisions out; the files they come
from are `handoffd.core.usage`'s.

One function adds up every view's numbers (`tally`): the card page, `status --json`,
`handoffd stats` and `handoffd_tokens_total` all call it over the same records, so they
cannot disagree.  A budget counts what a provider bills as fresh work: input, output and
cache writes; reading the cache is not counted.

Imported by a helper only where the project sets a budget: standard library only.
"""

from __future__ import annotations

TYPE_CHECKING = False  # helpers may import this module: no `typing` at run time
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

KINDS = ("input", "output", "cache_read", "cache_write")
BUDGETED = ("input", "output", "cache_write")  # what a budget counts
WINDOWS = {"hour": 60 * 60, "day": 24 * 60 * 60}  # seconds a budget counts back
MOST = 10**12  # tokens of one kind in one record: any more is no turn a harness wrote
BUDGET_SHAPE = "'budget <role|pool> <tokens> per <hour|day>'"


class Spend:
    """One record of `H/usage.jsonl`: what a turn (or, carried over a rotation, several
    turns of one card) spent, when, on which card (None: none in process), in which harness."""

    __slots__ = ("at", "cache_read", "cache_write", "card", "harness", "input", "output", "turns")

    def __init__(
        self,
        at: float,
        card: str | None,
        harness: str,
        counts: tuple[int, int, int, int],
        turns: int = 1,
    ) -> None:
        self.at = at
        self.card = card
        self.harness = harness
        self.input, self.output, self.cache_read, self.cache_write = counts
        self.turns = turns

    @property
    def counts(self) -> tuple[int, int, int, int]:
        return (self.input, self.output, self.cache_read, self.cache_write)

    @property
    def budgeted(self) -> int:
        return self.input + self.output + self.cache_write

    def __repr__(self) -> str:
        return f"Spend({self.at}, {self.card!r}, {self.harness!r}, {self.counts}, {self.turns})"


def count(value: object) -> int | None:
    """A token count as a record may hold it: a whole number from 0 to MOST (never a bool,
    a float such as 1e308, a string or a negative number); None for anything else."""
    if type(value) is not int or not 0 <= value <= MOST:
        return None
    return value


def counts(values: Iterable[object]) -> tuple[int, int, int, int] | None:
    """Four token counts (input, output, cache read, cache write), each checked by `count`;
    None when one is not a count."""
    checked = [count(value) for value in values]
    if len(checked) != 4 or None in checked:
        return None
    a, b, c, d = checked
    assert a is not None and b is not None and c is not None and d is not None
    return a, b, c, d


class Totals:
    """Tokens of each kind, and the turns they came from."""

    __slots__ = ("cache_read", "cache_write", "input", "output", "turns")

    def __init__(self) -> None:
        self.input = self.output = self.cache_read = self.cache_write = self.turns = 0

    def add(self, spend: Spend | Totals) -> None:
        self.input += spend.input
        self.output += spend.output
        self.cache_read += spend.cache_read
        self.cache_write += spend.cache_write
        self.turns += spend.turns

    @property
    def budgeted(self) -> int:
        return self.input + self.output + self.cache_write

    def to_json(self) -> dict[str, int]:
        return {kind: getattr(self, kind) for kind in (*KINDS, "turns")}

    def __bool__(self) -> bool:
        return bool(self.turns or self.input or self.output or self.cache_read or self.cache_write)


def summed(parts: Iterable[Totals | Spend]) -> Totals:
    total = Totals()
    for part in parts:
        total.add(part)
    return total


class Tally:
    """Every record of a project added up: per role and harness, per card, and in all."""

    def __init__(self) -> None:
        self.roles: dict[str, dict[str, Totals]] = {}  # role -> harness -> totals
        self.cards: dict[str, Totals] = {}

    def role(self, name: str) -> Totals:
        """One role's totals, all harnesses together (nothing spent: all zero)."""
        return summed(self.roles.get(name, {}).values())

    def team(self, names: Iterable[str]) -> Totals:
        """Several roles together: a pool's members."""
        return summed(self.role(name) for name in names)

    def card(self, name: str) -> Totals:
        return self.cards.get(name) or Totals()

    def total(self) -> Totals:
        return summed(t for harnesses in self.roles.values() for t in harnesses.values())

    def samples(self) -> list[tuple[str, str, str, int]]:
        """(role, harness, kind, tokens) for every role and harness that spent anything, in
        order: `handoffd_tokens_total{role,harness,kind}`."""
        return [
            (role, harness, kind, getattr(totals, kind))
            for role, harnesses in sorted(self.roles.items())
            for harness, totals in sorted(harnesses.items())
            for kind in KINDS
        ]


def tally(records: Mapping[str, Iterable[Spend]], since: float | None = None) -> Tally:
    """The totals of each role's records (role -> its `H/usage.jsonl` records), only those
    at or after `since` when given (a record carried over a rotation counts at its latest
    turn)."""
    found = Tally()
    for role, spent in records.items():
        mine = found.roles.setdefault(role, {})
        for spend in spent:
            if since is not None and spend.at < since:
                continue
            mine.setdefault(spend.harness, Totals()).add(spend)
            if spend.card is not None:
                found.cards.setdefault(spend.card, Totals()).add(spend)
    return found


# --- budgets --------------------------------------------------------------------------


class Budget:
    """A `budget <role|pool> <tokens> per <hour|day>` line."""

    __slots__ = ("tokens", "who", "window")

    def __init__(self, who: str, tokens: int, window: str) -> None:
        self.who = who
        self.tokens = tokens
        self.window = window

    @property
    def seconds(self) -> float:
        return WINDOWS[self.window]

    def __repr__(self) -> str:
        return f"Budget({self.who!r}, {self.tokens}, {self.window!r})"


def budget_of(words: list[str]) -> Budget:
    """The budget a conf line's words declare; ValueError saying what is wrong."""
    if len(words) != 5 or words[0] != "budget" or words[3] != "per":
        raise ValueError(f"expected {BUDGET_SHAPE}")
    tokens = words[2]
    if not (tokens.isascii() and tokens.isdigit()) or not 0 < int(tokens) <= MOST:
        raise ValueError(f"a budget is a whole number of tokens from 1 to {MOST}; got {tokens!r}")
    if words[4] not in WINDOWS:
        raise ValueError(f"a budget is per hour or per day; got {words[4]!r}")
    return Budget(words[1], int(tokens), words[4])


def budgets(text: str) -> dict[str, Budget]:
    """The budgets of a swarm configuration, by role or pool (`init` has checked its lines;
    one that is no budget is passed over here, the last of two for one name wins)."""
    found = {}
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if words and words[0] == "budget":
            try:
                budget = budget_of(words)
            except ValueError:
                continue
            found[budget.who] = budget
    return found


class Spent:
    """A budget reached: what was used over its window, and when work may resume."""

    __slots__ = ("budget", "resumes", "used")

    def __init__(self, budget: Budget, used: int, resumes: float) -> None:
        self.budget = budget
        self.used = used
        self.resumes = resumes

    @property
    def resumes_s(self) -> int:
        """The moment work resumes, rounded up to the second: said after it, never before."""
        return -int(-self.resumes // 1)

    def line(self, iso: str) -> str:
        """`BUDGET_SPENT: <used> of <budget> tokens in the last <window>; work resumes
        after <time>` (`iso`: `resumes_s` as a §2 timestamp)."""
        return (f"BUDGET_SPENT: {self.used} of {self.budget.tokens} tokens in the last "
                f"{self.budget.window}; work resumes after {iso}")  # fmt: skip


def spent(budget: Budget, records: Iterable[Spend], now: float) -> Spent | None:
    """Whether `records` (all of the budget's role, or of its pool's members) reach
    `budget` over the window ending at `now`: then what they used and the moment enough of
    it has left the window for the rest to be under budget again; else None.  A record
    from the future (a clock stepped back) counts as now: it never lengthens the wait."""
    start = now - budget.seconds
    inside = sorted(
        ((min(r.at, now), r.budgeted) for r in records if r.at > start and r.budgeted),
        key=lambda pair: pair[0],
    )
    used = sum(tokens for _, tokens in inside)
    if used < budget.tokens:
        return None
    left = used
    for at, tokens in inside:
        left -= tokens
        if left < budget.tokens:
            return Spent(budget, used, at + budget.seconds)
    return Spent(budget, used, now + budget.seconds)  # not reached: `inside` is not empty


def used(budget: Budget, records: Iterable[Spend], now: float) -> int:
    """The tokens `records` spent that `budget` counts, over its window ending at `now`."""
    start = now - budget.seconds
    return sum(one.budgeted for one in records if one.at > start)


def most_spent(found: Iterable[Spent | None]) -> Spent | None:
    """Of the budgets that hold a role (its own, its pool's), the one that holds it
    longest; None when none does."""
    held = [one for one in found if one is not None]
    return max(held, key=lambda one: one.resumes) if held else None
