"""The .handoff file format (docs/protocol.md §2, §8): names and their parts, the queue-item
test, headers kept in order, the body byte for byte, a header block read leniently, §2 times."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from handoffd.core import handoff as hf

NAME = "07_20260615T140531Z_000042_from_architect_to_coder_cleaner.handoff"

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


# --- names and the queue-item test (moved with them from the scan) -------------------


def test_a_name_parses_into_its_parts_and_id() -> None:
    name = hf.parse_name(NAME)
    assert name is not None
    assert (name.priority, name.timestamp, name.seq) == ("07", "20260615T140531Z", "000042")
    assert (name.sender, name.recipients) == ("architect", ["coder", "cleaner"])
    assert name.id == "20260615T140531Z_000042_from_architect"


def test_an_archived_duplicate_name_parses_as_its_original() -> None:
    name = hf.parse_name(NAME.replace(".handoff", ".2.handoff"))
    assert name is not None and name.recipients == ["coder", "cleaner"]


def test_names_not_in_the_form_do_not_parse() -> None:
    for bad in ("notes.txt", NAME + "~", "x.handoff", NAME.replace("_from_", "_by_"),
                NAME.replace("07_", "7_"), NAME.replace("_to_coder_cleaner", "_to_"),
                NAME.replace("_architect_", "_architect_QA_"),  # two words for one sender
                NAME.replace("_cleaner", "_cleaner_coder")):  # a recipient twice  # fmt: skip
        assert hf.parse_name(bad) is None, bad


def test_a_name_is_parsed_by_position_never_searched_for_a_sender() -> None:
    """One sender, the fifth field; every field after `to` a recipient (docs/protocol.md
    §2): a name that spells a second `_from_x_to_` names recipients, never that sender;
    roles named `from` and `to` parse as any others."""
    forged = NAME.replace("_to_coder_cleaner", "_to_coder_from_helper_to_cleaner")
    parts = hf.parse_name(forged)
    assert parts is not None and parts.sender == "architect"
    assert parts.recipients == ["coder", "from", "helper", "to", "cleaner"]
    to = hf.parse_name("50_20260101T000000Z_000001_from_to_to_from.handoff")
    assert to is not None and (to.sender, to.recipients) == ("to", ["from"])
    assert hf.name_id("50_20260101T000000Z_000001_from_to_to_from.handoff") == to.id


def test_a_sender_is_checked_where_name_and_from_header_agree() -> None:
    assert hf.checked_sender(NAME, "architect") == "architect"
    assert hf.checked_sender(NAME, "helper") is None  # the name says another
    assert hf.checked_sender(NAME, None) is None and hf.checked_sender("x.handoff", "a") is None
    assert hf.misnamed(NAME, "architect", ["coder", "cleaner"]) is None
    assert "from 'architect'" in (hf.misnamed(NAME, "helper", ["coder", "cleaner"]) or "")
    assert "(coder, cleaner)" in (hf.misnamed(NAME, "architect", ["coder"]) or "")


def test_an_id_names_its_sender_only_in_the_section_2_form() -> None:
    assert hf.id_sender("20260615T140531Z_000042_from_architect") == "architect"
    for bad in ("manual-1", "x_from_a", "20260615T140531Z_000042_from_a_from_b",
                "20260615T140531Z_000042_from_a_b", "20260615T140531Z_42_from_a"):  # fmt: skip
        assert hf.id_sender(bad) is None, bad


def test_only_visible_handoff_names_are_queue_items() -> None:
    assert hf.is_item(NAME)
    assert not hf.is_item(NAME + "~") and not hf.is_item("." + NAME)
    assert not hf.is_item("notes.txt")


def test_the_header_block_is_read_without_the_body(tmp_path: Path) -> None:
    path = tmp_path / "x.handoff"
    # A body far larger than the header limit, and not UTF-8: reading it would fail.
    path.write_bytes(b"id: a\nto: b\n\n" + b"\xff" * (hf.HEADER_LIMIT * 4))
    assert hf.read_headers(str(path)) == {"id": "a", "to": "b"}


def test_an_empty_line_split_across_two_chunks_ends_the_block(tmp_path: Path) -> None:
    path = tmp_path / "x.handoff"
    head = b"k: " + b"v" * (hf.CHUNK - 4) + b"\n"  # the first \n is a chunk's last byte
    path.write_bytes(head + b"\nbody: not a header\n")
    assert hf.read_headers(str(path)) == {"k": "v" * (hf.CHUNK - 4)}


def test_a_broken_header_block_yields_what_can_be_read() -> None:
    assert hf.parse_headers(b"id: a\nnonsense\n\xff: x\nid: second\n\nbody") == {
        "id": "a",
        "\ufffd": "x",
    }


@pytest.mark.parametrize(
    "stamp",
    ["2026-06-15T14:05:31.482113Z", "1970-01-01T00:00:00Z", "2000-02-29T23:59:59.5Z",
     "2100-03-01T00:00:00Z", "1969-12-31T23:59:59Z"],
)  # fmt: skip
def test_epoch_agrees_with_datetime(stamp: str) -> None:
    from datetime import datetime

    assert hf.epoch(stamp) == datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


@given(st.floats(min_value=-6e10, max_value=2.5e11), st.integers(0, 9))
def test_the_section_2_form_is_read_by_hand_to_the_bit_as_datetime_reads_it(
    when: float, digits: int
) -> None:
    """The hand-written reader (helpers read a time on every call) and `datetime` agree on
    every §2 time, whatever its fraction (datetime cuts past six digits)."""
    from datetime import UTC, datetime

    stamp = hf.iso_now(when)
    stamp = stamp[:20] + (stamp[20:26] + "123")[:digits] + "Z" if digits else stamp[:19] + "Z"
    try:
        expected = datetime.fromisoformat(stamp).replace(tzinfo=UTC).timestamp()
    except ValueError:  # a year before 1000 spells short: not a time at all
        expected = None
    assert hf.epoch(stamp) == expected


@given(st.text(alphabet="0123456789-T:.Z+ ", max_size=30))
def test_any_text_is_a_time_exactly_when_datetime_reads_one(text: str) -> None:
    """One failure convention: what is not a time is None, never a number or an error."""
    from datetime import UTC, datetime

    try:
        moment = datetime.fromisoformat(text)
        expected = (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
    except ValueError:
        expected = None
    assert hf.epoch(text) == (expected if text else None)


def test_a_time_is_shown_to_the_minute_and_what_is_not_one_as_it_is() -> None:
    assert hf.short_time("2026-06-15T14:05:31.482113Z") == "2026-06-15 14:05Z"
    assert hf.short_time("2026-06-15T16:05:31+02:00") == "2026-06-15 14:05Z"
    assert hf.short_time("") == "" and hf.short_time("soon") == "soon"


def test_a_link_or_a_folder_with_an_items_name_is_no_item(tmp_path: Path) -> None:
    (tmp_path / NAME).write_text("id: a\n\n")
    os.symlink(tmp_path / NAME, tmp_path / ("5" + NAME[1:]))
    (tmp_path / ("6" + NAME[1:])).mkdir()
    with os.scandir(tmp_path) as entries:
        items = sorted(e.name for e in entries if hf.is_item_entry(e))
    assert items == [NAME]


def test_a_broken_file_splits_leniently_into_the_lines_it_has_and_its_body() -> None:
    assert hf.split_lenient("id: a\nnonsense\nid: b\n\nbody\n\nmore") == (
        [("id", "a"), ("id", "b")],
        "body\n\nmore",
    )
    assert hf.split_lenient("no header block at all") == ([], "no header block at all")


def test_a_fifo_where_a_header_block_should_be_is_refused_without_waiting(tmp_path: Path) -> None:
    """The one reader of header blocks is the careful one: a FIFO is never opened (it would
    wait for a writer for ever)."""
    from handoffd.core import safeio

    fifo = tmp_path / NAME
    os.mkfifo(fifo)
    with pytest.raises(safeio.NotRegular):
        hf.read_headers(str(fifo))


# --- one owner of the format ----------------------------------------------------------------

REPO = Path(__file__).resolve().parent.parent


def spelled_parts(path: Path) -> list[str]:
    """Where a module's strings (docstrings and f-strings' parts too) spell a name's
    `_from_` or `_to_`: `line: text`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        text = node.value if isinstance(node, ast.Constant) else None
        if isinstance(text, str) and (hf.FROM in text or hf.TO in text):
            found.append(f"{node.lineno}: {text[:60]!r}")
    return found


