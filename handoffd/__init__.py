"""handoffd: the post office between AI coding agents."""

__version__ = "0.1.0"
