"""Digests: threads written by the machine from the queue, its reports and git
(docs/protocol.md §11)."""
