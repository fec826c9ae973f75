"""The README kept true: its contents list (every `##` and `###` heading, in order, each linked
by the anchor GitHub gives it), its in-page links, and its simulator example's table."""

from __future__ import annotations

import math
import re
import shlex
from pathlib import Path

from autosizer.controller.cli import main

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


def test_the_readmes_simulate_example_prints_its_table(tmp_path, capsys):
    """The README's first simulator example showed a week from session 3 (69,198 task-hours for
    `autosizer`, 16 rescales) for 63 sessions while the command printed 109,663 and 14: a user
    reading it was told a cost the product no longer had. Its command, run as written (the plot
    to a scratch file), prints the table the README shows; when a change moves it, rerun the
    command with `--markdown` and paste the table."""
    readme = README.read_text()
    found = re.search(r"^\$ (autosizer simulate .*?)\n(?!\s)(.*?)\n```\n\n(\|.*?)\n\n", readme, re.S | re.M)
    assert found, "the README's simulate example (a `$ autosizer simulate` block, then its table) is gone"
    args = shlex.split(found.group(1).replace("\\\n", " "))[1:]
    args[args.index("--plot") + 1] = str(tmp_path / "week.png")
    markdown = tmp_path / "table.md"
    assert main([*args, "--markdown", str(markdown)]) == 0
    assert capsys.readouterr().out.startswith(found.group(2) + "\n")
    printed, shown = (_cells(text) for text in (markdown.read_text(), found.group(3)))
    assert len(printed) == len(shown) and all(
        _close(a, b) for row_a, row_b in zip(printed, shown, strict=True) for a, b in zip(row_a, row_b, strict=True)), \
        f"the README shows {shown}, the command prints {printed}"


def _cells(table: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in table.strip().splitlines()]


def _close(a: str, b: str) -> bool:
    """Equal, or the same number to the last printed digit: a float sum may round the other way
    on another CPU's SIMD width, which is no stale README."""
    try:
        return a == b or math.isclose(float(a), float(b), rel_tol=1e-4, abs_tol=0.1001)
    except ValueError:
        return False
