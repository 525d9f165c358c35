"""The daemon's part in budgets (docs/protocol.md §19): a role whose budget is spent is
typed no wake-up, and once its window has moved on it is woken as for mail waiting.

The decision is `core.usage.holds` over the role's records, read when a wake-up is due
(and only in a project whose configuration names a budget: one small read otherwise).
"""

from __future__ import annotations

import time

from handoffd.core import config, tokens, usage
from handoffd.core import handoff as hf
from handoffd.core.config import Role

TYPE_CHECKING = False
if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger


class Held:
    """The roles a spent budget holds back from wake-ups, each with when it resumes."""

    def __init__(self, root: str, log: FilteringBoundLogger) -> None:
        self.root = root
        self.log = log
        self.clock = time.time  # budgets run on the wall clock, as the records' times do
        self.resumes: dict[str, float] = {}  # role -> when its budget lets it work again

    def allowed(self, names: list[str], roles: dict[str, Role]) -> list[str]:
        """The roles of `names` a wake-up may go to; the others are remembered, said once
        each time a budget holds them (`budget_held`)."""
        if not names:
            return names
        now = self.clock()
        text = config.budget_text(self.root)
        if text is None:
            self.resumes.clear()
            return names
        budgets = tokens.budgets(text)
        kept = []
        for name in names:
            role = roles.get(name)
            spent = usage.holds(budgets, role, roles, now) if role is not None else None
            if spent is None:
                kept.append(name)
                continue
            if name not in self.resumes:
                self.log.info("budget_held", role=name, used=spent.used,
                              budget=spent.budget.tokens, per=spent.budget.window,
                              resumes_at=hf.iso_seconds(spent.resumes_s))  # fmt: skip
            self.resumes[name] = spent.resumes
        return kept

    def resumed(self) -> list[str]:
        """The roles held until now whose window has moved on: forgotten here, to be woken
        (if one is still over budget, the next wake-up finds it held again)."""
        now = self.clock()
        due = sorted(name for name, at in self.resumes.items() if at <= now)
        for name in due:
            del self.resumes[name]
            self.log.info("budget_resumed", role=name)
        return due
