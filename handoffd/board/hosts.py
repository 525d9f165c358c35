"""One board across hosts: each daemon puts its host's cards into the bucket under its
host's name; `status --all-hosts` and `web --all-hosts` read every host's entry.

An entry is `{"host", "at", "cards"}`, `at` the putting host's clock (epoch seconds).  It
is put at most every PUT_EVERY seconds while the cards change and at least every
REFRESH seconds, so an entry older than STALE means that host's daemon is not running
(or cannot reach NATS).  Every entry read is checked first (`bucket.check`): the bucket is
shared, and what a peer put there is not trusted.
"""

from __future__ import annotations

import json
import time

from handoffd.board import status as board
from handoffd.core import limits
from handoffd.remote import link as links
from handoffd.remote.bucket import CARD_LIMIT, Entry, check
from handoffd.remote.settings import Network

TYPE_CHECKING = False
if TYPE_CHECKING:
    import concurrent.futures
    from typing import Any

    from nats.aio.client import Client
    from nats.js.kv import KeyValue
    from structlog.typing import FilteringBoundLogger

    from handoffd.core.config import Role

PUT_EVERY = 2.0  # seconds, at most one put this often while the cards change
REFRESH = 10.0  # seconds, at least one put this often: a live host never looks stale
# Entries read besides the declared hosts', and keys listed at most: a swarm has a few hosts,
# a peer with its credentials may put thousands of keys.
HOST_LIMIT = 100
KEY_LIMIT = 10_000


class Publisher:
    """The daemon's side: its host's cards into the bucket, when due."""

    def __init__(
        self, link: links.Link, network: Network, root: str, log: FilteringBoundLogger
    ) -> None:
        self.link = link
        self.network = network
        self.root = root
        self.log = log
        self._last: tuple[float, object] = (float("-inf"), None)  # (when, cards) last put
        self._put: concurrent.futures.Future[int] | None = None

    def tick(self, local: dict[str, Role], now: float) -> None:
        """Put this host's cards if they changed PUT_EVERY ago, or REFRESH passed."""
        when, cards = self._last
        if now - when < PUT_EVERY or not self.link.connected:
            return
        self._check_last_put()
        fresh = host_cards(self.root, local, self.network.here)
        if fresh == cards and now - when < REFRESH:
            return
        value = {"host": self.network.here, "at": time.time(), "cards": fresh}
        put = self.link.put(self.network.bucket, self.network.here, encode(value))
        self._put = self.link.submit(put)
        self._last = (now, fresh)

    def _check_last_put(self) -> None:
        if self._put is not None and self._put.done() and self._put.exception() is not None:
            error = self._put.exception()
            assert error is not None
            self.log.warning("board_not_shared", error=links.describe(error))
            self._last = (float("-inf"), None)  # try again at the next tick
        self._put = None if self._put is None or self._put.done() else self._put


def host_cards(
    root: str, local: dict[str, Role], host: str, show_all: bool = False
) -> list[dict[str, Any]]:
    """The `status --json` objects of this host's open cards (with `show_all`, its green
    ones too: read from its own disk, never put in the bucket), each with its `host`."""
    shown = board.board(root, None, show_all, limits.LIVENESS_WINDOW, roles=local)
    limit = None if show_all else CARD_LIMIT
    return [{**card.to_json(), "host": host} for card in shown.cards[:limit]]


def encode(value: dict[str, Any]) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def read_all(network: Network, now: float | None = None) -> list[Entry]:
    """Every host's entry, each checked against `now`: the swarm's declared hosts always,
    then other keys of the bucket (a host not declared here yet, or a peer's junk) up to
    HOST_LIMIT of them; raises `ConnectionError` (`nats: …`)."""

    async def work(nc: Client) -> list[tuple[str, bytes]]:
        from nats.js.errors import KeyNotFoundError

        kv = await nc.jetstream(timeout=links.REQUEST_TIMEOUT).key_value(network.bucket)
        others = sorted(set(await _keys(kv)) - set(network.hosts))
        values = []
        for key in [*network.hosts, *others[:HOST_LIMIT]]:
            try:  # a key spelt outside the client's rules is still read (and checked)
                got = await kv.get(key, validate_keys=False)
            except KeyNotFoundError:  # never put, or removed since it was listed
                continue
            values.append((key, got.value or b""))
        return values

    try:
        values = links.once(network, work)
    except ConnectionError:
        raise
    except Exception as error:
        raise ConnectionError(links.describe(error)) from None
    when = time.time() if now is None else now
    return [check(key, raw, when) for key, raw in sorted(values)]