def test_no_module_but_the_format_spells_the_parts_of_a_name() -> None:
    """Composing and slicing names and ids is `handoffd.core.handoff`'s alone (docs/protocol.md
    §2): the package, the test bed and the benchmark call it, so a change to the form is
    one module's change."""
    owner = REPO / "handoffd" / "core" / "handoff.py"
    spelled = {
        str(path.relative_to(REPO)): parts
        for folder in ("handoffd", "testbed", "benchmarks")
        for path in sorted((REPO / folder).rglob("*.py"))
        if path != owner and (parts := spelled_parts(path))
    }
    assert spelled == {}


def test_a_composed_name_parses_back_to_its_parts() -> None:
    ident = hf.compose_id("20260615T140531Z", 42, "architect")
    name = hf.compose_name("07", ident, ["coder", "cleaner"])
    assert name == NAME
    parts = hf.parse_name(name)
    assert parts is not None and (parts.id, parts.recipients) == (ident, ["coder", "cleaner"])
    assert (hf.id_sender(ident), hf.id_stamp_of(ident)) == ("architect", "20260615T140531Z")
    assert hf.id_sender("manual-1") is None
    assert hf.id_mark(ident) in name and hf.order_key(name) == f"{ident[:23]}/{name}"
    assert hf.comma_list(" a, ,b ") == ["a", "b"] and hf.list_parts(" a, ,b ") == ["a", "", "b"]


