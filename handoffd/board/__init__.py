"""The board: the queue seen as cards (claims, reports, colours) and the commands on them."""
