"""Every reference in the docs resolves inside the repository (issue 9 §5).

README.md, docs/*.md and bench/README.md: each relative link points at a file of the repository
(and, with `#anchor`, at one of its headings); each path they name in backticks outside code
blocks (`tasks/rules.py`, `collaboration/synthesis/`) exists; nothing points outside the
repository (the planning folder beside the checkout, the old design file).
"""

import re
from pathlib import Path

import pytest

BASE_DIR = Path(__file__).resolve().parents[1]
DOCS = [
    BASE_DIR / "README.md",
    BASE_DIR / "bench" / "README.md",
    *sorted((BASE_DIR / "docs").glob("*.md")),
]
TOP_LEVEL = (
    "config",
    "console",
    "a2a_server",
    "organization",
    "tasks",
    "collaboration",
    "runtime",
    "infrastructure",
    "costs",
    "templates",
    "tests",
    "bench",
    "docs",
    "examples",
    ".ci",
)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE_PATH = re.compile(rf"`((?:{'|'.join(re.escape(t) for t in TOP_LEVEL)})/[^`\s]*)`")


def prose(path: Path) -> str:
    """The text outside fenced code blocks."""
    return re.sub(r"^ *```.*?^ *```", "", path.read_text(), flags=re.S | re.M)


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", prose(path), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def ids(paths):
    return [str(p.relative_to(BASE_DIR)) for p in paths]


@pytest.mark.parametrize("doc", DOCS, ids=ids(DOCS))
def test_every_link_resolves_inside_the_repository(doc):
    broken = []
    for target in LINK.findall(prose(doc)):
        if re.match(r"[a-z]+://", target) or target.startswith("mailto:"):
            continue
        file, _, anchor = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        if not path.is_relative_to(BASE_DIR) or not path.exists():
            broken.append(target)
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(target)
    assert broken == []


@pytest.mark.parametrize("doc", DOCS, ids=ids(DOCS))
def test_every_path_named_exists(doc):
    missing = [
        path
        for path in CODE_PATH.findall(prose(doc))
        if not re.search(r"[<>*{}…]", path) and not (BASE_DIR / path.rstrip("/")).exists()
    ]
    assert missing == []


def test_nothing_points_outside_the_repository():
    """Code and docs cite docs/design.md, not the planning folder beside the checkout."""
    # Spelled in parts, so that this test itself names no path outside the repository.
    outside_path = re.compile(r"\.\./" + "shared" + r"|\b" + "DESIGN" + r"\.md")
    code = [p for top in TOP_LEVEL for p in sorted((BASE_DIR / top).rglob("*.py"))]
    outside = [
        str(path.relative_to(BASE_DIR))
        for path in [*DOCS, *code]
        if path != Path(__file__).resolve() and outside_path.search(path.read_text())
    ]
    assert outside == []
