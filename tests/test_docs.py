"""The repository documents its own protocol: every citation of docs/protocol.md names a
section the file has, and nothing cites a document the repository does not hold."""

from __future__ import annotations

import re
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
PROTOCOL = CHECKOUT / "docs" / "protocol.md"
CITING = [*(CHECKOUT / "handoffd").rglob("*.py"), *(CHECKOUT / "tests").rglob("*.py"),
          CHECKOUT / "README.md"]  # fmt: skip


def sections() -> set[int]:
    return {int(n) for n in re.findall(r"^## (\d+)\. ", PROTOCOL.read_text(), re.M)}


def test_the_protocol_has_sections_1_to_12_in_order() -> None:
    numbers = [int(n) for n in re.findall(r"^## (\d+)\. ", PROTOCOL.read_text(), re.M)]
    assert numbers == list(range(1, 13))


def test_every_citation_names_a_section_of_docs_protocol_md() -> None:
    known, cited = sections(), {}
    for path in CITING:
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"docs/protocol\.md[ (]*((?:§\d+(?:\.\d+)?[-\u2013, ]*)+)", text):
            for number in re.findall(r"§(\d+)", match.group(1)):
                cited.setdefault(int(number), str(path.relative_to(CHECKOUT)))
    assert cited, "the code cites the protocol's sections"
    assert {n: where for n, where in cited.items() if n not in known} == {}


def test_nothing_cites_a_protocol_file_outside_the_repository() -> None:
    strays = [str(p.relative_to(CHECKOUT)) for p in CITING if "PROTOCOL.md" in p.read_text()]
    assert strays == [str(Path(__file__).relative_to(CHECKOUT))]  # this test's own text
