"""System prompts. The prompt a turn used is stored in its `turn_start` entry."""

from sessions_app.runtime.turn.agents import agent_get


def default_system_prompt(agent: str) -> str:
    """The prompt of the session's agent (an undefined agent gets Jarvis' under its name)."""
    return agent_get(agent).system_prompt
