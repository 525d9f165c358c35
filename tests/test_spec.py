"""How an operation is declared and run (handoffd/ops/spec.py): the one check every
adapter's values go through before an operation sees them."""

from __future__ import annotations

import os

import pytest

from handoffd.core.outcome import Refusal
from handoffd.ops import spec
from handoffd.ops.table import OPS

TEXTS = (spec.STR, spec.TEXT, spec.NAMES, spec.DRAFT)
EVERY_TEXT = [(op, p) for op in OPS for p in op.params if p.kind in TEXTS]
BYTE = os.fsdecode(b"ok \xc3")  # a command line's or a file's byte that is not UTF-8
LONE = "lone \ud800 surrogate"  # a tool's JSON string "\ud800"


@pytest.mark.parametrize(("op", "param"), EVERY_TEXT, ids=lambda x: getattr(x, "name", x))
def test_every_text_parameter_of_the_table_refuses_a_value_that_is_not_utf8(
    op: spec.Op, param: spec.Param
) -> None:
    """Whichever the operation and the adapter, a value that no encoder can write is the
    operation's refusal (exit 2, its token), said before its function runs (no context is
    needed to refuse it)."""
    for value, which in [(BYTE, "it holds the byte 0xc3"), (["ok", LONE], "it holds a lone "
                         "surrogate \\ud800")]:  # fmt: skip
        done = op.run(None, **{param.name: value})  # type: ignore[arg-type]
        assert (done.code, done.out) == (2, "")
        assert (
            done.err
            == f"{param.token}: {param.shown} is not UTF-8 ({which}); give it as UTF-8 text\n"
        )


def test_the_refusal_names_each_parameter_as_its_adapter_spells_it() -> None:
    answer = next(op for op in OPS if op.name == "answer")
    shown = {p.name: p.shown for p in answer.params}
    assert shown == {"card": "CARD", "said": "TEXT", "text": "the text", "by": "--by",
                     "root": "--root"}  # fmt: skip
    with pytest.raises(Refusal) as refused:
        spec.not_text(answer.arguments("tool"), {"card": "c@r", "text": LONE}, tool=True)
    assert refused.value.message.startswith("INVALID_ANSWER: 'text' is not UTF-8 ")


def test_text_that_is_utf8_passes_whatever_it_holds() -> None:
    """Only what cannot be encoded is refused here: a control character, a right-to-left
    mark or any script is each operation's own business."""
    fine = {"reason": "évolution \x1b[2J \u202e 漢字 🙂", "to": ["QA", "coder"], "n": 3}
    assert spec.not_text((), fine) is None


def test_what_an_adapter_made_is_not_checked_a_drafts_path_that_is_not_utf8_included() -> None:
    """A path may hold any bytes on Linux: a draft at one is sent all the same (its path is
    the adapter's `name`, no parameter of the table)."""
    send = next(op for op in OPS if op.name == "send-handoff")
    assert spec.not_text(send.params, {"draft": "type: note\n", "name": f"/tmp/{BYTE}"}) is None


def test_the_tables_send_fields_are_a_drafts_headers_then_a_packets_sections() -> None:
    """`send_handoff`'s fields (the MCP schema) and the draft a tool's arguments become
    name one list of a draft's header fields (`draft.ALLOWED`, docs/protocol.md §3), then
    a packet's sections (§10), then the key that makes a retry safe: one cannot grow a
    field the other does not know."""
    from handoffd.ops.table import SEND_FIELDS
    from handoffd.queue import draft, packet

    sections = tuple(packet.field(title) for title in packet.SECTIONS)
    names = tuple(param.name for param in SEND_FIELDS)
    assert names == (*draft.ALLOWED, *sections, "idempotency_key")


CONTEXT = {"role", "agent", "conversation", "root"}  # read by the context, never passed on


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_every_default_the_table_declares_is_the_functions_own(op: spec.Op) -> None:
    """A parameter's default is declared once, in the table, for the command line, the
    tools' schemas and the web's forms; the operation's function, called without it (a
    test, another module), must do the same: its own default is the table's.  And every
    parameter but those the context reads reaches the function by its name."""
    import inspect

    signature = inspect.signature(op.function()).parameters
    assert {p.name for p in op.params if p.name not in signature} <= CONTEXT
    for param in op.params:
        if param.name in signature:
            own = signature[param.name].default
            assert param.default == (None if own is inspect.Parameter.empty else own), param.name