async def _keys(kv: KeyValue) -> list[str]:
    """The bucket's keys (at most KEY_LIMIT), listed by a watcher that reads no values: a
    peer's thousands of large entries cost one small message each, and only once."""
    watcher = await kv.watchall(ignore_deletes=True, meta_only=True)
    keys: list[str] = []
    try:
        while len(keys) < KEY_LIMIT:
            update = await watcher.updates(timeout=links.REQUEST_TIMEOUT)  # type: ignore[no-untyped-call]
            if update is None:  # every key there was when the watch began: all seen
                break
            keys.append(update.key)
    finally:
        await watcher.stop()  # type: ignore[no-untyped-call]
    return keys


def last_seen(entries: list[Entry], now: float) -> list[str]:
    """`host b: last seen 2m ago` for each stale host, `host c: unreadable entry (<why>)` for
    each whose entry failed its check."""
    from handoffd.board.colour import ago
    from handoffd.core.terminal import escape

    lines = []
    for entry in entries:
        host = escape(entry.host)  # a key is any subject token a peer chose
        if entry.problem is not None:
            lines.append(f"host {host}: unreadable entry ({entry.problem})")
        elif entry.stale(now):
            assert entry.at is not None
            lines.append(f"host {host}: last seen {ago(now - entry.at)} ago")
    return lines


# --- the view: `status --all-hosts` -----------------------------------------------------

COLUMNS = ("STATUS", "HOST", "CARD", "FROM", "TO", "PRI", "TYPE", "TASK", "AGE", "DETAIL")


ONLY_OPEN = ("other hosts share their open cards only: `handoffd status --all` on a host "
             "shows its finished ones")  # fmt: skip


def gather(
    root: str, local: dict[str, Role], network: Network, show_all: bool = False
) -> tuple[list[dict[str, Any]], list[str]]:
    """Every host's open cards (this host's read from disk now, with `show_all` its green
    ones too; the others' from the bucket) and a line per host not seen lately, or one
    saying the bucket is out of reach."""
    cards = host_cards(root, local, network.here, show_all)
    now = time.time()
    try:
        entries = [e for e in read_all(network) if e.host != network.here]
    except ConnectionError as error:
        return cards, [f"other hosts: not shown, NATS cannot be reached ({error})"]
    for entry in entries:
        cards += entry.cards
    return cards, last_seen(entries, now) + ([ONLY_OPEN] if show_all and entries else [])


def render(
    cards: list[dict[str, Any]], notes: list[str], head: str, empty: str = "no open cards"
) -> list[str]:
    """The cards of every host as an aligned table, a HOST column after STATUS."""
    from handoffd.board.colour import ago
    from handoffd.core.terminal import escape

    lines = [head, *notes]
    if not cards:
        return [*lines, empty]
    rows = [list(COLUMNS)]
    for card in cards:
        age = card.get("age_s")
        to = ",".join(card.get("to") or [])
        cells = [card.get("host"), card.get("card"), card.get("from"), to, card.get("priority"),
                 card.get("type"), card.get("task"), card.get("detail")]  # fmt: skip
        text = [escape(str(cell)) if cell not in (None, "") else "-" for cell in cells]
        colour = str(card.get("color") or "-").upper()
        rows.append([colour, *text[:7], "-" if age is None else ago(float(age)), text[7]])
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    for row in rows:
        padded = [cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=False)]
        lines.append("  ".join([*padded, row[-1]]).rstrip())
    return lines
