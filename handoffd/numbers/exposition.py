"""The Prometheus text exposition (format 0.0.4) of the swarm's numbers (docs/protocol.md
§19), pure: `Facts` in, text out.

Written here rather than with prometheus-client: `handoffd metrics` is a command whose
start-up counts, the format is a few lines of text, and the families are computed afresh
from the files at each read, which a client library's registry of live counters is not
made for.  The tests read it back with prometheus-client's own parser, and
`promtool check metrics` and a real Prometheus server read it too.

Every family has `# HELP` and `# TYPE`; the only labels are `role`, `pool`, `sender`,
`harness`, `via`, `result` and `state`, whose values are role names (checked where they
are read) or fixed words: no card, id or file name.  Each role's series are written even
at zero, so a series never appears mid-way and a rate sees its first increase.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TypeVar

from handoffd.numbers import facts as known
from handoffd.numbers import logcount, tally, tokens
from handoffd.numbers.facts import Facts

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

T = TypeVar("T", str, tuple[str, str, str])
Labels = dict[str, str]
Sample = tuple[str, Labels, float]  # (name with its suffix, labels, value)


class Family:
    """One metric family: its name, type, help line and samples."""

    __slots__ = ("help", "kind", "name", "samples")

    def __init__(self, name: str, kind: str, help: str, samples: Iterable[Sample]) -> None:
        self.name = name
        self.kind = kind
        self.help = help
        self.samples = list(samples)


def families(facts: Facts) -> list[Family]:
    """Every family, in a fixed order."""
    found = tally.summary(facts)
    return [*_gauges(facts), *_counters(facts, found), *_histograms(facts, found)]


def render(facts: Facts) -> str:
    return text(families(facts))


def text(found: list[Family]) -> str:
    lines = []
    for family in found:
        lines.append(f"# HELP {family.name} {_help(family.help)}")
        lines.append(f"# TYPE {family.name} {family.kind}")
        lines += (
            f"{name}{_labels(labels)} {_value(value)}" for name, labels, value in family.samples
        )
    return "\n".join(lines) + "\n"


# --- the families -----------------------------------------------------------------------


def _gauges(facts: Facts) -> list[Family]:
    cards = (("handoffd_cards", {"role": role, "state": state}, facts.cards.get((role, state), 0))
             for role in facts.roles for state in known.CARD_STATES)  # fmt: skip
    found = [
        Family("handoffd_up", "gauge", "1 while this project's daemon runs.",
               [("handoffd_up", {}, int(facts.up))]),
        Family("handoffd_cards", "gauge", "Open cards by role and state (queued, failed, "
               "blocked, waiting, in_process), each counted once.", cards),
        Family("handoffd_oldest_waiting_seconds", "gauge",
               "How long the role's oldest copy in new/ has waited (0: none waits).",
               _per(facts.roles, "handoffd_oldest_waiting_seconds", facts.oldest)),
        Family("handoffd_stalled", "gauge",
               "1 while the role is red for wake-ups it does not answer.",
               ((("handoffd_stalled", {"role": r}, int(r in facts.stalled))) for r in facts.panes)),
        Family("handoffd_busy", "gauge", "1 busy, 0 idle, as status shows the role's pane.",
               (("handoffd_busy", {"role": r, "harness": h}, v)
                for (r, h), v in sorted(facts.busy.items()))),
    ]  # fmt: skip
    if facts.nats is not None:
        found.append(Family("handoffd_nats_connected", "gauge",
                            "1 while the daemon is connected to the swarm's NATS servers.",
                            [("handoffd_nats_connected", {}, int(facts.nats))]))  # fmt: skip
    budgets = [s for s in facts.tokens if s[0] == tokens.BUDGET]
    if budgets:
        found.append(Family(tokens.BUDGET, "gauge", "Tokens left of the role's budget in its "
                            "window.", budgets))  # fmt: skip
    return found


def _counters(facts: Facts, found: tally.Summary) -> list[Family]:
    senders = _and(facts.roles, tally.refused(facts))
    wakeups = tally.logged(facts, "wakeup")
    every: list[tuple[str, str, str]] = [
        (r, v, x) for r in facts.panes for v in logcount.VIAS for x in logcount.RESULTS
    ]
    woken = _and(every, {(k[0], k[1], k[2]): n for k, n in wakeups.items()})
    reclaimed = tally.logged(facts, "reclaimed")
    pools = _and(facts.pools, {labels[0]: n for labels, n in reclaimed.items()})
    return [
        _counter("delivered", "Copies written into the role's (or pool's) new/.",
                 _per(facts.roles, "handoffd_delivered_total",
                      tally.delivered_by_role(facts, found))),
        _counter("refused", "Originals the daemon refused, by their sender.",
                 _per(senders, "handoffd_refused_total", tally.refused(facts), "sender")),
        _counter("taken", "Copies the role took from its new/.",
                 _per(facts.roles, "handoffd_taken_total", found.taken)),
        _counter("completed", "Copies the role completed.",
                 _per(facts.roles, "handoffd_completed_total", found.completed)),
        _counter("reopened", "Completed copies of the role reopened by an operator.",
                 _per(facts.roles, "handoffd_reopened_total", found.reopened)),
        _counter("wakeups", "Wake-ups the daemon sent, by how (typed, hook) and how each "
                 "ended (submitted, unsubmitted, forced, failed).",
                 (("handoffd_wakeups_total", {"role": r, "via": v, "result": x},
                   wakeups.get((r, v, x), 0)) for r, v, x in woken)),
        _counter("reclaimed", "Copies taken back from a pool member that stopped answering.",
                 _per(pools, "handoffd_reclaimed_total",
                      {labels[0]: n for labels, n in reclaimed.items()}, "pool")),
        _counter("tokens", "Tokens the role's agent spent, by harness and kind (input, "
                 "output, cache_read, cache_write).",
                 [s for s in facts.tokens if s[0] == tokens.TOTAL]),
    ]  # fmt: skip


def _and(known: list[T], found: dict[T, int]) -> list[T]:
    """`known` in its order, then what the log names besides (a role since removed)."""
    extra: list[T] = sorted(set(found) - set(known))
    return known + extra


def _counter(what: str, help: str, samples: Iterable[Sample]) -> Family:
    return Family(f"handoffd_{what}_total", "counter", help, samples)


def _histograms(facts: Facts, found: tally.Summary) -> list[Family]:
    return [
        Family("handoffd_pickup_seconds", "histogram",
               "An original's arrival in outbox/ to its copies in new/.",
               _histogram("handoffd_pickup_seconds", {}, tally.pickups(facts, found))),
        Family("handoffd_wait_seconds", "histogram", "A copy's enqueued_at to its dequeued_at.",
               _by_role(facts, "handoffd_wait_seconds", found.wait)),
        Family("handoffd_work_seconds", "histogram", "A copy's dequeued_at to its completed_at.",
               _by_role(facts, "handoffd_work_seconds", found.work)),
    ]  # fmt: skip


def _by_role(facts: Facts, name: str, found: dict[str, tally.Histogram]) -> list[Sample]:
    roles = [role for role in facts.roles if role not in facts.pools]  # a pool takes nothing
    empty = tally.Histogram(tally.WAIT_BUCKETS)
    return [s for r in roles for s in _histogram(name, {"role": r}, found.get(r, empty))]


def _histogram(name: str, labels: Labels, histogram: tally.Histogram) -> list[Sample]:
    samples: list[Sample] = [
        (f"{name}_bucket", {**labels, "le": _value(bound)}, n)
        for bound, n in zip(histogram.bounds, histogram.cumulative(), strict=True)
    ]
    samples.append((f"{name}_bucket", {**labels, "le": "+Inf"}, histogram.count))
    samples.append((f"{name}_sum", labels, histogram.sum))
    samples.append((f"{name}_count", labels, histogram.count))
    return samples


def _per(names: Iterable[str], metric: str, counts: dict[str, int] | dict[str, float],
         label: str = "role") -> list[Sample]:  # fmt: skip
    return [(metric, {label: name}, counts.get(name, 0)) for name in names]


# --- the text ---------------------------------------------------------------------------


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{key}="{_escaped(value)}"' for key, value in labels.items())
    return "{" + inner + "}"


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _value(value: float) -> str:
    """A sample's value: an integer as one, a float as Python writes it back exactly."""
    if isinstance(value, int) or (
        math.isfinite(value) and value == int(value) and abs(value) < 2**53
    ):
        return str(int(value))
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)
