"""What differs between the harnesses, as data: one `Profile` per harness (docs/protocol.md
§16), and the pure reading of a pane through it.

A pane is read with its colours (`capture-pane -e`), because both harnesses draw the empty
input box with a dimmed placeholder ("Ask Codex to do anything"): text shown dim is not
typed text.  `Screen` is that capture as rows of plain text, each with the characters
drawn without dimming; everything a profile decides is a function of a `Screen` and the
pane's title, so it is tested without a terminal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection

CLAUDE, CODEX, GENERIC = "claude", "codex", "generic"
HARNESSES = (CLAUDE, CODEX, GENERIC)
SGR = re.compile(r"\x1b\[([0-9;:]*)m")
# every other escape (SGR's final byte is `m`: not these), which draws nothing
OTHER_ESCAPE = re.compile(
    r"\x1b(\[[0-9;:?<=>]*[ -/]*[@-ln-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])"
)
SPACES = " \u00a0"  # Claude Code ends its empty prompt line with a no-break space


@dataclass(frozen=True)
class Profile:
    """One harness: how its input box looks, when it is ready and busy, how keys go in.

    - `prompt`: the glyph that starts the input box's first row (the last such row on the
      screen; earlier ones are the conversation's own prompts);
    - `framed`: the box sits between two rules of `─` (its top rule is the row above it);
      the box ends at the next rule, else at the next empty row;
    - `ready`: a text whose row shows the harness is ready for keys (None: the box framed);
    - `busy_rows`, `busy_title`: patterns of a row, or of the pane's title, shown only
      while a turn runs;
    - `enter_after`: seconds between the text and the Enter that submits it; `clear`: the
      key that empties the box (the line typed is then gone, whatever happened to it);
    - `tells`: its Stop hook can tell the agent of its mail (Claude Code's can; Codex's
      notify cannot, so a line is typed as soon as its turn is over).
    """

    name: str
    prompt: str
    framed: bool
    ready: str | None
    busy_rows: tuple[str, ...]
    busy_title: str | None = None
    enter_after: float = 0.150
    enter: str = "Enter"
    clear: str = "C-u"
    tells: bool = True


PROFILES = {
    CLAUDE: Profile(
        CLAUDE, prompt="\u276f", framed=True, ready=None,  # the heavy angle of its prompt
        # a spinner glyph at the row's start, then one word ending in an ellipsis: `✻
        # Brewing… (2s · ↓ 5 tokens)`; a finished turn's `✻ Baked for 3s` has none
        busy_rows=(r"^[·✢✳✶✻✽*] [^\s…]+…",),
    ),
    CODEX: Profile(
        CODEX, prompt="\u203a", framed=False, ready="? for shortcuts",  # its single angle
        busy_rows=(r"^[•◦] Working \(.*esc to interrupt\)",),
        busy_title=r"^[\u2801-\u28ff]",  # a braille spinner before the title
        tells=False,
    ),
}  # fmt: skip


def profile(harness: str) -> Profile | None:
    """The profile of a known harness; None for `generic` (Parts I to III exactly)."""
    return PROFILES.get(harness)


class Row:
    """One row of the screen: its text, and the characters of it drawn without dimming."""

    __slots__ = ("text", "typed")

    def __init__(self, text: str, typed: str) -> None:
        self.text = text
        self.typed = typed

    def __repr__(self) -> str:
        return f"Row({self.text!r})"


class Screen:
    """A pane's visible rows, parsed from `capture-pane -p -e`."""

    def __init__(self, rows: list[Row], title: str = "") -> None:
        self.rows = rows
        self.title = title

    @classmethod
    def parse(cls, captured: str, title: str = "") -> Screen:
        return cls([_row(line) for line in captured.split("\n")], title)

    @classmethod
    def plain(cls, text: str, title: str = "") -> Screen:
        """A screen of plain text, nothing dim (for a test, or a capture without colours)."""
        return cls([Row(line, line) for line in text.split("\n")], title)

    @property
    def text(self) -> str:
        return "\n".join(row.text for row in self.rows)


def _row(line: str) -> Row:
    """Split an escaped line into its text and the part of it not drawn dim: SGR 2 dims,
    22 and 0 (or nothing) undo it; other escapes draw nothing."""
    line = OTHER_ESCAPE.sub("", line)
    text, typed, dim, at = [], [], False, 0
    for match in SGR.finditer(line):
        chunk = line[at : match.start()]
        text.append(chunk)
        typed.append(" " * len(chunk) if dim else chunk)
        dim = _dim_after(match.group(1), dim)
        at = match.end()
    chunk = line[at:]
    text.append(chunk)
    typed.append(" " * len(chunk) if dim else chunk)
    return Row("".join(text).rstrip(), "".join(typed).rstrip())


def _dim_after(parameters: str, dim: bool) -> bool:
    for code in parameters.replace(":", ";").split(";"):
        if code in ("", "0", "22"):
            dim = False
        elif code == "2":
            dim = True
    return dim


