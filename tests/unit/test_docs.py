"""The README is a front door (short, its two commands first) and no link in the docs is dead."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
# The repo's folders: a path named from one of them is checked (a role's `tasks/main.yml` is not).
TOP = "analysis|bench|docs|group_vars|inventory|playbooks|plugins|roles|scripts|tests"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_readme_is_short_and_opens_with_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    # .ci/run runs exactly the README's first two commands: the demo sweep, then the tests.
    assert [b.strip() for b in blocks[:2]] == [
        "scripts/setup.sh && .venv/bin/ansible-playbook sweep.yml -e steps=1",
        "scripts/setup.sh --tests && .venv/bin/pytest",
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


def test_the_readme_layout_names_every_top_level_entry_package_playbook_role_and_page() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`([^`]+)`", text[text.index("| path | what |") : text.index("## Checks")]))
    # A folder is named by itself or by a path inside it (`scripts/nightly.py`), a file by itself.
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    paths = tracked.stdout.splitlines()
    top = {path.split("/")[0] + ("/" if "/" in path else "") for path in paths}
    tree = {
        *(entry for entry in top if not entry.startswith(".") and entry != "README.md"),
        *("/".join(path.split("/")[:2]) + "/" for path in paths if path.startswith("plugins/")),
        *(f"analysis/{p.name}/" for p in (ROOT / "analysis").iterdir() if (p / "__init__.py").is_file()),
        *(f"playbooks/{p.name}" for p in (ROOT / "playbooks").glob("*.yml")),
        *(p.name for p in (ROOT / "roles").iterdir() if p.is_dir()),
        *(p.name for p in (ROOT / "docs").glob("*.md")),
    }
    missing = [e for e in tree if not any(n == e or (e.endswith("/") and n.startswith(e)) for n in named)]
    assert sorted(missing) == []


def test_the_files_and_modules_the_design_and_extending_pages_name_exist() -> None:
    missing = []
    for page in ("design.md", "extending.md"):
        text = (ROOT / "docs" / page).read_text(encoding="utf-8")
        for name in re.findall(r"`([^`\s]+)`", text):
            if re.fullmatch(rf"({TOP})/[\w./-]*", name):
                missing += [] if (ROOT / name).exists() else [f"{page}: {name}"]
            elif re.fullmatch(r"analysis(\.\w+)+", name):
                parts = name.split(".")
                # A module, or a module's attribute: analysis.facts.record.build_fact.
                module = next((parts[:i] for i in range(len(parts), 1, -1)
                               if (ROOT / Path(*parts[:i])).with_suffix(".py").is_file()
                               or (ROOT / Path(*parts[:i]) / "__init__.py").is_file()), None)  # fmt: skip
                if module is None:
                    missing.append(f"{page}: {name}")
                elif len(module) < len(parts):
                    source = (ROOT / Path(*module)).with_suffix(".py")
                    attr = parts[len(module)]
                    if not re.search(rf"^(def|class) {attr}\b|^{attr}\b.*=", source.read_text(), re.M):
                        missing.append(f"{page}: {name}")
    assert missing == [], missing
