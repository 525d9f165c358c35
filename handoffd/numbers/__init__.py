"""The swarm's numbers (docs/protocol.md §19): Prometheus metrics, `handoffd stats` and the
web board's `/numbers`, all from one read of the queue's files, the history index and the
daemon's log."""
