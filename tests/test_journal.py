"""The delivery journal: committed or not is decided by its last line alone."""

from __future__ import annotations

from pathlib import Path

from handoffd import journal
from handoffd.journal import Entry


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
