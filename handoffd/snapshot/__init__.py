"""What reads a whole project: the snapshot every view is made of, and the history index."""
