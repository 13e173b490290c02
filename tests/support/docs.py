"""Markdown heading anchors as GitHub renders them (for the tests that check links into docs/)."""

from __future__ import annotations

import re
from pathlib import Path


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def heading_anchors(path: Path) -> set[str]:
    """The anchors of a markdown page's headings (outside code blocks)."""
    anchors: set[str] = set()
    fence = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and (m := re.match(r"^#{1,6} (.+)$", line)):
            anchors.add(slug(m.group(1)))
    return anchors
