"""One error table (jarvis_site/shared/errors.py): every code the API, the WebSocket and the
slash commands answer with comes from it, and none is typed as a string anywhere else."""

import ast
import re
from pathlib import Path

from jarvis_site.shared.errors import CODE_OF_STATUS, TABLE, Code, status_of
from tests.helpers import REPO

APPS = ("sessions_app", "memory_app", "notices_app", "accounts_app", "jarvis_site")
TABLE_FILE = REPO / "jarvis_site" / "shared" / "errors.py"
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


def codes_typed_as_strings(root: Path = REPO) -> list[str]:
    found = []
    for app in APPS:
        for path in sorted((root / app).rglob("*.py")):
            if "migrations" in path.parts or path == TABLE_FILE:
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


def test_no_error_code_is_typed_as_a_string_outside_the_table():
    assert codes_typed_as_strings() == []


def test_the_scan_finds_a_code_typed_as_a_string(tmp_path):
    """The check above can fail: a consumer that spells a code out is caught."""
    module = tmp_path / "sessions_app" / "web" / "consumer.py"
    module.parent.mkdir(parents=True)
    module.write_text(
        'async def on_frame(self):\n    await self._error("not_found", "gone")\n'
        'def status():\n    return {"status": "draining"}\n'
    )
    assert codes_typed_as_strings(tmp_path) == ["sessions_app/web/consumer.py:2 'not_found'"]


def test_every_code_has_one_rule_and_the_wire_string_is_its_value():
    assert set(TABLE) == set(Code)
    assert all(re.fullmatch(r"[a-z_]+", code) for code in CODES)
    assert all(TABLE[code].detail for code in Code)
    for status, code in CODE_OF_STATUS.items():
        assert status_of(code) == status, code


def test_every_code_a_client_may_receive_is_documented():
    documented = (REPO / "docs" / "api.md").read_text()
    missing = [code.value for code in Code if f"`{code.value}`" not in documented]
    assert missing == []
