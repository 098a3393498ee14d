"""sessions_app never imports memory_app: memory follows sessions through signals and
registers its tools itself (docs/design.md §9), so sessions_app works and changes on its own."""

import ast
from pathlib import Path

import sessions_app

SESSIONS_APP = Path(sessions_app.__file__).parent


def imported_modules(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
    return modules


def test_no_module_of_sessions_app_imports_memory_app():
    offenders = {
        str(path.relative_to(SESSIONS_APP)): sorted(
            module for module in imported_modules(path) if module.split(".")[0] == "memory_app"
        )
        for path in SESSIONS_APP.rglob("*.py")
        if "migrations" not in path.parts
    }
    assert {path: modules for path, modules in offenders.items() if modules} == {}
