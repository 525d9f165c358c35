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
