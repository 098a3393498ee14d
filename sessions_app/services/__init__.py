"""Every write to sessions that the web, the API and the WebSocket make (docs/design.md §6–§8).

One module per action family; import from the family module (this package
re-exports nothing):

- `approvals`: Deciding a tool approval request.
- `broadcasts`: A session's events sent to its open tabs through the channel layer.
- `connections`: Live WebSocket connections: open, heartbeat, close.
- `deletion`: Deleting sessions: one, a parent's sub-agent sessions, every session of a user.
- `notices`: A session's proactive notices: add one (a 🔔 message), mark one delivered.
- `sessions`: A session's life: create, branch, choose its model, compact, cost, export.
- `turns`: A turn: send a message (run the turn), abort it.
- `branch_summaries`: What the path a branch leaves behind did, as a `branch_summary` entry (docs/design.md §20).
- `cleanup`: `/cleanup` and `manage.py cleanup_sessions`: what can go, and removing it when confirmed.
- `compaction`: `/compact`: replace a session's older turns in the model's context by a summary.
- `foreign_import`: Bring your history (docs/design.md §21): a ChatGPT export or an openai-agents database
- `prompt_modes`: Talking to a running turn (docs/design.md §18): queue, steer, interrupt, and running what
- `seed_files`: The seed's file layout, written and read back (docs/design.md §20).
- `transfer`: Moving a user's sessions between installations and backends in the seed's file layout

The store (sessions_app.store) holds conversations and whatever differs between backends,
and the registry of live connections; this module adds ownership, the checks against live
connections that make delete safe, exports, proactive notices and the channel-layer
broadcasts that keep every open tab of a session in step.

Locking rule shared by `session_delete` and `connection_open`: both take the session's lock
(`store.locked`: one transaction holding it) before they look at live connections or at the
conversation, so each sees the other whole.
"""
