"""Slash commands that other apps add (notices_app's `/goal`), registered in their
`AppConfig.ready`: sessions_app runs them (web.commands) without importing those apps.

A registered command is `handler(session_id=, owner_id=, text=) -> CommandReply`, where
`text` is everything typed after the command's name; it refuses with CommandRefused, whose
code and message the chat shows as any command's error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jarvis_site.shared.errors import DomainError


@dataclass(frozen=True)
class CommandReply:
    text: str
    data: dict[str, Any] = field(default_factory=dict)


class CommandRefused(DomainError):
    """The command cannot run as typed; `code` is from the project's one error table."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class RegisteredCommand:
    handler: Callable[..., CommandReply]
    usage: str
    about: str


REGISTERED_COMMANDS: dict[str, RegisteredCommand] = {}


def command_register(
    name: str, handler: Callable[..., CommandReply], *, usage: str, about: str
) -> None:
    REGISTERED_COMMANDS[name] = RegisteredCommand(handler, usage, about)
