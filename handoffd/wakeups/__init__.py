"""Wake-ups (docs/protocol.md §5, §14): the lines and the tmux calls, the daemon's typing, the
wake-up request, what the panes show.
"""
