"""The .handoff file format (docs/protocol.md §2): headers kept in order, the body byte for byte."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from handoffd import handoff as hf

BODIES = {
    "blank lines inside": "first\n\n\nsecond\n\n",
    "no trailing newline": "no newline at the end",
    "non-ASCII": "Caf\u00e9 na\u00efve \u00fcber \U0001f680 \u2014 \u65e5\u672c\u8a9e\n",
    "CRLF inside": "line one\r\nline two\r\n\r\nend\n",
    "starts with a blank line": "\nafter a blank line\n",
    "empty": "",
    "looks like headers": "from: mallory\npriority: 00\n\nstill body\n",
}


def parse_text(text: str, source: str = "x.handoff") -> hf.Handoff:
    return hf.parse(text.encode("utf-8"), source)


def test_parse_splits_each_header_at_the_first_colon_space() -> None:
    handoff = parse_text("id: 1\nmessage: a: b: c\nempty: \n\nbody\n")
    assert handoff.headers == [("id", "1"), ("message", "a: b: c"), ("empty", "")]
    assert handoff.body == "body\n"


def test_render_then_parse_gives_back_the_same_headers_and_body() -> None:
    original = hf.Handoff([("id", "x"), ("to", "a,b"), ("priority", "05")], "Body.\n")
    again = hf.parse(original.render(), "x")
    assert again.headers == original.headers
    assert again.body == original.body


def test_render_is_header_lines_an_empty_line_then_the_body() -> None:
    handoff = hf.Handoff([("a", "1"), ("b", "2")], "body")
    assert handoff.render() == b"a: 1\nb: 2\n\nbody"


def test_set_replaces_an_existing_header_in_place() -> None:
    handoff = parse_text("a: 1\nb: 2\nc: 3\n\nbody\n")
    handoff.set("b", "two")
    assert handoff.render() == b"a: 1\nb: two\nc: 3\n\nbody\n"


def test_set_inserts_a_new_header_just_before_the_empty_line() -> None:
    handoff = parse_text("a: 1\nb: 2\n\nbody\n")
    handoff.set("dequeued_at", "2026-06-15T14:05:31.482113Z")
    assert handoff.render() == b"a: 1\nb: 2\ndequeued_at: 2026-06-15T14:05:31.482113Z\n\nbody\n"


def test_get_returns_the_first_value_or_the_default() -> None:
    handoff = parse_text("a: 1\na: 2\n\n")
    assert handoff.get("a") == "1"
    assert handoff.get("missing") is None
    assert handoff.get("missing", "dflt") == "dflt"


@pytest.mark.parametrize("body", BODIES.values(), ids=BODIES.keys())
def test_body_survives_parse_set_render_byte_for_byte(body: str) -> None:
    data = b"id: 1\nfrom: coder\n\n" + body.encode("utf-8")
    handoff = hf.parse(data, "x")
    handoff.set("from", "cleaner")
    handoff.set("completed_at", "2026-06-15T14:05:31Z")
    rendered = handoff.render()
    assert (
        rendered == b"id: 1\nfrom: cleaner\ncompleted_at: 2026-06-15T14:05:31Z\n\n" + body.encode()
    )
    assert hf.parse(rendered, "x").body == body


@pytest.mark.parametrize(
    ("data", "complaint"),
    [
        (b"id: 1\n\n\xff\xfe body", "not UTF-8 text"),
        (b"id: 1\nfrom: coder\n", "no header block"),
        (b"just a body, no headers at all", "no header block"),
        (b"\nbody after an empty header block", "no header block"),
        (b"", "no header block"),
        (b"id: 1\nnot a header\n\nbody", "header line 2 is not 'key: value'"),
        (b"id: 1\n: no key\n\nbody", "header line 2 is not 'key: value'"),
    ],
    ids=[
        "not-utf8",
        "no-empty-line",
        "no-headers",
        "empty-header-block",
        "empty",
        "no-sep",
        "no-key",
    ],
)
def test_parse_errors_name_the_file_and_the_problem(data: bytes, complaint: str) -> None:
    with pytest.raises(hf.HandoffError) as caught:
        hf.parse(data, "/some/inbox/new/x.handoff")
    assert str(caught.value).startswith("/some/inbox/new/x.handoff: ")
    assert complaint in str(caught.value)


def test_read_of_a_missing_file_names_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "gone.handoff"
    with pytest.raises(hf.HandoffError, match=re.escape(f"{missing}: cannot read")):
        hf.read(str(missing))


def test_stamp_sets_one_header_in_the_file_and_leaves_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "x.handoff"
    path.write_bytes(b"id: 1\n\nbody\r\nkept")
    hf.stamp(str(path), "dequeued_at", "T")
    assert path.read_bytes() == b"id: 1\ndequeued_at: T\n\nbody\r\nkept"
    assert os.listdir(tmp_path) == ["x.handoff"]


def test_iso_now_is_utc_with_microseconds_and_a_z() -> None:
    assert hf.iso_now(1781532331.482113) == "2026-06-15T14:05:31.482113Z"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", hf.iso_now())


def test_id_stamp_is_the_compact_utc_second() -> None:
    assert hf.id_stamp(1781532331.9) == "20260615T140531Z"


def test_hidden_names_are_not_queue_items() -> None:
    assert hf.is_visible("00_x.handoff")
    assert not hf.is_visible(".00_x.handoff.123.0.tmp")


# --- property ---------------------------------------------------------------------------

keys = st.text(min_size=1).filter(lambda k: "\n" not in k and ": " not in k)
values = st.text().filter(lambda v: "\n" not in v)
header_lists = st.lists(st.tuples(keys, values), min_size=1, max_size=8)


@given(headers=header_lists, body=st.text(), key=keys, value=values)
def test_any_headers_and_body_round_trip_with_the_body_byte_identical(
    headers: list[tuple[str, str]], body: str, key: str, value: str
) -> None:
    rendered = hf.Handoff(list(headers), body).render()
    parsed = hf.parse(rendered, "x")
    assert parsed.headers == headers
    parsed.set(key, value)
    again = parsed.render()
    assert again.endswith(b"\n\n" + body.encode("utf-8"))
    reparsed = hf.parse(again, "x")
    assert reparsed.body == body
    assert reparsed.get(key) == value


def test_name_id_reads_the_id_a_file_name_carries() -> None:
    name = "50_20260615T140531Z_000042_from_architect_to_coder_QA.handoff"
    assert hf.name_id(name) == "20260615T140531Z_000042_from_architect"


def test_name_id_of_an_archived_duplicate_is_the_originals() -> None:
    name = "50_20260615T140531Z_000042_from_architect_to_coder.2.handoff"
    assert hf.name_id(name) == "20260615T140531Z_000042_from_architect"


@pytest.mark.parametrize(
    ("stamp", "seconds"),
    [
        ("2026-06-15T14:05:31Z", 1781532331.0),
        ("2026-06-15T14:05:31.5Z", 1781532331.5),
        ("2026-06-15T14:05:31", 1781532331.0),  # no zone: UTC, whatever the machine's
        ("2026-06-15T16:05:31+02:00", 1781532331.0),
    ],
)
def test_epoch_reads_a_section_2_time(stamp: str, seconds: float) -> None:
    assert hf.epoch(stamp) == seconds


@pytest.mark.parametrize("stamp", ["", "yesterday", "2026-13-01T00:00:00Z"])
def test_epoch_of_what_is_not_a_time_is_none(stamp: str) -> None:
    assert hf.epoch(stamp) is None


def test_iso_from_stamp_spells_an_id_or_report_stamp_as_a_section_2_time() -> None:
    assert hf.iso_from_stamp("20260615T140531Z") == "2026-06-15T14:05:31Z"
    assert hf.iso_from_stamp("20260615T140531.482113Z") == "2026-06-15T14:05:31.482113Z"
    assert hf.iso_from_stamp("not a stamp") == "not a stamp"
    assert hf.epoch(hf.iso_from_stamp(hf.id_stamp(1781532331.0))) == 1781532331.0
