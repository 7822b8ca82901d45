"""The README is a front door (short, its two commands first) and no link in the docs is dead."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_readme_is_short_and_opens_with_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    # .ci/run runs exactly the README's first two commands: the demo sweep, then the tests.
    assert [b.strip() for b in blocks[:2]] == [
        "scripts/setup.sh && .venv/bin/ansible-playbook sweep.yml -e steps=1",
        "scripts/setup.sh && .venv/bin/pytest",
    ]
    assert all(b.strip() in ci for b in blocks[:2])


def test_every_relative_link_resolves() -> None:
    dead = [
        f"{page.relative_to(ROOT)}: {target}"
        for page in PAGES
        for target in LINK.findall(page.read_text(encoding="utf-8"))
        if "://" not in target and not (page.parent / target).exists()
    ]
    assert not dead
