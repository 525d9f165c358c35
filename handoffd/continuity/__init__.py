"""Continuing the work: the live file, `resume`, packets, `digest` and `carry-forward`."""
