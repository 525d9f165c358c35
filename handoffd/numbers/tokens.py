"""What agents spent, in tokens (docs/protocol.md §19, "Tokens" and "Budgets"): the place
the numbers read it from.  Until the harnesses' usage records are read (`H/usage.jsonl`),
no role reports any, and this says so by returning no sample."""

from __future__ import annotations

# (family, labels, value): `handoffd_tokens_total` with `role`, `harness` and `kind`
# (`input`, `output`, `cache_read`, `cache_write`), `handoffd_tokens_budget_remaining`
# with `role` where a budget is set
Sample = tuple[str, dict[str, str], float]
TOTAL, BUDGET = "handoffd_tokens_total", "handoffd_tokens_budget_remaining"
KINDS = ("input", "output", "cache_read", "cache_write")


def token_samples(
    root: str, roles: list[str], harness: dict[str, str], now: float, since: float | None = None
) -> list[Sample]:
    """The tokens each of `roles` (run by `harness`) spent in (`since`, `now`] (since ever
    without `since`), and the budgets left: none reported yet."""
    return []
