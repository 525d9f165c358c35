"""One board across hosts (docs/protocol.md §15): each daemon's cards in the bucket, and
`status --all-hosts` / `web --all-hosts` showing every host's, naming a stale host."""

from __future__ import annotations

import json
import time
from pathlib import Path

from handoffd.board import hosts as shared
from handoffd.remote import link, settings
from tests.conftest import wait_for
from tests.nats_support import Host, handoffd, hosts_fixture, nats_fixture
from tests.test_remote_delivery import send_note

nats_server = nats_fixture()


hosts = hosts_fixture()


def all_hosts(host: Host) -> list[dict[str, object]]:
    done = handoffd("status", "--all-hosts", "--json", str(host.root))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def put_entry(network: settings.Network, host: str, at: float) -> None:
    async def work(nc: object) -> None:
        kv = await nc.jetstream().key_value(network.bucket)  # type: ignore[attr-defined]
        await kv.put(host, shared.encode({"host": host, "at": at, "cards": []}))

    link.once(network, work)


def test_the_board_from_either_host_shows_both_hosts_cards_each_with_its_host(
    hosts: list[Host],
) -> None:
    a, b = hosts
    a.start()
    b.start()
    to_b = send_note(a, "coder", "cleaner", "for b")
    to_a = send_note(b, "cleaner", "coder", "for a")
    wanted = {(f"{to_b.split('_', 1)[1].split('_to_')[0]}@cleaner", "b"),
              (f"{to_a.split('_', 1)[1].split('_to_')[0]}@coder", "a")}  # fmt: skip
    for host in (a, b):
        seen = lambda host=host: {(c["card"], c["host"]) for c in all_hosts(host)} >= wanted  # noqa: E731
        wait_for(seen, timeout=20, what=f"both hosts' cards from host {host.name}")
    text = handoffd("status", "--all-hosts", str(a.root))
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[1].split()[:2] == ["STATUS", "HOST"]
    assert any(line.split()[1] == "b" and "@cleaner" in line for line in lines[2:])
    assert "last seen" not in text.stdout


def test_a_host_whose_entry_is_older_than_30_s_is_named_with_when_it_was_last_seen(
    hosts: list[Host],
) -> None:
    a, _ = hosts
    network = settings.load(str(a.root))
    assert network is not None
    put_entry(network, "c", time.time() - 125)
    text = handoffd("status", "--all-hosts", str(a.root))
    assert text.returncode == 0, text.stderr
    assert "host c: last seen 2m ago" in text.stdout.splitlines()[1:3]
    as_json = handoffd("status", "--all-hosts", "--json", str(a.root))
    assert "host c: last seen 2m ago" in as_json.stderr


def test_all_hosts_honours_all_this_hosts_finished_cards_and_says_the_others_share_open_only(
    hosts: list[Host],
) -> None:
    """docs/protocol.md §15: `--all` adds this host's green cards, read from its own disk;
    the bucket holds every host's open cards only, and the board says so."""
    a, _ = hosts
    network = settings.load(str(a.root))
    assert network is not None
    put_entry(network, "b", time.time())
    done = (
        a.box("coder", "inbox/completed") / "50_20260101T000000Z_000001_from_coder_to_coder.handoff"
    )
    done.parent.mkdir(parents=True, exist_ok=True)
    fields = "from: coder\nto: coder\ntype: note\npriority: 50\ncompleted_at: 2026-01-01T00:00:00Z"
    done.write_text(f"id: 20260101T000000Z_000001_from_coder\n{fields}\n\nb\n")
    card = "20260101T000000Z_000001_from_coder@coder"
    plain = handoffd("status", "--all-hosts", str(a.root))
    assert card not in plain.stdout and plain.stdout.splitlines()[0].endswith(" 0 open cards")
    every = handoffd("status", "--all-hosts", "--all", str(a.root))
    assert every.returncode == 0, every.stderr
    lines = every.stdout.splitlines()
    assert lines[0].endswith(" 1 card") and shared.ONLY_OPEN in lines
    assert any(line.startswith("GREEN") and card in line for line in lines)
    as_json = handoffd("status", "--all-hosts", "--all", "--json", str(a.root))
    assert [c["card"] for c in json.loads(as_json.stdout)] == [card]


def test_all_hosts_without_nats_says_what_is_missing(tmp_path: Path) -> None:
    from tests.conftest import make_project

    project = make_project(tmp_path.resolve())
    done = handoffd("status", "--all-hosts", str(project.root))
    assert done.returncode == 2
    assert done.stderr.startswith("NO_HOSTS: --all-hosts needs the swarm's NATS servers")


