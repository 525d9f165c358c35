"""Where were we: the live HANDOFF.md, `resume`, packets and digests (docs/protocol.md §10-§11)."""
