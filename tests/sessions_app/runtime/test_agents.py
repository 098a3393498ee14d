"""Agent definitions: the built-in ones, a TOML file merged over them, and its mistakes."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from sessions_app.runtime.sandbox.registry import sandbox_offered
from sessions_app.runtime.turn import agents
from sessions_app.runtime.turn.turns import turn_run
from sessions_app.selectors.turns import request_header_of
from sessions_app.store import get_store


def write(tmp_path, text):
    path = tmp_path / "agents.toml"
    path.write_text(text)
    return str(path)


def test_the_built_in_agents_and_their_policies(settings):
    settings.JARVIS_AGENTS_FILE = ""
    registry = agents.agent_registry()
    assert {name: agent.stm for name, agent in registry.items() if not agent.is_main} == {
        "researcher": "per_parent_session",
        "scratch": "per_task",
        "librarian": "per_agent",
        "goal": "per_task",
    }
    assert registry["jarvis"].is_main and "delegate" in registry["jarvis"].tools
    assert [agent.name for agent in agents.delegation_targets()] == [
        "researcher",
        "scratch",
        "librarian",
    ], "a goal's agent is started by its goal only, never delegated to"
    coder = agents.agent_get("coder")  # not defined: Jarvis' definition under its name
    assert coder.system_prompt.startswith("You are coder")


def test_a_toml_file_overrides_and_adds_agents(settings, tmp_path):
    settings.JARVIS_AGENTS_FILE = write(
        tmp_path,
        """
[agents.researcher]
model = "anthropic:claude-sonnet-4-5"

[agents.coder]
description = "Writes small programs."
system_prompt = "You are a careful programmer."
tools = ["calculator"]
memory = { stm = "per_task" }
""",
    )
    researcher = agents.agent_get("researcher")
    assert researcher.model == "anthropic:claude-sonnet-4-5"
    assert researcher.system_prompt == agents.DEFAULT_AGENTS["researcher"].system_prompt
    coder = agents.agent_get("coder")
    assert (coder.tools, coder.stm, coder.model) == (("calculator",), "per_task", "")
    delegate = agents.agent_tools(agents.agent_get("jarvis"))["delegate"]
    assert "coder" in delegate.parameters["properties"]["agent"]["enum"]
    assert "coder: Writes small programs" in delegate.description


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[agents.researcher]\ncolour = 'red'\n", "unknown key(s) colour"),
        ("[agents.researcher]\ntools = ['shell']\n", "unknown tool(s) shell"),
        ("[agents.researcher]\nmodel = 'gpt-4o'\n", "unknown model 'gpt-4o'"),
        ("[agents.researcher]\nmemory = { stm = 'forever' }\n", "memory.stm: is one of"),
        ("[agents.coder]\ndescription = 'x'\n", "a new agent needs system_prompt"),
        ("[agents.bad__name]\ndescription = 'x'\nsystem_prompt = 'y'\n", "an agent name is"),
        ("[agents.jarvis]\ntools = ['calculator']\n", "must keep the delegate tool"),
        ("[tools]\nx = 1\n", "unknown table(s) tools"),
        ("[agents.researcher\n", "not valid TOML"),
    ],
)
def test_mistakes_in_the_file_stop_with_what_is_wrong(settings, tmp_path, text, message):
    settings.JARVIS_AGENTS_FILE = write(tmp_path, text)
    with pytest.raises(ImproperlyConfigured, match="JARVIS_AGENTS_FILE") as error:
        agents.agent_registry()
    assert message in str(error.value)


def test_a_missing_file_is_named(settings, tmp_path):
    settings.JARVIS_AGENTS_FILE = str(tmp_path / "nowhere.toml")
    with pytest.raises(ImproperlyConfigured, match="nowhere.toml: no such file"):
        agents.agent_registry()


@pytest.mark.django_db(transaction=True)
def test_a_turn_uses_its_agents_prompt_and_tools(settings, tmp_path, backend):
    settings.JARVIS_AGENTS_FILE = write(
        tmp_path,
        """
[agents.counter]
description = "Counts."
system_prompt = "You are a counter."
tools = ["calculator"]
""",
    )
    get_store().create("test-counter", agent="counter")
    result = turn_run(session_id="test-counter", text="what is 2+3 and what time is it")
    header = request_header_of(result.entries[0])
    assert header["system"] == "You are a counter."
    # Its own tools, and the sandbox's wherever this host has one (docs/design.md §28).
    sandbox = ["run_code"] if sandbox_offered() else []
    assert [tool["name"] for tool in header["tools"]] == ["calculator", *sandbox]
    calls = [call["name"] for entry in result.entries for call in entry.tool_calls or ()]
    assert calls == ["calculator"], "the clock is not this agent's tool"