def _rule(row: Row) -> bool:
    text = row.text.strip()
    return len(text) >= 3 and set(text) == {"─"}


def box_rows(screen: Screen, prof: Profile) -> tuple[int, int] | None:
    """Where the input box is: (first row, row after its last), or None when none shows.
    A framed box's first row has a rule above it (a dialog's choice `1. Yes`, drawn with
    the same glyph, has none)."""
    rows = screen.rows
    for first in range(len(rows) - 1, -1, -1):
        if not rows[first].text.startswith(prof.prompt):
            continue
        if prof.framed and not (first > 0 and _rule(rows[first - 1])):
            continue
        end = first + 1
        while end < len(rows) and rows[end].text.strip() and not _rule(rows[end]):
            end += 1
        return first, end
    return None


def box_text(screen: Screen, prof: Profile) -> str | None:
    """What is typed in the input box (its placeholder, drawn dim, is not), its rows
    joined by spaces; None when no box shows."""
    found = box_rows(screen, prof)
    if found is None:
        return None
    first, end = found
    parts = [row.typed.strip(SPACES) for row in screen.rows[first:end]]
    parts[0] = parts[0].removeprefix(prof.prompt).strip(SPACES)
    return " ".join(part for part in parts if part)


def ready(screen: Screen, prof: Profile) -> bool:
    """Whether the harness has drawn its input box and takes keys now."""
    if prof.ready is not None:
        return any(prof.ready in row.text for row in screen.rows)
    return box_rows(screen, prof) is not None


def busy(screen: Screen, prof: Profile) -> bool:
    """Whether a turn runs: a busy row above the input box, or a busy title."""
    if prof.busy_title and re.match(prof.busy_title, screen.title):
        return True
    found = box_rows(screen, prof)
    above = screen.rows[: found[0]] if found else screen.rows
    return any(re.match(pattern, row.text) for pattern in prof.busy_rows for row in above)


def holds(screen: Screen, prof: Profile, text: str) -> bool:
    """Whether the input box still holds `text` (typed, not submitted)."""
    typed = box_text(screen, prof)
    return bool(typed) and _squeezed(text) in _squeezed(typed or "")


def sent(screen: Screen, prof: Profile, text: str) -> bool:
    """Whether the harness shows `text` taken: no longer in the box, and either shown in
    the conversation above it or a turn running.  A box that merely lost it (a harness
    still starting may draw its box afresh) shows neither."""
    if holds(screen, prof, text):
        return False
    found = box_rows(screen, prof)
    above = screen.rows[: found[0]] if found else screen.rows
    return busy(screen, prof) or _squeezed(text) in _squeezed(" ".join(r.text for r in above))


def _squeezed(text: str) -> str:
    """A text without its spaces: a narrow pane wraps the box, and the rows it is wrapped
    into are joined with spaces that were not typed."""
    return "".join(text.split())


IDLE, BUSY, STARTING = "idle", "busy", "starting"
HELD = "held"  # the box holds text handoffd did not type: a person at work
UNSENT = "unsent"  # the box holds a line handoffd typed, not submitted, and no turn runs


def state(screen: Screen, prof: Profile, ours: Collection[str] = ()) -> str:
    """`held` while the box holds text that is not one of `ours` (the lines handoffd
    types): a person's, never typed into, submitted or cleared (docs/protocol.md §17),
    busy or not; `busy` while a turn runs; `unsent` when the box holds one of `ours`
    (typed, its Enter lost: §16's one more Enter is owed); else `idle` once the harness
    is ready (§16: at once, no quiet time), else `starting`."""
    typed = box_text(screen, prof)
    if typed and not ours_exactly(typed, ours):
        return HELD
    if busy(screen, prof):
        return BUSY
    if typed:
        return UNSENT
    return IDLE if ready(screen, prof) else STARTING


def ours_exactly(typed: str, ours: Collection[str]) -> bool:
    """Whether the box's text `typed` is one of the lines `ours`, whole, nothing before or
    after it (a narrow box wraps a line with spaces it was never typed with)."""
    return _squeezed(typed) in {_squeezed(line) for line in ours}


def of_command(command: str) -> str:
    """The harness a command line runs: `claude` or `codex` when its program's basename is
    that name (after `env` and NAME=value words), else `generic`."""
    import shlex

    try:
        words = shlex.split(command)
    except ValueError:
        return GENERIC
    for word in words:
        name, assigns, _ = word.partition("=")
        if word in ("exec", "env") or (assigns and name.isidentifier()):
            continue
        base = word.rsplit("/", 1)[-1]
        return base if base in PROFILES else GENERIC
    return GENERIC


def resolve(agent: str, command: str | None, override: str | None) -> str:
    """A role's harness: the conf's `harness <role> …` line, else the agent name (roles.tsv
    column 6) when it is `claude` or `codex`, else the program of its command line."""
    if override in HARNESSES:
        return override
    if agent in PROFILES:
        return agent
    return of_command(command) if command else GENERIC
