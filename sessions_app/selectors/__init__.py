"""The read door of sessions_app: every read the API, the sockets, the page, the commands and
the other apps make, shaped as they show it.

Ownership is checked here: a session that is missing and a session of another user look the
same to the caller (SessionNotFound -> 404 / close 4404), so ids cannot be probed.

Callers import this package (`from sessions_app import selectors`); its modules group the
reads by what they read: sessions and their entries, one turn's log, exports, search.
"""

from sessions_app.selectors.exports import export_json, export_markdown, session_export_documents
from sessions_app.selectors.files import (
    FileNotFound,
    blob_chunks,
    blobs_of_sessions,
    file_get,
    file_open,
    file_thumbnail,
)
from sessions_app.selectors.kept_exports import (
    EXPORT_FORMATS,
    KeptExport,
    export_url,
    exports_dir,
    kept_export,
    kept_exports,
    kept_exports_of_session,
)
from sessions_app.selectors.search import (
    SEARCH_OFFSET_MAX,
    SEARCH_PAGE_DEFAULT,
    SEARCH_PAGE_MAX,
    SEARCH_QUERY_MAX_CHARS,
    search_hit_to_api,
    search_messages,
    search_snippet_html,
)
from sessions_app.selectors.sessions import (
    ENTRY_API_FIELDS,
    MAX_ENTRIES_PAGE,
    SNAPSHOT_FIRST_READ,
    approvals_pending,
    entry_to_api,
    notice_to_api,
    notices_of_sockets,
    session_agent_conflict,
    session_context,
    session_delivery_target,
    session_detail,
    session_entries,
    session_find,
    session_get,
    session_list,
    session_notices,
    session_snapshot,
    session_to_api,
    sessions_of_owner,
)
from sessions_app.selectors.tools import tools_offered
from sessions_app.selectors.tree import session_tree
from sessions_app.selectors.turns import (
    TurnLog,
    TurnNotFound,
    request_header_of,
    turn_log,
    turn_requests,
    turn_timeline,
)
from sessions_app.selectors.workspace import workspace_file_open, workspace_get
from sessions_app.store import EntryRecord, Notice, SessionMeta, SessionNotFound

__all__ = [
    "FileNotFound",
    "workspace_file_open",
    "workspace_get",
    "blob_chunks",
    "blobs_of_sessions",
    "file_get",
    "file_open",
    "file_thumbnail",
    "EntryRecord",
    "Notice",
    "SessionMeta",
    "SessionNotFound",
    "ENTRY_API_FIELDS",
    "MAX_ENTRIES_PAGE",
    "SEARCH_OFFSET_MAX",
    "EXPORT_FORMATS",
    "KeptExport",
    "SEARCH_PAGE_DEFAULT",
    "SEARCH_PAGE_MAX",
    "SEARCH_QUERY_MAX_CHARS",
    "SNAPSHOT_FIRST_READ",
    "TurnLog",
    "TurnNotFound",
    "approvals_pending",
    "entry_to_api",
    "export_json",
    "export_markdown",
    "export_url",
    "exports_dir",
    "kept_export",
    "kept_exports",
    "kept_exports_of_session",
    "notice_to_api",
    "notices_of_sockets",
    "request_header_of",
    "search_hit_to_api",
    "search_messages",
    "search_snippet_html",
    "session_agent_conflict",
    "session_context",
    "session_delivery_target",
    "session_detail",
    "session_entries",
    "session_export_documents",
    "session_find",
    "session_get",
    "session_list",
    "session_notices",
    "session_snapshot",
    "session_to_api",
    "session_tree",
    "tools_offered",
    "sessions_of_owner",
    "turn_log",
    "turn_requests",
    "turn_timeline",
]
