"""The delivery journal: committed or not is decided by its last line and its token."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from handoffd.delivery import journal
from handoffd.delivery.journal import Entry


def entry(n: int = 1) -> Entry:
    return Entry(
        "coder",
        f"/w/coder/outbox/{n}.handoff",
        (64769, 1000 + n),
        "/w/coder/sent",
        [(f"/w/qa/new/.{n}.handoff.1.0.tmp", f"/w/qa/new/{n}.handoff")],
        ["QA"],
    )


def fields(e: Entry) -> tuple[object, ...]:
    return (e.sender, e.original, e.identity, e.sent, e.copies, e.recipients)


def test_a_committed_journal_loads_back_every_entry_unchanged(tmp_path: Path) -> None:
    path = str(tmp_path / "handoffd.journal")
    entries = [entry(1), entry(2)]
    journal.commit(path, entries)
    loaded = journal.load(path)
    assert loaded is not None
    assert [fields(e) for e in loaded] == [fields(e) for e in entries]


def test_a_journal_torn_before_its_commit_line_reads_as_uncommitted(tmp_path: Path) -> None:
    path = tmp_path / "handoffd.journal"
    journal.commit(str(path), [entry(1), entry(2)])
    text = path.read_text()
    for cut in (len(text) - 1, len(text) - len("commit\n"), len(text) // 2, 0):
        path.write_text(text[:cut])
        assert journal.load(str(path)) is None, cut


def test_no_journal_reads_as_uncommitted_and_clear_is_idempotent(tmp_path: Path) -> None:
    path = str(tmp_path / "handoffd.journal")
    assert journal.load(path) is None
    journal.commit(path, [entry()])
    journal.clear(path)
    journal.clear(path)
    assert journal.load(path) is None


def test_committing_again_replaces_an_earlier_journal(tmp_path: Path) -> None:
    path = str(tmp_path / "handoffd.journal")
    journal.commit(path, [entry(1)])
    journal.commit(path, [entry(2)])
    loaded = journal.load(path)
    assert loaded is not None and [e.original for e in loaded] == [entry(2).original]


def test_new_lines_torn_over_an_old_journals_tail_read_as_uncommitted(tmp_path: Path) -> None:
    """The journal is rewritten in place; a power cut can leave the new commit's first
    lines over the old commit's tail, commit line included: that is no commit."""
    path = tmp_path / "handoffd.journal"
    journal.commit(str(path), [entry(1), entry(2), entry(3)])
    old = path.read_text()
    journal.commit(str(path), [entry(4)])
    new_first_line = path.read_text().split("\n")[0] + "\n"
    path.write_text(new_first_line + old[len(new_first_line) :])
    assert journal.load(str(path)) is None


def test_clearing_empties_the_journal_and_keeps_the_file(tmp_path: Path) -> None:
    """Kept from pass to pass, so a commit costs one flush, not two (file and folder)."""
    path = tmp_path / "handoffd.journal"
    journal.commit(str(path), [entry()])
    journal.clear(str(path))
    assert path.read_text() == "" and journal.load(str(path)) is None


def test_a_rewrite_whose_truncate_was_lost_reads_as_no_commit_never_as_corrupt(
    tmp_path: Path,
) -> None:
    """A power cut can lose the truncates that emptied the journal and began the next
    commit while keeping that commit's bytes: a shorter new journal, commit line and all,
    over an old one's tail.  The old pass had finished and the new one never committed:
    that is no commit, and calling it corrupt would tell a person the disk is damaged."""
    path = tmp_path / "handoffd.journal"
    journal.commit(str(path), [entry(1), entry(2), entry(3)])
    old = path.read_bytes()
    journal.commit(str(path), [entry(4)])
    new = path.read_bytes()
    assert len(new) < len(old)
    for kept in (len(new), len(new) // 2):  # all of the new bytes, or their first half
        path.write_bytes(new[:kept] + old[kept:])
        assert journal.load(str(path)) is None, kept
    path.write_bytes(new + b"\0" * 100 + old[len(new) + 100 :])  # a hole where a block was
    assert journal.load(str(path)) is None


def test_a_stale_journal_whose_clear_was_lost_reads_back_whole(tmp_path: Path) -> None:
    """Its pass finished: replaying it is a no-op, so it may read as committed."""
    path = tmp_path / "handoffd.journal"
    journal.commit(str(path), [entry(1)])
    loaded = journal.load(str(path))
    assert loaded is not None and [fields(e) for e in loaded] == [fields(entry(1))]


def test_a_garbled_line_of_the_commit_itself_is_corrupt(tmp_path: Path) -> None:
    """Damage no torn rewrite makes: a line carrying the commit's own token that does not
    read back."""
    path = tmp_path / "handoffd.journal"
    journal.commit(str(path), [entry(1), entry(2)])
    lines = path.read_text().split("\n")
    lines[1] = lines[1][:40] + "\0\0" + lines[1][42:]
    path.write_text("\n".join(lines))
    with pytest.raises(journal.Corrupt):
        journal.load(str(path))


def test_a_line_nested_past_the_parsers_depth_is_corrupt(tmp_path: Path) -> None:
    """A journal planted with the commit's token on a line of 50 000 nested lists: the
    parser raises RecursionError, not ValueError, and the daemon could not start at all
    (docs/protocol.md Part II: a corrupt journal is set aside and delivery goes on)."""
    path = tmp_path / "handoffd.journal"
    deep = "[" * 50_000 + "]" * 50_000
    path.write_text(f'{{"token": "0123abcd", "x": {deep}}}\ncommit 0123abcd\n')
    with pytest.raises(journal.Corrupt, match="nested too deep"):
        journal.load(str(path))


def test_a_hard_link_at_the_journal_is_moved_aside_never_emptied_or_written(
    tmp_path: Path,
) -> None:
    """The journal is rewritten in place, and emptied when a pass ends: a hard link planted
    in its place to a file outside (docs/protocol.md §15, Part III) would be emptied, then
    hold our lines.  It is moved aside instead, and a journal of our own started."""
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"precious\n")
    path = tmp_path / "handoffd.journal"
    os.link(outside, path)
    assert journal.commit(str(path), [entry(1)]) == str(tmp_path / "handoffd.journal.linked")
    assert outside.read_bytes() == b"precious\n"
    assert [fields(e) for e in journal.load(str(path)) or []] == [fields(entry(1))]
    path.unlink()
    os.link(outside, path)
    assert journal.clear(str(path)) == str(tmp_path / "handoffd.journal.2.linked")
    assert outside.read_bytes() == b"precious\n" and path.read_bytes() == b""
