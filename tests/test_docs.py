"""The repository documents its own protocol: every citation of docs/protocol.md names a
section the file has, and nothing cites a document the repository does not hold."""

from __future__ import annotations

import re
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
PROTOCOL = CHECKOUT / "docs" / "protocol.md"
OPERATIONS = CHECKOUT / "docs" / "operations.md"
DOCUMENTS = [CHECKOUT / "README.md", *sorted((CHECKOUT / "docs").glob("*.md"))]
CODE = ("handoffd", "tests", "benchmarks", "testbed")
CITING = [*(path for folder in CODE for path in (CHECKOUT / folder).rglob("*.py")), *DOCUMENTS]


def sections() -> set[int]:
    return {int(n) for n in re.findall(r"^## (\d+)\. ", PROTOCOL.read_text(), re.M)}


def test_the_protocol_has_sections_1_to_12_in_order_and_later_parts_after_them() -> None:
    numbers = [int(n) for n in re.findall(r"^## (\d+)\. ", PROTOCOL.read_text(), re.M)]
    assert numbers[:12] == list(range(1, 13))
    assert numbers == sorted(set(numbers))


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


def test_the_citations_checked_include_the_reference_moved_out_of_the_readme() -> None:
    names = {str(p.relative_to(CHECKOUT)) for p in CITING}
    assert {"docs/operations.md", "docs/performance.md", "docs/agent-instructions.md"} <= names


# --- the documents point at each other, and at the code, truthfully -----------------------

LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")  # a Markdown link or image: ](target)


def test_the_readme_links_every_document_and_every_link_of_the_docs_resolves() -> None:
    readme = (CHECKOUT / "README.md").read_text(encoding="utf-8")
    assert set(LINK.findall(readme)) >= {
        "docs/protocol.md", "docs/operations.md", "docs/performance.md",
        "docs/agent-instructions.md",
    }  # fmt: skip
    broken = [
        f"{document.relative_to(CHECKOUT)}: {target}"
        for document in DOCUMENTS
        for target in LINK.findall(document.read_text(encoding="utf-8"))
        if "://" not in target and not (document.parent / target).exists()
    ]
    assert broken == []


def modules() -> set[str]:
    """Every module of the package, as the map names it: `scan`, `web/app`."""
    package = CHECKOUT / "handoffd"
    return {str(path.relative_to(package).with_suffix("")) for path in package.rglob("*.py")}


def test_the_module_map_of_docs_operations_md_names_every_module_and_no_other() -> None:
    text = OPERATIONS.read_text(encoding="utf-8")
    section = text[text.index("Every module under `handoffd/`") :]
    named = set(re.findall(r"^ *- `([\w/]+)` — ", section, re.M))
    listed = {name for name in named if not name.endswith("/")}
    assert {"adapters/mcp", "cli", "core/outcome", "web/app", "queue/reports"} <= modules()
    assert sorted(modules() - listed) == []
    assert sorted(listed - modules()) == []


def test_the_map_names_every_module_beside_the_package_and_no_other() -> None:
    """benchmarks/ and testbed/ are not in the wheel, but the map shows them all the same."""
    text = OPERATIONS.read_text(encoding="utf-8")
    section = text[text.index("Beside the package") : text.index("Every module under `handoffd/`")]
    listed = {n for n in re.findall(r"^ *- `([\w/]+)` — ", section, re.M) if not n.endswith("/")}
    found = {
        str(path.relative_to(CHECKOUT).with_suffix(""))
        for folder in ("benchmarks", "testbed")
        for path in (CHECKOUT / folder).rglob("*.py")
    }
    assert "benchmarks/scenario" in found and "testbed/project" in found
    assert sorted(found - listed) == []
    assert sorted(listed - found) == []
