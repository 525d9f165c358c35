"""What agents spent, in tokens (docs/protocol.md §19, "Tokens" and "Budgets"), as the
numbers show it: the one tally of the roles' `H/usage.jsonl` records the board reads too
(`board/spending`), as `handoffd_tokens_total` and `handoffd_tokens_budget_remaining`
samples."""

from __future__ import annotations

from handoffd.board import spending
from handoffd.core import tokens
from handoffd.snapshot.snapshot import Snapshot

# (family, labels, value): `handoffd_tokens_total` with `role`, `harness` and `kind`
# (`input`, `output`, `cache_read`, `cache_write`), `handoffd_tokens_budget_remaining`
# with `role` where a budget is set
Sample = tuple[str, dict[str, str], float]
TOTAL, BUDGET = "handoffd_tokens_total", "handoffd_tokens_budget_remaining"
KINDS = tokens.KINDS


def token_samples(snapshot: Snapshot, now: float, since: float | None = None) -> list[Sample]:
    """The tokens each role spent in (`since`, `now`] (all its records kept without
    `since`), by harness and kind; and, over all of them, what each budget leaves now."""
    found = tokens.tally(snapshot.spending(), since=since)
    samples: list[Sample] = [
        (TOTAL, {"role": role, "harness": harness, "kind": kind}, float(count))
        for role, harness, kind, count in found.samples()
    ]
    if since is None:
        left = spending.budget_remaining(snapshot, now)
        samples += [(BUDGET, {"role": role}, float(n)) for role, n in sorted(left.items())]
    return samples
