"""Text from files, made safe to print (docs/protocol.md, Part II, "Hostile files").

A header, a reason, a file name or a report line can carry bytes a terminal obeys:
`ESC [ 2 K` erases the line it is on, `ESC ] 0 ;` sets the window's title, a carriage
return draws over a row, a right-to-left override prints a name backwards.  Every
terminal view sends such text through `escape`, which shows each of those characters
as its Python escape (`\\x1b`, `\\r`, `\\x9b`, `\\u202e`), so what is printed is what the
file holds and the terminal obeys none of it.  The view's own colours and line breaks
are added around the escaped text, never through it.

`has_control` is the same set as a question, for refusing such text where it enters
(a draft's header, a blocked reason).  Helpers import this module: it imports nothing.
"""

from __future__ import annotations

# C0 controls (tab and line feed included: a view's own layout is added after escaping),
# DEL and the C1 controls, which a terminal may act on.
_CONTROLS = (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0))
# Bidirectional controls reorder what is shown (a name printed backwards); the line and
# paragraph separators break a line where a view expects one.
_LAYOUT = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029)
# Lone surrogates: a file name that is not UTF-8, as `os` decodes it.  Printed raw they
# are bytes the terminal may take for anything (or an encoding error).
_SURROGATES = range(0xD800, 0xE000)

_table: dict[int, str] = {}
_json_table: dict[int, str] = {}


def _escapes() -> dict[int, str]:
    """The translation table, built on first use (a helper that prints nothing from a
    file never pays for it)."""
    if not _table:
        _table.update({code: f"\\x{code:02x}" for code in _CONTROLS})
        _table.update({code: f"\\u{code:04x}" for code in (*_LAYOUT, *_SURROGATES)})
        _table.update({0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"})  # as Python spells them
    return _table


def escape(text: str) -> str:
    """`text` with every control character shown as its escape, line breaks included:
    one field of a view, printed on one line."""
    if text.isprintable():  # nearly always: nothing to do
        return text
    return text.translate(_escapes())


def escape_json(text: str) -> str:
    """JSON text (from `json.dumps(..., ensure_ascii=False)`, which escapes only the C0
    controls) with the rest of those characters as JSON's own `\\uXXXX` escapes: the
    same data to a parser, nothing a terminal obeys on the screen."""
    if text.isprintable():
        return text
    if not _json_table:
        _json_table.update({code: f"\\u{code:04x}" for code in _escapes() if code >= 0x7F})
    return text.translate(_json_table)


def has_control(text: str) -> bool:
    """Whether `text` holds a character `escape` would show escaped."""
    return not text.isprintable() and any(ord(char) in _escapes() for char in text)
