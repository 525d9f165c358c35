"""Packets: a bounded brief for another agent, checked before it is queued (docs/protocol.md §10).

A packet is the body of a `type: packet` draft: seven Markdown sections in a fixed
order, each non-empty, at most 60 lines and 8 KiB, with no placeholder text left in.
Each problem is one message naming its section, for the agent to repair the draft.
Pure and cheap: `swarm_handoff` imports it, so it uses no regex and no typing.
"""

from __future__ import annotations

SECTIONS = (
    "Objective", "Decisions Made", "Ruled-Out Paths", "Target Scope", "Hard Constraints",
    "Verification", "If Blocked",
)  # fmt: skip
MAX_LINES = 60
MAX_BYTES = 8192
PLACEHOLDER_WORDS = frozenset(("TODO", "TBD", "FIXME", "XXX"))
_SENTENCE_BREAKS = (". ", "? ", "! ")
MISSING = (
    "A packet draft needs its packet: after the headers, an empty line, then the sections "
    + ", ".join(f"'## {name}'" for name in SECTIONS)
    + "."
)

USAGE = """\
type: packet
to: <role>
priority: <00-99>
task: <short-stable-task-name, at most 80 characters>

## Objective
One sentence on one line.
## Decisions Made
## Ruled-Out Paths
## Target Scope
## Hard Constraints
## Verification
## If Blocked
(each section non-empty; at most 60 lines and 8 KiB; no placeholder text)
"""


def field(name: str) -> str:
    """A section's argument name (`Ruled-Out Paths` → `ruled_out_paths`), as the agent tool
    interface names them (docs/protocol.md §12)."""
    return name.lower().replace("-", "_").replace(" ", "_")


def compose(texts: dict[str, str]) -> str:
    """A packet from its sections' texts keyed by `field` name, in the contract's order;
    `check` still judges it (an absent section is simply left out, to be reported)."""
    parts = [(name, texts.get(field(name))) for name in SECTIONS]
    bodies = [(name, text.strip("\n")) for name, text in parts if text is not None]
    return "".join(f"## {name}\n{text}\n" for name, text in bodies)


def check(packet: str) -> list[str]:
    """Every problem of a packet (the draft's body), in a stable order; empty if it is good."""
    errors = _size_errors(packet)
    sections, stray = split(packet)
    if stray:
        errors.append(f"Text before '## {SECTIONS[0]}': a packet starts with its sections.")
    errors += _heading_errors(sections)
    for name, lines in sections:
        if name in SECTIONS:
            errors += _section_errors(name, lines)
    return errors


def split(packet: str) -> tuple[list[tuple[str, list[str]]], bool]:
    """The packet's `## ` sections as (name, lines), and whether text precedes the first."""
    sections: list[tuple[str, list[str]]] = []
    stray = False
    for line in packet.split("\n"):
        line = line.rstrip("\r")
        if line.startswith("## "):
            sections.append((line[3:].strip(), []))
        elif sections:
            sections[-1][1].append(line)
        elif line.strip():
            stray = True
    return sections, stray


def _size_errors(packet: str) -> list[str]:
    errors = []
    lines = len(packet.splitlines())
    if lines > MAX_LINES:
        errors.append(f"The packet must be at most {MAX_LINES} lines; got {lines}.")
    size = len(packet.encode("utf-8"))
    if size > MAX_BYTES:
        errors.append(f"The packet must be at most 8 KiB ({MAX_BYTES} bytes); got {size} bytes.")
    return errors


def _heading_errors(sections: list[tuple[str, list[str]]]) -> list[str]:
    """Unknown, duplicate, missing and misplaced sections."""
    names = [name for name, _ in sections]
    errors = [f"Unknown section '## {n}'." for n in names if n not in SECTIONS]
    known = [n for n in names if n in SECTIONS]
    errors += [f"Duplicate section '## {n}'." for i, n in enumerate(known) if n in known[:i]]
    errors += [f"Missing section '## {n}'." for n in SECTIONS if n not in known]
    if not errors and known != list(SECTIONS):
        misplaced = next(n for n, expected in zip(known, SECTIONS, strict=True) if n != expected)
        order = ", ".join(SECTIONS)
        errors.append(f"Section '## {misplaced}' is out of order; the order is {order}.")
    return errors


def _section_errors(name: str, lines: list[str]) -> list[str]:
    text = [line.strip() for line in lines if line.strip()]
    if not text:
        return [f"Section '## {name}' is empty."]
    errors = []
    if name == SECTIONS[0]:
        if len(text) > 1:
            errors.append(f"Section '## {name}' must be one line; got {len(text)}.")
        elif any(mark in text[0] for mark in _SENTENCE_BREAKS):
            errors.append(f"Section '## {name}' must be one sentence.")
    for line in text:
        found = placeholder(line)
        if found:
            errors.append(f"Section '## {name}' holds placeholder text '{found}'.")
    return errors


def placeholder(line: str) -> str | None:
    """The placeholder in a line of text (`TODO`, a `<…>` template bracket, a bare `...`)."""
    if line.strip() in ("...", "…"):
        return line.strip()
    for word in _words(line):
        if word in PLACEHOLDER_WORDS:
            return word
    return _template_bracket(_outside_code(line))


def _words(line: str) -> list[str]:
    cleaned = "".join(char if char.isalnum() else " " for char in line)
    return cleaned.split()


def _outside_code(line: str) -> str:
    """The line without its `inline code` spans: `Vec<u8>` in code is not a template."""
    return "".join(part for index, part in enumerate(line.split("`")) if index % 2 == 0)


def _template_bracket(text: str) -> str | None:
    """A `<name>`-style slot: `<` not glued to a word, then a letter or an ellipsis, no
    angle bracket or URL inside, no space before the `>` (so `a < b > c` passes)."""
    start = text.find("<")
    while start >= 0:
        end = text.find(">", start + 1)
        if end < 0:
            return None
        inner = text[start + 1 : end]
        glued = start > 0 and text[start - 1].isalnum()
        slot = inner[:1].isalpha() or inner[:1] in ("…", ".")
        if not glued and slot and "<" not in inner and not _address(inner) and inner[-1] != " ":
            return text[start : end + 1]
        start = text.find("<", start + 1)
    return None


def _address(inner: str) -> bool:
    """An autolink (`<https://…>`, `<a@b.org>`) is an address, not a slot to fill in."""
    return "://" in inner or "@" in inner
