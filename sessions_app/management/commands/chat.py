"""`manage.py chat <session_id>`: talk to the configured model in a session from a terminal.

One input line is one message; the answer streams as it arrives, tool calls and their
results are shown as they happen. A line starting with `/` is a slash command, the same as
in the web chat (`/help` lists them; `/branch` continues in the copy). Ctrl-C during an
answer aborts the turn (the session stays valid); Ctrl-D or /quit ends the conversation.
Piped input works the same.
"""

import json
import sys
import threading

from django.core.management.base import BaseCommand, CommandError

from sessions_app import limits, services
from sessions_app.agents import UnknownAgent
from sessions_app.commands import CommandError as SlashCommandError
from sessions_app.commands import command_run
from sessions_app.management.commands._owners import owner_id_by_username
from sessions_app.runtime.turns import SessionBusy
from sessions_app.store import AgentMismatch, InvalidSessionId


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
            services.session_create(owner_id=owner_id, session_id=session_id, agent=agent)
        except services.SessionIdUnavailable as error:
            hint = " (a user's session: name its owner with --user)" if owner_id is None else ""
            raise CommandError(f"{error}{hint}") from error
        except (InvalidSessionId, UnknownAgent, AgentMismatch, limits.InputInvalid) as error:
            raise CommandError(str(error)) from error
        interactive = sys.stdin.isatty()
        while True:
            if interactive:
                self.stdout.write("you> ", ending="")
                self.stdout.flush()
            line = sys.stdin.readline()
            if not line:
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
            if text.startswith("/"):
                session_id = self._command(session_id, owner_id, text)
                continue
            outcome: dict = {}

            def run(text=text, outcome=outcome, session_id=session_id):
                try:
                    outcome["result"] = services.turn_send(
                        session_id=session_id,
                        owner_id=owner_id,
                        text=text,
                        on_event=self._show,
                        provider=model,
                    )
                except SessionBusy as busy:
                    outcome["busy"] = busy

            # The turn runs in a thread so that Ctrl-C here can abort it cleanly.
            worker = threading.Thread(target=run, name="chat-turn")
            worker.start()
            try:
                while worker.is_alive():
                    worker.join(0.1)
            except KeyboardInterrupt:
                services.turn_abort(session_id=session_id, owner_id=owner_id)
                worker.join()
            if "busy" in outcome:
                self.stderr.write(f"[busy] {outcome['busy']}")
            elif "result" in outcome and outcome["result"].status != "completed":
                result = outcome["result"]
                self.stdout.write(f"[{result.status}] {result.error}".rstrip())

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
        elif kind == "approval_request":
            # The turn waits for the person; this prompt cannot answer while the turn runs.
            self.stdout.write(
                f"  ? {event['tool']} waits for approval (call {event['call_id']}): answer in "
                "the web chat or with POST /api/sessions/<id>/approvals/<call>/; Ctrl-C stops"
            )


def _compact(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), ensure_ascii=False, separators=(",", ":"))
    except ValueError:
        return arguments
