"""System prompts. The prompt a turn used is stored in its `turn_start` entry."""

AGENT_PROMPTS = {
    "jarvis": (
        "You are Jarvis, a personal assistant. Answer briefly and truthfully. Use a tool when "
        "it gives a better answer than guessing (arithmetic, the current time, the user's "
        "working memory). When a tool fails, say so instead of inventing its result."
    ),
}


def default_system_prompt(agent: str) -> str:
    """The prompt of a known agent; any other agent gets Jarvis' prompt under its own name."""
    if agent in AGENT_PROMPTS:
        return AGENT_PROMPTS[agent]
    return AGENT_PROMPTS["jarvis"].replace("You are Jarvis", f"You are {agent}", 1)
