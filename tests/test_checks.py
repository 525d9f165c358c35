"""The checks an outbox entry passes before anything is written (docs/protocol.md §5.1):
`read_entry` on real special files, `inspect` as a pure function."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

import pytest

from handoffd.queue import checks
from tests.daemon_support import handoff_bytes

ROLES = {"coder", "cleaner", "QA"}
NAME = "50_20260101T000000Z_000001_from_coder_to_cleaner_QA.handoff"


def good(to: str = "cleaner,QA", **extra: str) -> bytes:
    return handoff_bytes(NAME, "coder", to, **extra)


def test_inspect_accepts_a_good_handoff_and_lists_recipients_in_order() -> None:
    handoff, recipients = checks.inspect(good(), NAME, "coder", ROLES)
    assert recipients == ["cleaner", "QA"]
    assert handoff.get("from") == "coder"


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (good(body="a\0b"), "NUL"),
        (good() + b"\xc3\x28", "UTF-8"),
        (b"no headers at all", "header"),
        (good(**{"from": "QA"}), "from: QA"),
        (good(to="cleaner,ghost"), "ghost"),
        (good(to="cleaner,QA,cleaner"), "twice"),
        (good(to="cleaner,,QA"), "invalid recipient"),
        (good(to="clean_er"), "invalid recipient"),
        (good(to=""), "to"),
        (handoff_bytes(NAME, "coder", "QA").replace(b"type: note\n", b""), "type"),
        (handoff_bytes(NAME, "coder", "QA").replace(b"id: ", b"ID: "), "id"),
        (good().replace(b"to: cleaner,QA\n", b"to: cleaner\nto: QA\n"), "more than once: to"),
        (good().replace(b"\n", b"\r\n"), "CRLF"),
        (good().replace(b"\n\n", b"\r\n\r\n", 1).replace(b"\n", b"\r\n", 3), "CRLF"),
    ],
    ids=[
        "nul", "utf8", "no-header-block", "spoofed-from", "unknown-recipient", "duplicate",
        "empty-recipient", "underscore-recipient", "empty-to", "missing-type", "missing-id",
        "two-to-headers", "crlf", "crlf-head-only",
    ],
)  # fmt: skip
def test_inspect_refuses_with_a_one_line_reason_that_names_the_problem(
    data: bytes, words: str
) -> None:
    with pytest.raises(checks.Refused) as refused:
        checks.inspect(data, NAME, "coder", ROLES)
    reason = str(refused.value)
    assert words in reason and "\n" not in reason


# Another role's name first, the sender's own after it, as §5.1 once found it anywhere.
FORGED = "00_20260615T140531Z_000042_from_QA_to_cleaner_from_coder_to_cleaner.handoff"
FORGED_DISTINCT = "00_20260615T140531Z_000042_from_QA_to_cleaner_from_coder_to_QA.handoff"


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("note.handoff", "is not of the form"),
        ("50_20260101T000000Z_000001_from_QA_to_cleaner_QA.handoff", "from 'QA'"),
        ("50_20260101T000000Z_000001_from_coder_QA_to_cleaner_QA.handoff", "not of the form"),
        ("50_20260101T000000Z_000001_from_coder_to_cleaner.handoff", "to (cleaner), its"),
        ("50_20260101T000000Z_000001_from_coder_to_QA_cleaner.handoff", "to (QA, cleaner)"),
        (FORGED, "not of the form"),  # cleaner named twice
        (FORGED_DISTINCT, "from 'QA'"),
    ],
    ids=["no-sender", "another-senders-name", "two-senders", "fewer-recipients",
         "recipients-reordered", "forged-recipient-twice", "forged"],
)  # fmt: skip
def test_inspect_refuses_a_name_that_does_not_say_what_its_headers_say(
    name: str, words: str
) -> None:
    """Names are parsed by §2's one rule, never searched (docs/protocol.md §17, "Names are
    parsed"): one sender, the sending role's and the `from` header's, and `to`'s
    recipients.  A name that also spells `_from_coder_to_` later in it is QA's name."""
    with pytest.raises(checks.Refused, match=re.escape(words)):
        checks.inspect(good(), name, "coder", ROLES)


def test_inspect_refuses_a_name_that_hides_the_real_sender_behind_a_forged_one() -> None:
    """The Stop hook's forgery: coder's original, named to say it is from QA first."""
    data = handoff_bytes(FORGED_DISTINCT, "coder", "cleaner,from,coder,to,QA")
    with pytest.raises(checks.Refused, match=r"says it is from 'QA', not from .* 'coder'"):
        checks.inspect(data, FORGED_DISTINCT, "coder", ROLES | {"from", "to"})


def test_read_entry_returns_a_regular_files_bytes_up_to_the_limit(tmp_path: Path) -> None:
    path = tmp_path / NAME
    path.write_bytes(b"x" * checks.MAX_BYTES)
    assert checks.read_entry(str(path)) == b"x" * checks.MAX_BYTES
    path.write_bytes(b"x" * (checks.MAX_BYTES + 1))
    with pytest.raises(checks.Refused, match="limit"):
        checks.read_entry(str(path))


def test_read_entry_refuses_a_symlink_without_following_it(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_bytes(good())
    link = tmp_path / NAME
    link.symlink_to(target)
    with pytest.raises(checks.Refused, match="symbolic link"):
        checks.read_entry(str(link))


def test_read_entry_refuses_a_directory(tmp_path: Path) -> None:
    (tmp_path / NAME).mkdir()
    with pytest.raises(checks.Refused, match="directory"):
        checks.read_entry(str(tmp_path / NAME))


def test_read_entry_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    path = tmp_path / NAME
    os.mkfifo(path)
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            checks.read_entry(str(path))
        except BaseException as error:
            outcome.append(error)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(timeout=5)
    if thread.is_alive():
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))  # let the blocked open go
        pytest.fail("reading a FIFO blocked")
    assert len(outcome) == 1 and isinstance(outcome[0], checks.Refused)
    assert "FIFO" in str(outcome[0])
