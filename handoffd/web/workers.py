"""The threads the web board's actions run on (docs/protocol.md §13, §15 "Locks").

Starlette serves every page (a plain function) from one pool of threads.  An action may
wait up to `LOCK_WAIT` for a role's inbox lock before it is refused (`INBOX_BUSY`): run in
that same pool, enough actions waiting at once on a lock some process holds would leave
no thread for any page, and every page would wait behind a lock it never takes.  So the
actions run on a few threads of their own, and one that finds none free within the same
wait is not run at all (503).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import anyio

from handoffd.queue.lock import LOCK_WAIT

ACTION_WORKERS = 8  # threads of the operator's actions, apart from the pages' pool
BOARD_BUSY = "every worker of the board's actions stayed busy; try again"


class Workers:
    """The threads the operator's actions run on: a few of their own, never the pool the
    pages are served from.  An action may wait up to `LOCK_WAIT` for a role's inbox lock
    (`INBOX_BUSY` after that); sharing the pages' pool, enough such waits at once would
    leave no thread for any page, so every page would wait on a lock it never takes.  An
    action that finds no worker free within `LOCK_WAIT` is not run (`None`: 503)."""

    def __init__(self, count: int = ACTION_WORKERS) -> None:
        self.count = count
        self._free: Any = None  # made in the server's event loop, on first use

    async def run(self, function: Callable[..., Any], *args: Any) -> Any:
        if self._free is None:
            self._free = anyio.Semaphore(self.count)
        with anyio.move_on_after(LOCK_WAIT) as waited:
            await self._free.acquire()
        if waited.cancelled_caught:
            return None
        try:  # a thread of its own: the pages' pool (the default limiter) stays free
            return await anyio.to_thread.run_sync(
                partial(function, *args), limiter=anyio.CapacityLimiter(1)
            )
        finally:
            self._free.release()
