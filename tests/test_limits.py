"""The swarm's defaults are declared once, in handoffd/core/limits.py: the table gives them to
the commands, and no other module keeps a copy that could drift from them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from handoffd.core import limits
from handoffd.ops import table

PACKAGE = Path(__file__).resolve().parent.parent / "handoffd"
NAMES = {name for name in vars(limits) if name.isupper()}


def test_the_daemons_options_default_to_the_limits() -> None:
    defaults = {param.name: param.default for param in table.DAEMON}
    assert defaults == {
        "renotify_after": limits.RENOTIFY_AFTER,
        "idle_after": limits.IDLE_AFTER,
        "idle_wait": limits.IDLE_WAIT,
        "stall_wakes": limits.STALL_WAKES,
        "reclaim_after": limits.RECLAIM_AFTER,
    }
    assert table.WINDOW.default * 60 == limits.LIVENESS_WINDOW


def test_no_other_module_declares_a_default_of_its_own() -> None:
    """Neither a copy (`IDLE_WAIT = 300.0`) nor an alias (`WINDOW_S = limits.…`), nor the
    one-hour window as a bare literal: a changed default then changes everywhere."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "limits.py":
            continue
        text = path.read_text(encoding="utf-8")
        for node in ast.parse(text).body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            named = {t.id for t in targets if isinstance(t, ast.Name)}
            named |= {e.id for t in targets if isinstance(t, ast.Tuple) for e in t.elts
                      if isinstance(e, ast.Name)}  # fmt: skip
            if named & (NAMES | {"WINDOW_S"}):
                found.append(f"{path.relative_to(PACKAGE)}: {sorted(named)}")
        if re.search(r"(?<!\* )\b3600\.0\b|\b60 \* 60\.0\b", text):  # not 24 * 3600.0
            found.append(f"{path.relative_to(PACKAGE)}: the window as a literal")
    assert found == []
