"""Continuing the work: `resume`, "where were we" (docs/protocol.md §10)."""
