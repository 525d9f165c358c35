"""The `handoffd` console script.  `handoffd hook EVENT` runs once per agent turn (docs/
protocol.md §16), so it goes straight to the hook, without the click group and the
table of operations behind it; every other command goes to `handoffd.cli`."""

from __future__ import annotations

import sys

HOOK_EVENTS = ("stop", "session-start", "pre-compact")


def main() -> None:
    if sys.argv[1:2] == ["hook"] and sys.argv[2:3] and sys.argv[2] in HOOK_EVENTS:
        from handoffd.adapters.hooks import main as hook

        raise SystemExit(hook(sys.argv[2:]))
    from handoffd.cli import main as cli

    cli()
