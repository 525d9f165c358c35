"""The board: the cards of docs/protocol.md §8 (colours, claims, reports, blocked reasons,
dependencies), projected from one scan of the queue, and the views that show them."""