@pytest.mark.parametrize(
    ("name", "split"),
    [
        ("50_20260101T000000000000Z_000001_from_a_to_b.handoff", None),
        ("50_20260101T000000000000Z_000001_from_a_to_b.2.handoff", "2"),
        ("50_20260101T000000000000Z_000001_from_a_to_b.$(x).handoff", "$(x)"),
        ("50_20260101T000000000000Z_000001_from_a_to_b..handoff", ""),
    ],
)
def test_a_copy_number_is_split_from_the_name_it_was_added_to(name: str, split: str | None) -> None:
    """One owner for the `….2.handoff` tail an archive or an arrival adds: the name it
    arrived under, and the tail as found (a peer's own tail is said, never taken for none)."""
    assert hf.split_copy(name) == ("50_20260101T000000000000Z_000001_from_a_to_b.handoff", split)


def test_a_reopen_keeps_the_life_it_ends_and_a_hand_edited_count_is_not_believed() -> None:
    copy = hf.Handoff([("enqueued_at", "2026-01-01T00:00:00Z"),
                       ("dequeued_at", "2026-01-01T00:01:00Z"),
                       ("completed_at", "2026-01-01T00:11:00.5Z")], "")  # fmt: skip
    assert hf.life_spans(copy) == "60.000/600.500"
    copy.set("reopened_spans", "60.000/600.500")
    copy.set("reopened_at", "2026-01-01T01:00:00Z")
    copy.set("dequeued_at", "2026-01-01T01:00:30Z")
    copy.headers = [h for h in copy.headers if h[0] != "completed_at"]
    assert hf.life_spans(copy) == "60.000/600.500,30.000/-"  # its wait from the reopen
    assert hf.spans("1/2,x,nan/inf,-/3,1e99/-1") == [(1.0, 2.0), (None, None), (None, 3.0),
                                                     (None, None)]  # fmt: skip
    assert len(hf.spans(",".join(["1/1"] * 500))) == hf.SPANS_KEPT
    assert hf.reopen_count("3", None) == 3 and hf.reopen_count(None, "2026-01-01T00:00:00Z") == 1
    assert hf.reopen_count("9" * 40, "x") == 1 and hf.reopen_count("-2", None) == 0
