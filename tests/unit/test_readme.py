"""The README's contents list: every `##` and `###` heading, in order, each linked by the anchor
GitHub gives it, so a 3,000-line README can be read from its top."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, every character but letters, digits, spaces,
    '-' and '_' dropped, spaces turned into '-'."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def headings(text: str, deepest: int = 3) -> list[tuple[int, str]]:
    """(depth, title) of each heading from `##` to `deepest` outside code blocks."""
    found, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"(#{2,6}) (.+)$", line)) and len(match.group(1)) <= deepest:
            found.append((len(match.group(1)), match.group(2)))
    return found


def contents(text: str) -> str:
    """The list as the README should hold it."""
    return "\n".join(f"{'  ' * (depth - 2)}- [{title}](#{anchor(title)})" for depth, title in headings(text)
                     if title != "Contents")


def test_the_readme_lists_every_section_under_contents_with_its_anchor():
    """When a section is added, renamed or moved, the list says so here: paste what this prints."""
    text = README.read_text()
    found = re.search(r"^## Contents\n\n(.*?)\n\n", text, re.S | re.M)
    assert found, "the README has no `## Contents` list"
    assert found.group(1) == contents(text), f"the README's contents should read:\n{contents(text)}"


def test_a_heading_with_code_and_braces_gets_githubs_anchor():
    """The README links to these by hand too (`#the-daemon-demo-make-demo`, `#run-it-as-a-daemon`)."""
    assert anchor("The daemon demo (`make demo`)") == "the-daemon-demo-make-demo"
    assert anchor("Metrics (`--metrics-port`, default 9108, `/metrics`)") == "metrics---metrics-port-default-9108-metrics"
    assert anchor("Overrides (Redis keys under `autosizer:{<job>}:override:`)") == \
        "overrides-redis-keys-under-autosizerjoboverride"


def test_every_link_within_the_readme_lands_on_a_heading():
    """A renamed heading breaks the hand-written links to it (`[Alerts](#alerts)`) without a word."""
    text = README.read_text()
    anchors = {anchor(title) for _, title in headings(text, deepest=6)}
    links = set(re.findall(r"\]\(#([^)]+)\)", text))
    assert links and links <= anchors, f"links to no heading: {sorted(links - anchors)}"
