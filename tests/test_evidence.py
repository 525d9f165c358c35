"""Sentences a report says it would do or decided, and the evidence rule (docs/protocol.md §11)."""

from __future__ import annotations

from handoffd.digest import evidence

REPORT = """\
## Status
Parser slice three is merged into the cleaner branch. I'll re-run the export once the
schema lands. Tests pass!

- I decided to keep the old tokenizer for one more slice.
- Next I wire the lexer into the CLI entry point.
- ok I'll go

```sh
# I will not be quoted because this is code in a fence
```
> We chose SQLite over a flat file for the index.
"""


def test_sentences_are_split_after_punctuation_and_joined_across_wrapped_lines():
    assert list(evidence.sentences(REPORT))[:4] == [
        "Status",
        "Parser slice three is merged into the cleaner branch.",
        "I'll re-run the export once the schema lands.",
        "Tests pass!",
    ]


def test_list_items_and_quotes_are_sentences_without_their_markers():
    found = list(evidence.sentences(REPORT))
    assert "I decided to keep the old tokenizer for one more slice." in found
    assert "We chose SQLite over a flat file for the index." in found


def test_fenced_code_is_never_a_sentence():
    assert not any("fence" in s for s in evidence.sentences(REPORT))


def test_intentions_are_quoted_verbatim_within_the_length_window():
    assert evidence.intentions(REPORT) == [
        "I'll re-run the export once the schema lands.",
        "Next I wire the lexer into the CLI entry point.",
    ]  # "ok I'll go" is under 25 characters


def test_each_intention_phrase_is_recognised():
    for phrase in ("I'll", "I will", "going to", "next I", "plan to", "I\u2019ll"):
        text = f"Tomorrow {phrase} rewrite the parser for speed."
        assert evidence.intentions(text) == [text], phrase


def test_phrases_match_whole_words_only():
    assert evidence.intentions("The ongoing tokenizer work is unplanned today.") == []
    assert evidence.decisions("The format is still undecided and chosen later.") == []


def test_decisions_are_quoted_verbatim():
    assert evidence.decisions(REPORT) == [
        "I decided to keep the old tokenizer for one more slice.",
        "We chose SQLite over a flat file for the index.",
    ]
    assert evidence.decisions("We are going with the batch receive mode here.") == [
        "We are going with the batch receive mode here."
    ]


def test_the_length_window_is_inclusive_at_25_and_240():
    short = "I'll do it " + "x" * 13 + "."
    assert len(short) == 25 and evidence.intentions(short) == [short]
    assert evidence.intentions(short[1:]) == []
    long = "I'll " + "y" * 234 + "."
    assert len(long) == 240 and evidence.intentions(long) == [long]
    assert evidence.intentions("I'll " + "y" * 235 + ".") == []


def test_a_promise_with_no_later_commit_and_no_later_handoff_has_no_evidence():
    assert evidence.no_evidence(100.0, last_commit_at=90.0, sent=[50.0, 99.0])
    assert evidence.no_evidence(100.0, last_commit_at=None, sent=[])


def test_a_later_commit_is_evidence():
    assert not evidence.no_evidence(100.0, last_commit_at=101.0, sent=[])


def test_a_later_handoff_sent_by_the_role_is_evidence():
    assert not evidence.no_evidence(100.0, last_commit_at=None, sent=[20.0, 100.5])


def test_a_commit_at_the_same_second_is_not_later():
    assert evidence.no_evidence(100.0, last_commit_at=100.0, sent=[100.0])
