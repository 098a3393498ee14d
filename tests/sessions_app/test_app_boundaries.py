"""sessions_app never imports memory_app or notices_app: both follow sessions through signals
and register their tools themselves (docs/design.md §9, §16), so sessions_app works and
changes on its own."""

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


ABOVE_SESSIONS_APP = {"memory_app", "notices_app"}


def test_no_module_of_sessions_app_imports_an_app_above_it():
    offenders = {
        str(path.relative_to(SESSIONS_APP)): sorted(
            module
            for module in imported_modules(path)
            if module.split(".")[0] in ABOVE_SESSIONS_APP
        )
        for path in SESSIONS_APP.rglob("*.py")
        if "migrations" not in path.parts
    }
    assert {path: modules for path, modules in offenders.items() if modules} == {}
