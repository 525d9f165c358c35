"""The counts and the durations the swarm's numbers show, pure: `Facts` in, numbers out,
over all the history the project keeps (`summary`, what `/metrics` shows) or over a
window from `since` (seconds since the epoch: `counts`, `waits`, `works`, what `handoffd
stats` and `/numbers` show).  Both count a copy by the same rules (`_takes`, `_dones`), so
over a window that holds all of history they agree.

A copy's stamps date each count: delivered at `enqueued_at`, taken at `dequeued_at`,
completed at `completed_at`.  A reopen (§13) wipes the take and the completion it undoes;
`reopens` keeps how many there were, dated at the last `reopened_at`, so a count never
goes down when a card comes back.  A count whose time is unknown (a hand-made file
without the stamp) is counted in all of history, in no window.  Durations are summed in
whole microseconds, so a sum is the same whatever order the copies were read in.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from handoffd.numbers.facts import Facts
from handoffd.numbers.stamps import Copy

Counts = dict[str, int]
PICKUP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
WAIT_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400)
COUNTED = ("delivered", "taken", "completed", "reopened")


class Histogram:
    """Observations in cumulative buckets (upper bounds `bounds`), their sum and count."""

    __slots__ = ("bounds", "count", "counts", "micros")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * len(bounds)  # not cumulative: each bucket's own
        self.count = 0
        self.micros = 0  # the sum in whole microseconds

    def observe(self, value: float) -> None:
        for at, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[at] += 1
                break
        self.count += 1
        self.micros += round(value * 1_000_000)

    def add(self, other: Histogram) -> None:
        self.counts = [a + b for a, b in zip(self.counts, other.counts, strict=True)]
        self.count += other.count
        self.micros += other.micros

    def cumulative(self) -> list[int]:
        found, total = [], 0
        for n in self.counts:
            total += n
            found.append(total)
        return found

    @property
    def sum(self) -> float:
        return self.micros / 1_000_000


class Summary:
    """All of history's counts, by the labels they may take: delivered by (recipient,
    holder) — the label is the recipient where that is a role here —, the rest by the
    holder; pickups by sender (only a role's here are shown)."""

    def __init__(self) -> None:
        self.delivered: dict[tuple[str, str], int] = {}
        self.taken: Counts = {}
        self.completed: Counts = {}
        self.reopened: Counts = {}
        self.wait: dict[str, Histogram] = {}
        self.work: dict[str, Histogram] = {}
        self.pickup: dict[str, Histogram] = {}

    def add_copy(self, copy: Copy) -> None:
        role = copy.role
        key = (copy.recipient, role)
        self.delivered[key] = self.delivered.get(key, 0) + 1
        for counts, n in ((self.taken, copy.taken), (self.completed, _done(copy)),
                          (self.reopened, copy.reopens)):  # fmt: skip
            counts[role] = counts.get(role, 0) + n
        for wait, work in _lives(copy):
            if wait is not None:
                _histogram(self.wait, role, WAIT_BUCKETS).observe(wait)
            if work is not None:
                _histogram(self.work, role, WAIT_BUCKETS).observe(work)
        if copy.first and (pickup := _span(copy.created, copy.enqueued)) is not None:
            _histogram(self.pickup, copy.sender, PICKUP_BUCKETS).observe(pickup)

    def add(self, other: Summary) -> None:
        for pair, n in other.delivered.items():
            self.delivered[pair] = self.delivered.get(pair, 0) + n
        for mine, theirs in ((self.taken, other.taken), (self.completed, other.completed),
                             (self.reopened, other.reopened)):  # fmt: skip
            for role, n in theirs.items():
                mine[role] = mine.get(role, 0) + n
        for held, given, bounds in ((self.wait, other.wait, WAIT_BUCKETS),
                                    (self.work, other.work, WAIT_BUCKETS),
                                    (self.pickup, other.pickup, PICKUP_BUCKETS)):  # fmt: skip
            for name, histogram in given.items():
                _histogram(held, name, bounds).add(histogram)


def _histogram(found: dict[str, Histogram], key: str, bounds: tuple[float, ...]) -> Histogram:
    if key not in found:
        found[key] = Histogram(bounds)
    return found[key]


def _span(start: float | None, end: float | None) -> float | None:
    return None if start is None or end is None or end < start else end - start


def _lives(copy: Copy) -> list[tuple[float | None, float | None]]:
    """Each life's (wait, work): the earlier ones a reopen ended, and the current one."""
    now = (_span(copy.arrived, copy.dequeued), _span(copy.dequeued, copy.completed))
    return [*copy.earlier, now]


def _done(copy: Copy) -> int:
    return copy.reopens + (copy.completed is not None)


def summarised(copies: Iterable[Copy]) -> Summary:
    summary = Summary()
    for copy in copies:
        summary.add_copy(copy)
    return summary


def summary(facts: Facts) -> Summary:
    """All of history's counts: the open copies summed now, each role's completed ones
    summed once while they stand unchanged (a long-running reader keeps that sum)."""
    total = summarised(facts.open_copies)
    for held in facts.history:
        if not isinstance(held.summary, Summary):
            held.summary = summarised(held.copies)
        total.add(held.summary)
    return total


def delivered_by_role(facts: Facts, found: Summary) -> Counts:
    counts: Counts = {}
    for (recipient, holder), n in found.delivered.items():
        role = recipient if recipient in facts.roles else holder
        counts[role] = counts.get(role, 0) + n
    return counts


def pickups(facts: Facts, found: Summary) -> Histogram:
    """Pickups of the originals this host's roles sent."""
    total = Histogram(PICKUP_BUCKETS)
    for sender, histogram in found.pickup.items():
        if sender in facts.roles:
            total.add(histogram)
    return total


# --- over a window ----------------------------------------------------------------------


def _within(at: float | None, since: float | None) -> bool:
    return since is None or (at is not None and at >= since)


def counts(facts: Facts, since: float | None) -> dict[str, Counts]:
    """delivered, taken, completed and reopened per role within the window."""
    found: dict[str, Counts] = {kind: {} for kind in COUNTED}

    def count(kind: str, role: str, at: float | None, n: int) -> None:
        if n and _within(at, since):
            found[kind][role] = found[kind].get(role, 0) + n

    for copy in facts.copies():
        role = copy.role
        count("delivered", copy.recipient if copy.recipient in facts.roles else role,
              copy.enqueued, 1)  # fmt: skip
        count("taken", role, copy.reopened, copy.reopens)
        count("taken", role, copy.dequeued or copy.completed or copy.touched, copy.taken_now)
        count("completed", role, copy.reopened, copy.reopens)
        count("completed", role, copy.completed, int(copy.completed is not None))
        count("reopened", role, copy.reopened, copy.reopens)
    return found


def logged(facts: Facts, kind: str, since: float | None = None) -> dict[tuple[str, ...], int]:
    """The log's counted lines of `kind` (`refused`, `wakeup`, `reclaimed`) by labels."""
    found: dict[tuple[str, ...], int] = {}
    for event in facts.events:
        if event.kind == kind and _within(event.at, since):
            found[event.labels] = found.get(event.labels, 0) + 1
    return found


def refused(facts: Facts, since: float | None = None) -> Counts:
    return {labels[0]: n for labels, n in logged(facts, "refused", since).items()}


def waits(facts: Facts, since: float | None = None) -> dict[str, list[float]]:
    """Each role's waits (since a copy arrived, or was reopened, until taken), dated when
    taken (an earlier life's at the reopen that ended it)."""
    return _durations(facts, 0, since)


def works(facts: Facts, since: float | None = None) -> dict[str, list[float]]:
    """Each role's work (`dequeued_at` → `completed_at`), dated when completed."""
    return _durations(facts, 1, since)


def _durations(facts: Facts, which: int, since: float | None) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {}
    for at, role, span in _dated(facts, which):
        if _within(at, since):
            found.setdefault(role, []).append(span)
    return found


def _dated(facts: Facts, which: int) -> Iterator[tuple[float | None, str, float]]:
    """(when it ended, role, seconds) of every wait (`which` 0) or work (1)."""
    for copy in facts.copies():
        lives = _lives(copy)
        ended = [copy.reopened] * (len(lives) - 1) + [(copy.dequeued, copy.completed)[which]]
        for at, life in zip(ended, lives, strict=True):
            if (span := life[which]) is not None:
                yield at, copy.role, span


def completion_times(facts: Facts, since: float) -> dict[str, list[float]]:
    """When each role completed what it completed since `since` (a reopen's earlier
    completions dated at the reopen), for the charts' completed per hour."""
    found: dict[str, list[float]] = {}
    for copy in facts.copies():
        times = [copy.reopened] * copy.reopens + [copy.completed]
        found.setdefault(copy.role, []).extend(t for t in times if t is not None and t >= since)
    return found


def dated(facts: Facts, which: str, since: float) -> dict[str, list[tuple[float, float]]]:
    """Each role's waits (`which` "wait") or work ("work") that ended since `since`, as
    (when it ended, seconds)."""
    found: dict[str, list[tuple[float, float]]] = {}
    for at, role, span in _dated(facts, 0 if which == "wait" else 1):
        if at is not None and at >= since:
            found.setdefault(role, []).append((at, span))
    return found


def percentile(values: list[float], fraction: float) -> float | None:
    """The `fraction` quantile of `values` (nearest rank), None for none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, int(-(-fraction * len(ordered) // 1)) - 1))
    return ordered[rank]
