"""The cards bucket's entries are checked before they are shown (docs/protocol.md §15, "The
cards bucket"): one pure checker, table-tested here without a server; tests/test_remote_hosts.py
runs both views over a real bucket holding such entries."""

from __future__ import annotations

import json
from typing import Any

import pytest

from handoffd.remote import bucket
from handoffd.remote.bucket import check

NOW = 1_800_000_000.0


def card(**changes: Any) -> dict[str, Any]:
    """A card as `status --json` prints it (docs/protocol.md §8), with `changes`."""
    shown: dict[str, Any] = {
        "card": "20260615T140531Z_000042_from_coder@cleaner",
        "id": "20260615T140531Z_000042_from_coder",
        "role": "cleaner", "state": "in_process", "color": "yellow", "detail": "claimed",
        "from": "coder", "to": ["cleaner"], "priority": "50", "type": "note", "task": None,
        "blocked_reason": None,
        "claim": {"role": "cleaner", "agent": "codex", "conversation": "",
                  "heartbeat_at": "2026-06-15T14:05:31Z", "live": True},
        "depends_on": [],
        "latest_report": {"status": "RUNNING", "role": "cleaner",
                          "reported_at": "2026-06-15T14:05:31Z", "excerpt": "on it"},
        "age_s": 12, "path": "/b/wt/cleaner/.swarmforge/handoffs/inbox/in_process/x.handoff",
        "wakes": {"sent": 1, "failed": 0, "last_at": None, "submitted": True},
        "host": "b",
    }  # fmt: skip
    shown.update(changes)
    return shown


def entry(value: object) -> bytes:
    return json.dumps(value).encode()


def test_an_entry_as_a_daemon_puts_it_is_shown_with_its_cards_each_with_the_key_as_host() -> None:
    got = check("b", entry({"host": "b", "at": NOW - 5, "cards": [card(), card(claim=None)]}), NOW)
    assert got.problem is None and got.at == NOW - 5
    assert [c["host"] for c in got.cards] == ["b", "b"]
    assert got.cards[0]["card"].endswith("@cleaner")


def test_an_entry_of_an_older_daemon_without_the_newer_fields_is_still_shown() -> None:
    old = {k: v for k, v in card().items() if k not in ("wakes", "host")}
    assert check("b", entry({"at": NOW, "cards": [old]}), NOW).problem is None


BAD: list[tuple[str, bytes, str]] = [
    ("a NaN at", b'{"at": NaN, "cards": []}', "not JSON"),
    ("an infinite at", b'{"at": Infinity, "cards": []}', "not JSON"),
    ("an at past a float", b'{"at": 1e999, "cards": []}', "'at' is not a finite time"),
    ("an at past a float, as an integer", b'{"at": 1' + b"0" * 400 + b', "cards": []}',
     "'at' is not a finite time"),
    ("a huge at", entry({"at": NOW + 10**9, "cards": []}), "'at' is 1000000000 s ahead"),
    ("an at two minutes ahead", entry({"at": NOW + 120, "cards": []}), "'at' is 120 s ahead"),
    ("an at that is text", entry({"at": "now", "cards": []}), "'at' is not a time"),
    ("an at that is true", entry({"at": True, "cards": []}), "'at' is not a time"),
    ("no at", entry({"cards": []}), "'at' is not a time"),
    ("an empty card", entry({"at": NOW, "cards": [{}]}), "card 1: no 'card'"),
    ("numbers for recipients", entry({"at": NOW, "cards": [card(to=[1, 2])]}),
     "card 1: 'to' is not a list of text"),
    ("a card that is a list", entry({"at": NOW, "cards": [card(), ["x"]]}),
     "card 2: not an object"),
    ("an unknown colour", entry({"at": NOW, "cards": [card(color="purple")]}),
     "card 1: 'color' is not a colour"),
    ("an unknown state", entry({"at": NOW, "cards": [card(state="limbo")]}),
     "card 1: 'state' is not a card state"),
    ("a claim without its role", entry({"at": NOW, "cards": [card(claim={"live": True})]}),
     "card 1: 'claim' is not a claim or null"),
    ("a negative age", entry({"at": NOW, "cards": [card(age_s=-1)]}),
     "card 1: 'age_s' is not a number of seconds or null"),
    ("an age past a float", b'{"at": %d, "cards": [%s]}' % (
        NOW, json.dumps(card(age_s=0)).replace('"age_s": 0', '"age_s": 1e999').encode()),
     "card 1: 'age_s' is not a number of seconds or null"),
    ("wake-ups counted in text", entry({"at": NOW, "cards": [card(wakes={"sent": "1"})]}),
     "card 1: 'wakes' is not the wake-ups object"),
    ("cards that are an object", entry({"at": NOW, "cards": {"a": 1}}), "'cards' is not a list"),
    ("no cards", entry({"at": NOW}), "'cards' is not a list"),
    ("too many cards", entry({"at": NOW, "cards": [card()] * (bucket.CARD_LIMIT + 1)}),
     f"more than {bucket.CARD_LIMIT} cards"),
    ("a list", entry([1, 2]), "not a JSON object"),
    ("a string", entry("hello"), "not a JSON object"),
    ("a number", b"5", "not a JSON object"),
    ("null", b"null", "not a JSON object"),
    ("nothing", b"", "not JSON"),
    ("not JSON", b"{cards", "not JSON"),
    ("bad UTF-8", b'{"at": 1, "cards": ["\xff\xfe"]}', "not UTF-8"),
    ("UTF-16", '{"at": 1, "cards": []}'.encode("utf-16"), "not UTF-8"),
    ("a giant entry", b" " * (bucket.ENTRY_LIMIT + 1), f"larger than {bucket.ENTRY_LIMIT} bytes"),
    ("nested past the parser's depth", b"[" * 200_000 + b"]" * 200_000, "not JSON"),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "why"), [(raw, why) for _, raw, why in BAD],
                         ids=[name for name, _, _ in BAD])  # fmt: skip
def test_an_entry_that_fails_a_check_is_unreadable_with_why_never_cards(
    raw: bytes, why: str
) -> None:
    got = check("c", raw, NOW)
    assert got.problem is not None and got.problem.startswith(why), got.problem
    assert got.cards == [] and got.at is None and got.host == "c"
