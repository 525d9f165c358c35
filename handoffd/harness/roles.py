"""The daemon's view of its roles' harnesses (docs/protocol.md §16): which harness each role
is, what its hooks last left, and which of them announced mail since the last look.

Read from the wake-up threads and the daemon's loop alike; every answer is a stat or
two, and the conf's `harness` lines are read again only when the file changes.
"""

from __future__ import annotations

import os

from handoffd.core.config import Role
from handoffd.harness import profiles
from handoffd.harness.marks import Marks, announced_at
from handoffd.queue import heartbeat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


class Harnesses:
    """Harness facts for the daemon of `root`, whose current roles `roles()` gives."""

    def __init__(self, root: str, roles: Callable[[], dict[str, Role]]) -> None:
        self.root = root
        self.roles = roles
        self._conf: tuple[object, dict[str, str]] = (None, {})  # the conf's lines, by its stamp
        self._announced: dict[str, float | None] = {}  # role -> its H/announced at the last look

    def of(self, name: str, recorded: str) -> str:
        """The role's harness: the conf's `harness` line, else what `up` recorded on its
        session (`recorded`), else what its agent's name says."""
        override = self._overrides().get(name)
        if override is None and recorded in profiles.HARNESSES:
            return recorded
        role = self.roles().get(name)
        return profiles.resolve(role.agent if role else "", None, override)

    def marks(self, name: str) -> Marks:
        """What the role's hooks last left: its end of turn (H/idle), its announcement."""
        role = self.roles().get(name)
        if role is None:
            return Marks(None, None)
        return Marks(heartbeat.idle_at(role.handoffs), announced_at(role.handoffs))

    def announced(self, roles: dict[str, Role]) -> list[tuple[str, float]]:
        """(role, when) of each role whose Stop hook announced mail since the last look; the
        first look at a role only learns where it stands."""
        found = []
        for name, role in roles.items():
            at = announced_at(role.handoffs)
            if name in self._announced and at is not None and at != self._announced[name]:
                found.append((name, at))
            self._announced[name] = at
        return found

    def _overrides(self) -> dict[str, str]:
        from handoffd.core import project

        try:
            info = os.stat(project.stored_configuration(self.root))
            stamp: object = (info.st_ino, info.st_mtime_ns, info.st_size)
        except OSError:
            stamp = None
        if stamp != self._conf[0]:
            self._conf = (stamp, project.harnesses(self.root) if stamp else {})
        return self._conf[1]
