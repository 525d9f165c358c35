"""What a report says it will do or has decided, and whether anything shows it was done.

Pure (docs/protocol.md §11): sentences are cut from a report's Markdown and quoted
verbatim, never rephrased; the evidence rule is a function of facts gathered elsewhere
(commit dates from git, handoff times from the queue).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

MIN_CHARS = 25
MAX_CHARS = 240

# `\u2019` is the typographic apostrophe editors put in `I'll`.
WOULD = re.compile("\\b(?:I['\u2019]ll|I will|going to|next I|plan to)\\b", re.IGNORECASE)
DECIDED = re.compile(r"\b(?:decided|chose|going with)\b", re.IGNORECASE)

# A line that opens a block of its own: a list item, heading or quote.  Its marker is
# not part of the sentence.
_BLOCK_START = re.compile(r"^\s*(?:[-*+]\s+|\d+[.)]\s+|#{1,6}\s+|>\s?)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_FENCE = re.compile(r"^\s*(?:```|~~~)")
_HEADING = re.compile(r"^\s*#{1,6}\s")


def blocks(text: str) -> Iterator[str]:
    """Paragraphs and list items, each joined onto one line; fenced code is skipped
    (commands are not sentences)."""
    current: list[str] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            line = ""
        if fenced or not line.strip() or _BLOCK_START.match(line):
            if current:
                yield " ".join(current)
            current = []
        if not fenced and line.strip():
            current.append(_BLOCK_START.sub("", line, count=1).strip())
        if _HEADING.match(line):  # a heading is one line, never joined to the next
            yield from current
            current = []
    if current:
        yield " ".join(current)


def sentences(text: str) -> Iterator[str]:
    """Every sentence of a Markdown text, split after `.`, `!` or `?` and whitespace."""
    for block in blocks(text):
        for sentence in _SENTENCE_END.split(block):
            if sentence.strip():
                yield sentence.strip()


def quotable(sentence: str) -> bool:
    """Within the 25 to 240 character window: long enough to mean something, short enough
    to quote whole."""
    return MIN_CHARS <= len(sentence) <= MAX_CHARS


def intentions(text: str) -> list[str]:
    """Sentences that state an intention (`I'll`, `I will`, `going to`, `next I`, `plan to`)."""
    return [s for s in sentences(text) if quotable(s) and WOULD.search(s)]


def decisions(text: str) -> list[str]:
    """Sentences that state a choice (`decided`, `chose`, `going with`)."""
    return [s for s in sentences(text) if quotable(s) and DECIDED.search(s)]


def no_evidence(reported_at: float, last_commit_at: float | None, sent: Iterable[float]) -> bool:
    """True when nothing after the report shows the work was done: no commit reachable
    from the reporting role's worktree HEAD with a later committer date, and no later
    handoff sent by that role."""
    if last_commit_at is not None and last_commit_at > reported_at:
        return False
    return not any(when > reported_at for when in sent)
