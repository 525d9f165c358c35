"""What a command step returns: an exit code and the text for stdout and stderr.

Operations (taking work, reporting, releasing…) return an `Outcome` instead of
printing and exiting from deep inside, so the console scripts, the click commands
and the MCP tools are each a thin adapter that renders the same result.  Helpers
import this module, so it uses nothing at all.
"""

from __future__ import annotations


class Outcome:
    """A finished step: `code` is the process exit code the contract names."""

    __slots__ = ("code", "stderr", "stdout")

    def __init__(self, code: int = 0, stdout: str = "", stderr: str = "") -> None:
        self.code = code
        self.stdout = stdout
        self.stderr = stderr

    @property
    def ok(self) -> bool:
        return self.code == 0

    def __repr__(self) -> str:
        return f"Outcome({self.code}, stdout={self.stdout!r}, stderr={self.stderr!r})"
