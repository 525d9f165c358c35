"""The TASK and BATCH blocks the helpers print (docs/protocol.md §4), as pure functions."""

from __future__ import annotations

from handoffd.core.handoff import Handoff
from handoffd.queue import blocks
from handoffd.queue.items import Item


def item(path: str, body: str = "body\n", **headers: str) -> Item:
    return Item(path, Handoff(list(headers.items()), body))


def test_a_task_block_lists_the_fields_then_the_payload_verbatim() -> None:
    headers = {"from": "coder", "type": "git_handoff", "priority": "07", "task": "t-1"}
    assert blocks.task(item("/i/a", "x\r\ny", **headers)) == (
        "TASK: /i/a\nFROM: coder\nTYPE: git_handoff\nPRIORITY: 07\nTASK_NAME: t-1\nPAYLOAD:\nx\r\ny"
    )


def test_a_task_block_without_headers_uses_the_defaults_and_no_task_name() -> None:
    text = blocks.task(item("/i/a", "", id="1"))
    assert text == "TASK: /i/a\nFROM: unknown\nTYPE: unknown\nPRIORITY: 50\nPAYLOAD:\n"


def test_a_batch_block_counts_items_takes_the_first_priority_and_numbers_each() -> None:
    items = [item("/b/1", "one\n", priority="20"), item("/b/2", "two\n", priority="30")]
    assert blocks.batch("/b", items) == (
        "BATCH: /b\nCOUNT: 2\nPRIORITY: 20\n"
        "\nBATCH_ITEM: 1\nTASK: /b/1\nFROM: unknown\nTYPE: unknown\nPRIORITY: 20\nPAYLOAD:\none\n"
        "\nBATCH_ITEM: 2\nTASK: /b/2\nFROM: unknown\nTYPE: unknown\nPRIORITY: 30\nPAYLOAD:\ntwo\n"
    )


def test_an_empty_batch_has_count_zero_and_the_default_priority() -> None:
    assert blocks.batch("/b", []) == "BATCH: /b\nCOUNT: 0\nPRIORITY: 50\n"


def test_completed_prints_one_line_per_path() -> None:
    assert blocks.completed(["/c/a", "/c/b"]) == "COMPLETED: /c/a\nCOMPLETED: /c/b\n"
    assert blocks.completed([]) == ""
