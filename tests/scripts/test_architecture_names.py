"""docs/architecture.md names only modules that exist: every file path, file name and dotted
module path in its code spans is looked up in the tree, so a module moved or renamed without
the document following fails here (as the floors picture fails `floors_picture.py --check`)."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCUMENT = REPO / "docs" / "architecture.md"
APPS = ("sessions_app", "memory_app", "notices_app", "accounts_app", "jarvis_site")
# Where a path or a dotted name in the document starts: the repository, or an app's folder
# (the document says `runtime/turn/lease.py` for sessions_app's).
BASES = (REPO, *(REPO / app for app in APPS))
# Packages whose dotted names the document spells from the app down (`runtime.turn.turns.x`).
PACKAGES = (*APPS, "runtime", "services", "selectors", "web", "core", "formats")
# Objects, not modules, that the document writes dotted (`data.attachments`, `str.translate`).
OBJECTS = {"data", "provider", "str", "transaction"}
NOT_MODULE_SUFFIX = re.compile(r"\.(py|md|js|json|jsonl|html|css|txt|toml|yml|yaml|sh|sql|png)$")


def spans() -> list[str]:
    return re.findall(r"`([^`\n]+)`", DOCUMENT.read_text())


def project_files() -> list[Path]:
    skipped = {".venv", "node_modules", ".git", "var"}
    return [path for path in REPO.rglob("*.py") if not skipped & set(path.parts)]


def module_path(base: Path, parts: list[str]) -> Path | None:
    path = base.joinpath(*parts)
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return None


def defines(module: Path, name: str) -> bool:
    """`name` is a function, class, assignment, import or submodule of the module."""
    if module.name == "__init__.py" and module_path(module.parent, [name]):
        return True
    pattern = (
        rf"^\s*(async def|def|class) {name}\b|^\s*{name}\s*[:=]|^\s*{name},$|import .*\b{name}\b"
    )
    return re.search(pattern, module.read_text(), re.M) is not None


def missing_paths() -> list[str]:
    missing = []
    for span in spans():
        if "…" in span or "<" in span or span.startswith(("/", "http", "GET", "POST")):
            continue  # a URL, not a file
        for token in re.findall(r"[\w./-]+", span):
            if "/" in token and token.endswith((".py", "/")) and not token.startswith("/"):
                if not any((base / token).exists() for base in BASES):
                    missing.append(token)
    return missing


def missing_file_names() -> list[str]:
    names = {path.name for path in project_files()}
    return [
        token
        for span in spans()
        for token in re.findall(r"(?<![\w/.])\w+\.py\b", span)
        if token not in names
    ]


def unresolved_dotted_names() -> list[str]:
    known = {path.stem for path in project_files()} | {
        path.parent.name for path in project_files() if path.name == "__init__.py"
    }
    unresolved = []
    for span in spans():
        for token in re.findall(r"(?<![\w/])[a-z_]\w*(?:\.\w+)+", span):
            if NOT_MODULE_SUFFIX.search(token):
                continue
            parts = token.split(".")
            if parts[0] not in known:
                if parts[0] not in OBJECTS:
                    unresolved.append(token)  # a module that does not exist (anywhere)
                continue
            if parts[0] not in PACKAGES:
                continue  # `store.locked()`: a method of an object named like a module
            for base in BASES:
                if module_path(base, parts[:1]) is None:
                    continue
                depth = max(n for n in range(1, len(parts) + 1) if module_path(base, parts[:n]))
                module = module_path(base, parts[:depth])
                if depth < len(parts) and not defines(module, parts[depth]):
                    unresolved.append(token)
                break
    return unresolved


def test_every_path_the_document_names_exists():
    assert missing_paths() == []


def test_every_file_name_the_document_names_exists():
    assert missing_file_names() == []


def test_every_dotted_module_name_the_document_names_exists():
    assert unresolved_dotted_names() == []