def test_the_web_board_with_all_hosts_lists_the_other_hosts_cards(hosts: list[Host]) -> None:
    from starlette.testclient import TestClient

    from handoffd.web.app import create_app

    a, b = hosts
    b.start()
    to_b = send_note(a, "coder", "cleaner", "for b")
    a.start()
    network = settings.load(str(a.root))
    assert network is not None
    put_entry(network, "c", time.time() - 125)
    client = TestClient(create_app(str(a.root), all_hosts=True), base_url="http://127.0.0.1:8765")
    ident = to_b.split("_", 1)[1].split("_to_")[0]

    def listed() -> bool:
        cards = client.get("/api/cards").json()
        return any(c["card"] == f"{ident}@cleaner" and c["host"] == "b" for c in cards)

    wait_for(listed, timeout=20, what="b's card on a's web board")
    page = client.get("/").text
    assert "Other hosts" in page and f"{ident}@cleaner" in page
    assert "host c: last seen 2m ago" in page


def put_raw(network: settings.Network, entries: dict[str, bytes]) -> None:
    """Put `entries` into the bucket as a peer with the swarm's credentials may."""

    async def work(nc: object) -> None:
        kv = await nc.jetstream().key_value(network.bucket)  # type: ignore[attr-defined]
        for key, raw in entries.items():
            await kv.put(key, raw)

    link.once(network, work)


HOSTILE_ENTRIES = {
    "c": b'{"host": "c", "at": 1, "cards": [{}]}',
    "d": shared.encode({"host": "d", "at": time.time(), "cards": [{"card": "x", "to": [1, 2]}]}),
    "e": b'{"host": "e", "at": NaN, "cards": []}',
    "f": shared.encode({"host": "f", "at": 1e300, "cards": []}),
    "g": b"[1, 2, 3]",
    "h": b'{"at": 1, "cards": ["\xff"]}',
    "i": b"{" * 100_000,
}


def test_entries_a_peer_put_that_fail_their_check_are_named_unreadable_and_break_no_board(
    hosts: list[Host],
) -> None:
    """Both views over a real bucket: each bad entry is one `unreadable entry` line, never
    cards, never a traceback nor a 500; host b's real cards are still shown, however many
    keys a peer put before them."""
    from starlette.testclient import TestClient

    from handoffd.web.app import create_app

    a, b = hosts
    network = settings.load(str(a.root))
    assert network is not None
    # first, so b's own entry comes after them: more keys than are read beside the hosts
    fresh = shared.encode({"at": time.time() + 50, "cards": []})
    put_raw(network, {f"z{n:03d}": fresh for n in range(shared.HOST_LIMIT + 20)})
    put_raw(network, HOSTILE_ENTRIES)
    b.start()
    to_b = send_note(a, "coder", "cleaner", "for b")
    a.start()
    ident = to_b.split("_", 1)[1].split("_to_")[0]
    wait_for(lambda: any(c["card"] == f"{ident}@cleaner" for c in all_hosts(a)), timeout=20,
             what="b's card, past the peer's keys")  # fmt: skip
    text = handoffd("status", "--all-hosts", str(a.root))
    assert text.returncode == 0, text.stderr
    notes = [line for line in text.stdout.splitlines() if "unreadable entry" in line]
    assert [line.split(":")[0] for line in notes] == [f"host {k}" for k in HOSTILE_ENTRIES]
    assert "host c: unreadable entry (card 1: no 'card')" in notes
    assert "host d: unreadable entry (card 1: no 'id')" in notes
    assert "host f: unreadable entry ('at' is " in notes[3]
    assert f"{ident}@cleaner" in text.stdout
    as_json = handoffd("status", "--all-hosts", "--json", str(a.root))
    assert as_json.returncode == 0, as_json.stderr
    assert {c["host"] for c in json.loads(as_json.stdout)} <= {"a", "b"}
    assert "host e: unreadable entry (not JSON)" in as_json.stderr
    client = TestClient(create_app(str(a.root), all_hosts=True), base_url="http://127.0.0.1:8765")
    page = client.get("/")
    assert page.status_code == 200 and f"{ident}@cleaner" in page.text
    assert "host g: unreadable entry (not a JSON object)" in page.text
    cards = client.get("/api/cards")
    assert cards.status_code == 200
    assert {c["host"] for c in cards.json()} <= {"a", "b"}
