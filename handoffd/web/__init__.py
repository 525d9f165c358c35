"""The web board (docs/protocol.md §9): Starlette pages over the board's projection."""
