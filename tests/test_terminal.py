"""The one escape every terminal view sends text from files through (docs/protocol.md,
Part II "Hostile files"): pure, so table-tested without a terminal."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from handoffd.core import terminal


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("X\033[2K\033[1G\033[32mGREEN", "X\\x1b[2K\\x1b[1G\\x1b[32mGREEN"),  # erase, redraw
        ("\033]0;title\007", "\\x1b]0;title\\x07"),  # the window's title
        ("a\rb\nc\td", "a\\rb\\nc\\td"),  # line breaks and tabs of a file tear a row
        ("nul\x00del\x7f", "nul\\x00del\\x7f"),
        ("\x9b2J\x85", "\\x9b2J\\x85"),  # C1: CSI and NEL as single characters
        ("abc\u202etxt.exe", "abc\\u202etxt.exe"),  # a right-to-left override
        ("\u2066x\u2069\u200f\u061c", "\\u2066x\\u2069\\u200f\\u061c"),  # isolates, marks
        ("line\u2028sep", "line\\u2028sep"),
        ("bytes\udcff", "bytes\\udcff"),  # a name that is not UTF-8, as os decodes it
    ],
)
def test_each_control_character_is_shown_as_its_escape(raw: str, shown: str) -> None:
    assert terminal.escape(raw) == shown
    assert terminal.has_control(raw)


@pytest.mark.parametrize(
    "text", ["plain", "é ü ß — “quoted” …", "日本語", "emoji 👩‍💻 zwj", "nbsp\xa0here", ""]
)
def test_printable_text_is_left_exactly_as_it_is(text: str) -> None:
    assert terminal.escape(text) == text
    assert not terminal.has_control(text)


@given(st.text())
def test_the_escaped_text_holds_no_control_character_at_all(text: str) -> None:
    assert not terminal.has_control(terminal.escape(text))


@given(st.dictionaries(st.text(), st.text()))
def test_json_keeps_its_data_and_loses_the_raw_controls(data: dict[str, str]) -> None:
    text = terminal.escape_json(json.dumps(data, ensure_ascii=False))
    assert json.loads(text) == data
    assert not terminal.has_control(text.replace("\n", ""))
