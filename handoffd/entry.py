"""The `handoffd` console script.  `handoffd hook EVENT` runs once per agent turn (docs/
protocol.md §16), so it goes straight to the hook, without the click group and the
table of operations behind it; `handoffd status` with nothing but its own flags (the
board a person watches) runs its operation without click (`sources.only_flags`); every
other command goes to `handoffd.cli`."""

from __future__ import annotations

import sys

HOOK_EVENTS = ("stop", "session-start", "pre-compact")
PLAIN = ("status",)  # views run without click when given only their own flags


def main() -> None:
    if sys.argv[1:2] == ["hook"] and sys.argv[2:3] and sys.argv[2] in HOOK_EVENTS:
        from handoffd.adapters.hooks import main as hook

        raise SystemExit(hook(sys.argv[2:]))
    if sys.argv[1:2] and sys.argv[1] in PLAIN:
        plain(sys.argv[1], sys.argv[2:])
    from handoffd.cli import main as cli

    cli()


def plain(name: str, args: list[str]) -> None:
    """Run view `name` without click when `args` are only its own flags (then exit, as the
    click command would: its text, its exit code; Ctrl-C as click says it), and end the
    process as a helper does (`console.script`: a read-only view leaves nothing for the
    interpreter's teardown, which for a board of 1,000 cards took as long as its text);
    else return."""
    from handoffd.adapters import sources
    from handoffd.adapters.console import script
    from handoffd.core.outcome import emit
    from handoffd.ops.table import BY_NAME

    op = BY_NAME[name]
    values = sources.only_flags(op, args)
    if values is None:
        return

    def view() -> None:
        try:
            emit(sources.run(op, None, values))
        except KeyboardInterrupt:
            sys.stderr.write("\nAborted!\n")
            raise SystemExit(1) from None

    script(view)
