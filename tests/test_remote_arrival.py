"""What a message from the stream is (docs/protocol.md §15, "Poison messages"), decided
before anything is written: the pure part of receiving, without a server.  The real
daemon against a hostile peer is tests/test_remote_receive.py."""

from __future__ import annotations

import pytest

from handoffd.core import handoff as hf
from handoffd.core import limits
from handoffd.remote import arrival
from handoffd.remote.arrival import Refused, classify, same_copy
from tests.test_remote_receive import copy

HERE = {"cleaner", "qa"}


def test_a_copy_for_a_role_of_this_host_is_one_to_write() -> None:
    name, data = copy(1)
    got = classify("cleaner", name, data, HERE)
    assert got is not None and (got.role, got.name, got.data) == ("cleaner", name, data)
    renamed = name.replace(".handoff", ".2.handoff")  # an original archived under a number
    assert classify("cleaner", renamed, data, HERE) is not None


def test_a_message_for_a_role_not_on_this_host_now_is_left_for_its_host() -> None:
    name, data = copy(1, role="coder")
    assert classify("coder", name, data, HERE) is None


def test_a_copy_for_several_roles_is_one_whose_other_recipients_this_host_does_not_know() -> None:
    name, data = copy(1, role="cleaner")
    data = data.replace(b"to: cleaner\n", b"to: cleaner,newcomer\n")
    name = name.replace("_to_cleaner", "_to_cleaner_newcomer")  # as its sender named it
    assert classify("cleaner", name, data, HERE) is not None


def test_a_copy_whose_name_says_other_than_its_headers_is_refused() -> None:
    """Names are parsed by §2's one rule (docs/protocol.md §17): a name naming fewer
    recipients than `to`, or another sender first, is a poison message."""
    name, data = copy(1, role="cleaner")
    wider = data.replace(b"to: cleaner\n", b"to: cleaner,newcomer\n")
    with pytest.raises(Refused, match="addressed to"):
        classify("cleaner", name, wider, HERE)
    forged = name.replace("_from_coder_to_cleaner", "_from_boss_to_cleaner_from_coder_to_qa")
    with pytest.raises(Refused):
        classify("cleaner", forged, data, HERE)


@pytest.mark.parametrize("subject_role", [None, "", "bad_name", "-x"])
def test_a_subject_that_is_no_roles_inbox_is_refused(subject_role: str | None) -> None:
    name, data = copy(1)
    with pytest.raises(Refused, match="its subject names no role's inbox"):
        classify(subject_role, name, data, HERE)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        (None, "no Handoffd-Name header"),
        ("", "no Handoffd-Name header"),
        ("50_x.handoff\u202e", "a control character in its name"),
        ("a/b.handoff", "its name is not a queue file's name"),
        (".50_20261201T120000Z_000001_from_coder_to_cleaner.handoff", "not a queue file's"),
        ("50_20261201T120000Z_000001_from_coder_to_cleaner.txt", "not a queue file's"),
        ("5" * 256 + ".handoff", "a name longer than 255 bytes"),
        (
            "50_20261201T120000Z_000001_from_coder_to_cleaner.$(touch x).handoff",
            "a tail that is no copy number",
        ),
        (
            "50_20261201T120000Z_000001_from_coder_to_cleaner.\u00b2.handoff",
            "a tail that is no copy number",
        ),
    ],
)
def test_a_name_no_copy_here_can_have_is_refused(name: str | None, why: str) -> None:
    with pytest.raises(Refused, match=why):
        classify("cleaner", name, copy(1)[1], HERE)


def taken(data: bytes, *changes: tuple[str, str | None]) -> bytes:
    """`data` as the recipient's helpers leave it: headers set (or dropped, with None)."""
    handoff = hf.parse(data, "x")
    for key, value in changes:
        if value is None:
            handoff.headers = handoff.without(key)
        else:
            handoff.set(key, value)
    return handoff.render()


def test_the_copy_in_the_inbox_is_the_arriving_one_however_its_recipient_moved_it_on() -> None:
    name, data = copy(1, blocked_reason="waits on QA")
    arrived = classify("cleaner", name, data, HERE)
    assert arrived is not None
    for there in (
        data,
        taken(data, ("dequeued_at", "2026-12-01T12:01:00Z")),
        taken(data, ("blocked_reason", None), ("completed_at", "2026-12-01T12:02:00Z")),
        taken(data, ("released_at", "2026-12-01T12:01:00Z"), ("blocked_reason", "other")),
        taken(data, ("enqueued_at", "2026-12-01T12:09:00Z")),  # stamped anew by its sender
    ):
        assert same_copy(there, arrived)


def test_a_copy_differing_in_a_header_its_sender_wrote_or_its_body_is_another() -> None:
    name, data = copy(1)
    arrived = classify("cleaner", name, data, HERE)
    assert arrived is not None
    assert not same_copy(copy(1, message="junk")[1], arrived)
    assert not same_copy(taken(data, ("priority", "10")), arrived)
    assert not same_copy(data.replace(b"hello\n", b"hello!\n"), arrived)
    assert not same_copy(b"not a handoff", arrived)


def test_a_deferred_message_waits_twice_as_long_each_time_up_to_a_minute() -> None:
    assert [arrival.retry_in(n) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 4.0]
    assert arrival.retry_in(50) == limits.LAST_RETRY == 60.0
