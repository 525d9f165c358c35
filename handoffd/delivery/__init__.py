"""Delivery (docs/protocol.md §5): `outbox/` to every recipient's `new/`, exactly once, the
journal that makes a redelivery a no-op, and the watches that say when to look.
"""
