"""JSON for the processes that run once per agent turn (a hook, a helper), without the
`json` module: it imports `re` and `enum`, a third of a hook's start-up.  Its C scanner and
string encoder are what `json` itself runs on; an interpreter without them falls back to
`json`."""

from __future__ import annotations


class _Decoding:
    """What the C scanner asks of `json.JSONDecoder` (its defaults)."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float  # NaN, Infinity: as json.loads reads them


_scan = None


def loads(text: str) -> object:
    """`json.loads(text)` for a whole document (ValueError for anything else)."""
    global _scan
    if _scan is None:
        try:
            import _json
        except ImportError:  # an interpreter without the accelerator
            import json

            return json.loads(text)
        _scan = _json.make_scanner(_Decoding())  # type: ignore[arg-type]
    body = text.strip(" \t\n\r")
    try:
        value, end = _scan(body, 0)
    except StopIteration:
        raise ValueError("not JSON") from None
    except RecursionError:  # a document nested past the interpreter's limit
        raise ValueError("nested too deep") from None
    if end != len(body):
        raise ValueError("more than one JSON value")
    return value


def quote(text: str) -> str:
    """`json.dumps(text)`: the JSON string of `text`, ASCII only."""
    try:
        import _json
    except ImportError:
        import json

        return json.dumps(text)
    return str(_json.encode_basestring_ascii(text))
