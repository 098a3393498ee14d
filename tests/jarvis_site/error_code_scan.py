"""Scan the project's modules for an error code typed as a string (tests/jarvis_site/
test_error_table.py runs it).

Run in a process of its own (`python -m tests.jarvis_site.error_code_scan <root>`, printing
JSON): CPython 3.11's `ast.parse` can fail with "AST constructor recursion depth mismatch" in
a process whose earlier work (other tests) left its recursion accounting off, a bug of the
interpreter, not of the code read.
"""

import ast
import json
import sys
from pathlib import Path

from jarvis_site.shared.errors import Code

APPS = ("sessions_app", "memory_app", "notices_app", "accounts_app", "jarvis_site")
TABLE_FILE = Path("jarvis_site") / "shared" / "errors.py"
CODES = {code.value for code in Code}


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the constants that are docstrings (a module's, a class's, a function's)."""
    ids = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _allowed(tree: ast.AST) -> set[int]:
    """Places where one of the words is not an error code of ours: a DRF field's own message
    key (`self.fail("invalid")`), and a value kept under another key (`{"status": "draining"}`,
    the readiness probe's state)."""
    ids = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "fail":
            ids.update(id(argument) for argument in node.args[:1])
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value != "code":
                    ids.add(id(value))
    return ids


def codes_typed_as_strings(root: Path) -> list[str]:
    found = []
    for app in APPS:
        for path in sorted((root / app).rglob("*.py")):
            if "migrations" in path.parts or path.relative_to(root) == TABLE_FILE:
                continue
            tree = ast.parse(path.read_text(), filename=str(path))
            allowed = _allowed(tree)
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Constant)
                    and node.value in CODES
                    and id(node) not in allowed
                ):
                    found.append(f"{path.relative_to(root)}:{node.lineno} {node.value!r}")
    return found


if __name__ == "__main__":
    print(json.dumps(codes_typed_as_strings(Path(sys.argv[1]))))
