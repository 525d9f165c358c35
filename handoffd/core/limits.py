"""The swarm's defaults, each declared once: the daemon's options (`run`, `start`, `up`,
`demo`) and the board's liveness window.  The table of operations gives them to the
commands as their defaults; the daemon, the waker, the board and the views read them here.
Standard library only (nothing at all): a helper or a hook imports it for free."""

LIVENESS_WINDOW = 60 * 60.0  # seconds: a claim is live while its heartbeat is younger (§8)
RENOTIFY_AFTER = 120.0  # seconds before a role with mail waiting and nothing taken is woken again
RENOTIFY_CAP = 16 * 60.0  # seconds: the re-notify delay doubles up to this
IDLE_AFTER = 2.0  # seconds a pane stays unchanged before it counts as idle (§14)
IDLE_WAIT = 300.0  # seconds after which a wake-up is typed into a pane that never goes quiet
STALL_WAKES = 3  # unanswered wake-ups after which a waiting card turns red (§14)
RECLAIM_AFTER = LIVENESS_WINDOW  # seconds without a heartbeat before a claim goes back (§17)
FIRST_RETRY, LAST_RETRY = 0.5, 60.0  # seconds a deferred delivery waits, doubling in between


def retry_delay(attempt: int) -> float:
    """Seconds before the `attempt`-th retry (1 first): doubling from FIRST_RETRY, capped
    at LAST_RETRY, for an original, a message from another host and a failing pass alike."""
    return float(min(FIRST_RETRY * 2 ** max(attempt - 1, 0), LAST_RETRY))
