"""`manage.py chat <session_id>`: talk to the configured model in a session from a terminal.

One input line is one message; the answer streams as it arrives, tool calls and their
results are shown as they happen. A line typed while an answer runs waits its turn (it is
queued, docs/design.md §18, and runs when the answer ends); `/steer <text>` sends the text
into the running answer instead. A line starting with `/` is a slash command, the same as in
the web chat (`/help` lists them; `/branch` continues in the copy); one typed during an
answer runs after it. Ctrl-C during an answer aborts the turn (the session stays valid);
Ctrl-D or /quit ends the conversation once what was queued has run. Piped input works the
same.
"""

import json
import queue
import sys
import threading
import time
from contextlib import ExitStack

from django.core.management.base import BaseCommand, CommandError

from sessions_app.core import limits
from sessions_app.management.commands._owners import owner_id_by_username
from sessions_app.runtime.turn.agents import UnknownAgent
from sessions_app.runtime.turn.queue import QueueFull
from sessions_app.services import prompt_modes, sessions, turns
from sessions_app.store import AgentMismatch, InvalidSessionId
from sessions_app.web.commands import CommandError as SlashCommandError
from sessions_app.web.commands import command_run


class Command(BaseCommand):
    help = "Hold a conversation with the configured model (JARVIS_MODEL) in a session."

    def add_arguments(self, parser):
        parser.add_argument("session_id")
        parser.add_argument("--agent", default="jarvis", help="agent of a new session")
        parser.add_argument(
            "--model", default=None, help="offline, openai:<model> or anthropic:<model>"
        )
        parser.add_argument("--user", default=None, help="owner (username) of a new session")

    def handle(self, *args, session_id, agent, model, user, **options):
        # Without --user: a local conversation without an owner, like the system's own.
        owner_id = None if user is None else owner_id_by_username(user)
        try:
            limits.agent_check(agent)
            sessions.session_create(owner_id=owner_id, session_id=session_id, agent=agent)
        except sessions.SessionIdUnavailable as error:
            hint = " (a user's session: name its owner with --user)" if owner_id is None else ""
            raise CommandError(f"{error}{hint}") from error
        except (InvalidSessionId, UnknownAgent, AgentMismatch, limits.InputInvalid) as error:
            raise CommandError(str(error)) from error
        self.owner_id = owner_id
        interactive = sys.stdin.isatty()
        lines = _lines_of(sys.stdin)
        with ExitStack() as watching:
            # Every message goes through the session's queue (docs/design.md §18), so what
            # is typed during an answer runs after it in order; its turns show here.
            watching.enter_context(prompt_modes.queue_watch(session_id, self._show, model))
            while True:
                if interactive and not self._busy(session_id):
                    self.stdout.write("you> ", ending="")
                    self.stdout.flush()
                line = self._next_line(lines, session_id)
                if line is None:
                    break
                text = line.strip()
                if not text:
                    continue
                if text in {"/quit", "/exit"}:
                    break
                try:
                    limits.prompt_check(text)
                except limits.InputInvalid as error:
                    # The same limits as the API and the WebSocket; the conversation goes on.
                    self.stderr.write(f"[invalid] {error}")
                    continue
                if text.startswith("/steer "):
                    self._enqueue(session_id, text.removeprefix("/steer ").strip(), "steer")
                    continue
                if not text.startswith("/"):
                    self._enqueue(session_id, text, "queue")
                    continue
                # A command waits for the answers before it, so it acts on what they stored.
                self._wait_idle(session_id)
                switched = self._command(session_id, owner_id, text)
                if switched != session_id:
                    session_id = switched
                    watching.close()
                    watching.enter_context(prompt_modes.queue_watch(session_id, self._show, model))
            # What was queued runs before the conversation ends.
            self._wait_idle(session_id)

    def _enqueue(self, session_id: str, text: str, mode: str) -> None:
        busy = self._busy(session_id)
        try:
            waiting = prompt_modes.prompt_enqueue(
                session_id=session_id, owner_id=self.owner_id, text=text, mode=mode
            )
        except QueueFull as error:
            self.stderr.write(f"[{error.code}] {error}")
            return
        if not busy:
            return  # it runs now
        if mode == prompt_modes.STEER:
            self.stdout.write("[steer sent: the answer takes it at its next step]")
        else:
            self.stdout.write(f"[queued #{waiting.position + 1}: runs when the answer ends]")

    @staticmethod
    def _busy(session_id: str) -> bool:
        return prompt_modes.queue_busy(session_id)

    def _next_line(self, lines: queue.Queue, session_id: str) -> str | None:
        """The next input line (None at its end); Ctrl-C meanwhile aborts a running answer."""
        while True:
            try:
                return lines.get(timeout=0.1)
            except queue.Empty:
                continue
            except KeyboardInterrupt:
                if not self._busy(session_id):
                    raise
                turns.turn_abort(session_id=session_id, owner_id=self.owner_id)

    def _wait_idle(self, session_id: str) -> None:
        try:
            while self._busy(session_id):
                time.sleep(0.1)  # the turns run in threads of the queue runner
        except KeyboardInterrupt:
            turns.turn_abort(session_id=session_id, owner_id=self.owner_id)
            self._wait_idle(session_id)

    def _command(self, session_id: str, owner_id: int | None, line: str) -> str:
        """Run a slash command; returns the session the conversation continues in."""
        try:
            result = command_run(session_id=session_id, owner_id=owner_id, line=line)
        except SlashCommandError as error:
            self.stderr.write(f"[{error.code}] {error.message}")
            return session_id
        self.stdout.write(result.text)
        switch_to = result.data.get("switch_to")
        if switch_to:
            self.stdout.write(f"[now in {switch_to}]")
            return switch_to
        return session_id

    def _show(self, event: dict) -> None:
        kind = event["type"]
        if kind == "delta":
            self.stdout.write(event["text"], ending="")
            self.stdout.flush()
        elif kind == "entry":
            entry = event["entry"]
            if entry.role == "assistant" and entry.content:
                self.stdout.write("")  # end the streamed line
            for call in entry.tool_calls or ():
                self.stdout.write(f"  → {call['name']}({_compact(call['arguments'])})")
            if entry.role == "tool":
                marker = "✗" if entry.is_error else "←"
                self.stdout.write(f"  {marker} {entry.name}: {entry.content}")
            if entry.kind == "turn_end" and entry.data.get("status") != "completed":
                status, error = entry.data.get("status"), entry.data.get("error") or ""
                self.stdout.write(f"[{status}] {error}".rstrip())
        elif kind == "approval_request":
            # The turn waits for the person; this prompt cannot answer while the turn runs.
            self.stdout.write(
                f"  ? {event['tool']} waits for approval (call {event['call_id']}): answer in "
                "the web chat or with POST /api/sessions/<id>/approvals/<call>/; Ctrl-C stops"
            )


def _lines_of(stream) -> queue.Queue:
    """The stream's lines as they come, read by a thread of their own (None at the end): the
    terminal reads what is typed while an answer runs."""
    lines: queue.Queue = queue.Queue()

    def read():
        for line in iter(stream.readline, ""):
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, name="chat-input", daemon=True).start()
    return lines


def _compact(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), ensure_ascii=False, separators=(",", ":"))
    except ValueError:
        return arguments
