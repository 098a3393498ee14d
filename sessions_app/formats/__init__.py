"""Histories kept by other tools, read as this project's entries (docs/design.md §21, §27).

Two formats: ChatGPT's data export (`chatgpt`) and an openai-agents `SQLiteSession`
database (`openai_agents`). Each conversation becomes a ForeignConversation: the path that
was shown last (its `main` entries) and, for ChatGPT, every other path of its tree
(`branches`), each with the notes of what could not be carried over. Reading is bounded by
the file's budget (`base.ImportLimits`) and linear in the file; nothing here writes.
"""

from sessions_app.formats.base import (
    ForeignBranch,
    ForeignConversation,
    ForeignFile,
    ForeignFormatInvalid,
    ImportLimits,
    ImportTooLarge,
    NotAChatGptExport,
    NotAnOpenAIAgentsDatabase,
    stored_id,
)
from sessions_app.formats.chatgpt import chatgpt_read
from sessions_app.formats.openai_agents import SQLITE_MAGIC, openai_agents_read

__all__ = [
    "SQLITE_MAGIC",
    "ForeignBranch",
    "ForeignConversation",
    "ForeignFile",
    "ForeignFormatInvalid",
    "ImportLimits",
    "ImportTooLarge",
    "NotAChatGptExport",
    "NotAnOpenAIAgentsDatabase",
    "chatgpt_read",
    "openai_agents_read",
    "stored_id",
]
