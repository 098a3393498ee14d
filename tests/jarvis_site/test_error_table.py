"""One error table (jarvis_site/shared/errors.py): every code the API, the WebSocket and the
slash commands answer with comes from it, and none is typed as a string anywhere else."""

import json
import re
import subprocess
import sys

from jarvis_site.shared.errors import CODE_OF_STATUS, TABLE, Code, status_of
from tests.helpers import REPO

CODES = {code.value for code in Code}


def codes_typed_as_strings(root=REPO) -> list[str]:
    """tests/jarvis_site/error_code_scan.py, in a process of its own (its docstring says why)."""
    result = subprocess.run(
        [sys.executable, "-m", "tests.jarvis_site.error_code_scan", str(root)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout)


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
