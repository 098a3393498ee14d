"""The working-memory tools come from memory_app, and a turn offers them as it always did."""

from dataclasses import replace

import pytest

from memory_app.tools import WORKING_MEMORY_TOOLS
from sessions_app.runtime.sandbox.registry import sandbox_offered
from sessions_app.runtime.tools.registry import TOOLS, tool_register
from sessions_app.runtime.turn.turns import turn_run
from sessions_app.selectors.turns import request_header_of
from sessions_app.store import get_store
from tests.helpers import run_python

pytestmark = pytest.mark.django_db


def test_the_main_agent_is_offered_the_memory_tools_in_their_places(backend):
    get_store().create("s-tools")
    result = turn_run(session_id="s-tools", text="What is 2+2?")

    start = next(entry for entry in result.entries if entry.kind == "turn_start")
    offered = request_header_of(start)["tools"]
    assert [tool["name"] for tool in offered] == [
        "calculator",
        "clock",
        "wait",
        "remember",
        "recall",
        "forget",
        "delegate",
        "schedule",
        "unschedule",
        # The sandbox's, wherever this host has one (docs/design.md §28).
        *(["run_code"] if sandbox_offered() else []),
    ]
    memory_tools = {tool["name"]: tool for tool in offered}
    assert memory_tools["remember"] == {
        "name": "remember",
        "description": "Store a fact about the user in this conversation's working memory.",
        "parameters": {
            "type": "object",
            "properties": {"key": {"type": "string"}, "value": {"type": "string"}},
            "required": ["key", "value"],
        },
    }
    assert memory_tools["recall"] == {
        "name": "recall",
        "description": "Read a fact (or, without a key, everything) from working memory.",
        "parameters": {"type": "object", "properties": {"key": {"type": "string"}}},
    }
    assert memory_tools["forget"] == {
        "name": "forget",
        "description": "Delete a fact from working memory. The person is asked first.",
        "parameters": {
            "type": "object",
            "properties": {"key": {"type": "string"}},
            "required": ["key"],
        },
    }


def test_only_forget_waits_for_the_person():
    assert {tool.name: tool.needs_approval for tool in WORKING_MEMORY_TOOLS} == {
        "remember": False,
        "recall": False,
        "forget": True,
    }
    assert all(TOOLS[tool.name] is tool for tool in WORKING_MEMORY_TOOLS)


def test_registering_a_tool_again_is_harmless_but_a_different_one_under_its_name_is_refused():
    remember = TOOLS["remember"]
    tool_register(remember)
    assert TOOLS["remember"] is remember

    with pytest.raises(ValueError, match="already registered as 'remember'"):
        tool_register(replace(remember, description="something else"))
    assert TOOLS["remember"] is remember


def test_an_agents_file_may_name_the_memory_tools(tmp_path):
    # sessions_app checks the file while the apps start: memory_app's tools must exist by then.
    agents = tmp_path / "agents.toml"
    agents.write_text('[agents.librarian]\ntools = ["remember", "forget", "clock"]\n')
    child = run_python(
        "from sessions_app.runtime.turn.agents import agent_get\nprint(agent_get('librarian').tools)\n",
        JARVIS_AGENTS_FILE=agents,
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "('remember', 'forget', 'clock')"
