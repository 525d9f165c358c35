"""The history index's files (handoffd/snapshot/indexfile.py): any field makes one line
and comes back as it was; a line not of ours is reported, never believed."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from handoffd.snapshot import indexfile


@given(st.lists(st.text(), min_size=3, max_size=3))
def test_any_fields_make_one_line_and_read_back_as_they_were(fields: list[str]) -> None:
    """Tabs, line feeds, backslashes and names that are not UTF-8 (lone surrogates)."""
    data = indexfile._encode([indexfile.line(*fields)])
    assert data.count(b"\n") == 1 and data.count(b"\t") == 2
    assert indexfile._parse(data, 3) == ([fields], False)


def test_a_torn_or_foreign_line_is_reported_and_the_others_kept() -> None:
    good = indexfile._encode([indexfile.line("a", "b", "c")])
    for bad in (
        b"a\tcaf\xc3\n",
        b"one field\n",
        b"a\tb\tc\td\n",
        b"a\t\\q\tc\n",
        b"\\u12\t\t\n",
        b"a\tb\tc\\\n",
    ):
        assert indexfile._parse(good + bad + good, 3) == ([["a", "b", "c"]] * 2, True), bad


def test_text_after_the_last_line_feed_is_not_yet_a_line_nor_a_wrong_one() -> None:
    good = indexfile._encode([indexfile.line("a", "b", "c")])
    assert indexfile._parse(good + b"an append in fli", 3) == ([["a", "b", "c"]], False)


def test_an_index_file_with_another_name_is_read_as_wrong_and_never_appended_to(
    tmp_path: Path,
) -> None:
    """The history index is appended to in place: a bucket that is a hard link to a file
    outside is not believed (read as wrong, so rebuilt by rename) and an append moves it
    aside and starts the file anew, the outside file untouched."""
    outside = tmp_path / "outside.txt"
    outside.write_bytes(indexfile._encode([indexfile.line("sent/x.handoff", "t", "0")]))
    before = outside.read_bytes()
    os.link(outside, tmp_path / "b-00")
    assert indexfile.read(str(tmp_path / "b-00")) == ([], True)
    indexfile.append(str(tmp_path / "b-00"), [indexfile.line("a", "b", "c")])
    assert outside.read_bytes() == before
    assert indexfile.read(str(tmp_path / "b-00")) == ([["a", "b", "c"]], False)
