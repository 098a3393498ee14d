// The web chat: one session per page (its id in the URL, so a reload reopens it), talking to
// the server over the session's WebSocket (DESIGN §8) and the JSON API (DESIGN §7).
// Plain JS, no build step. Every text from the server goes into the page through
// textContent, never as HTML.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const log = $("log");
  const promptBox = $("prompt");
  const sendButton = $("send");
  const abortButton = $("abort");

  const state = {
    sessionId: null,
    socket: null,
    lastSeq: 0,
    seen: new Set(), // seqs already on the page: a reconnect or a broadcast never doubles one
    callElements: new Map(), // tool_call_id -> the <details> showing that call
    live: null, // the bubble that streamed text is written into
    busy: false,
    attempts: 0,
    reconnectTimer: null,
    closingOnPurpose: false,
  };

  // --- HTTP -------------------------------------------------------------------------------

  function csrfToken() {
    const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    return match ? decodeURIComponent(match[1]) : "";
  }

  async function api(method, path, body) {
    const options = {
      method,
      credentials: "same-origin",
      headers: { Accept: "application/json" },
    };
    if (method !== "GET") {
      options.headers["X-CSRFToken"] = csrfToken();
    }
    if (body !== undefined) {
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    const response = await fetch(path, options);
    let data = null;
    try {
      data = await response.json();
    } catch (error) {
      data = null;
    }
    if (response.status === 401 || response.status === 403) {
      if (data && data.code === "not_authenticated") {
        window.location.href = "/accounts/login/?next=" + encodeURIComponent(location.pathname + location.search);
      }
    }
    return { status: response.status, ok: response.ok, data };
  }

  const sessionPath = (id) => "/api/sessions/" + encodeURIComponent(id) + "/";

  function errorText(result) {
    if (result.data && result.data.detail) {
      return result.data.detail + (result.data.code ? " (" + result.data.code + ")" : "");
    }
    return "the server answered " + result.status;
  }

  // --- small DOM helpers -------------------------------------------------------------------

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function showNotice(text, kind) {
    const notice = $("notice");
    notice.textContent = text;
    notice.dataset.kind = kind || "error";
    notice.hidden = !text;
  }

  function atBottom() {
    return log.scrollHeight - log.scrollTop - log.clientHeight < 80;
  }

  // The header can change height after the history is shown (the cost arrives, buttons
  // wrap); a reader who was at the latest message stays there when the log shrinks.
  let followLatest = true;
  log.addEventListener("scroll", () => {
    followLatest = atBottom();
  });
  new ResizeObserver(() => {
    if (followLatest) log.scrollTop = log.scrollHeight;
  }).observe(log);

  function append(node) {
    const stick = atBottom();
    if (state.live && state.live.parentNode === log) {
      log.insertBefore(node, state.live);
    } else {
      log.appendChild(node);
    }
    if (stick) log.scrollTop = log.scrollHeight;
  }

  function prettyArguments(raw) {
    try {
      return JSON.stringify(JSON.parse(raw), null, 2);
    } catch (error) {
      return raw;
    }
  }

  function shortArguments(raw) {
    const text = prettyArguments(raw).replace(/\s+/g, " ");
    return text.length > 60 ? text.slice(0, 57) + "…" : text;
  }

  // --- rendering entries -------------------------------------------------------------------

  function renderEntry(entry) {
    if (state.seen.has(entry.seq)) return;
    state.seen.add(entry.seq);
    state.lastSeq = Math.max(state.lastSeq, entry.seq);

    if (entry.kind === "message" && entry.role === "user") {
      const bubble = el("div", "msg user");
      bubble.dataset.seq = entry.seq;
      bubble.appendChild(el("div", "who", "You"));
      bubble.appendChild(el("div", "text", entry.content));
      append(bubble);
    } else if (entry.kind === "message" && entry.role === "assistant") {
      removeLive();
      const bubble = el("div", "msg assistant");
      bubble.dataset.seq = entry.seq;
      bubble.appendChild(el("div", "who", "Jarvis" + (entry.model ? " · " + entry.model : "")));
      if (entry.content) bubble.appendChild(el("div", "text", entry.content));
      for (const call of entry.tool_calls || []) {
        const details = el("details", "tool");
        details.dataset.callId = call.id;
        const summary = el("summary");
        summary.appendChild(el("span", "tool-name", "🔧 " + call.name));
        summary.appendChild(el("span", "tool-args", shortArguments(call.arguments)));
        summary.appendChild(el("span", "tool-state", "running…"));
        details.appendChild(summary);
        details.appendChild(el("div", "label", "arguments"));
        details.appendChild(el("pre", "", prettyArguments(call.arguments)));
        bubble.appendChild(details);
        state.callElements.set(call.id, details);
      }
      append(bubble);
    } else if (entry.kind === "message" && entry.role === "tool") {
      const details = state.callElements.get(entry.tool_call_id);
      if (details) {
        details.querySelector(".tool-state").textContent = entry.is_error ? "failed" : "done";
        details.classList.toggle("error", entry.is_error);
        details.appendChild(el("div", "label", entry.is_error ? "error" : "result"));
        details.appendChild(el("pre", "result", entry.content));
      } else {
        const orphan = el("details", "tool" + (entry.is_error ? " error" : ""));
        orphan.appendChild(el("summary", "", "🔧 " + entry.name + " result"));
        orphan.appendChild(el("pre", "result", entry.content));
        append(orphan);
      }
    } else if (entry.kind === "turn_end") {
      const status = (entry.data && entry.data.status) || "unknown";
      if (status !== "completed") {
        const error = entry.data && entry.data.error ? ": " + entry.data.error : "";
        append(el("div", "turn-status status-" + status, "turn " + status + error));
      }
    } else if (entry.kind === "turn_start") {
      // The user message right after it says everything a reader needs.
    } else if (entry.kind === "compaction") {
      const details = el("details", "compaction");
      details.appendChild(el("summary", "", "🗜 Earlier turns summarized"));
      details.appendChild(el("pre", "", (entry.data && entry.data.summary) || ""));
      append(details);
    } else {
      append(el("div", "system-note", entry.kind + " #" + entry.seq));
    }
  }

  function renderNotice(notice) {
    const bubble = el("div", "msg proactive");
    bubble.appendChild(el("div", "who", "🔔 Jarvis"));
    bubble.appendChild(el("div", "text", notice.content));
    append(bubble);
  }

  function renderCommandResult(event) {
    const box = el("div", "command-result");
    box.appendChild(el("div", "label", "/" + event.command));
    box.appendChild(el("pre", "", event.text));
    if (event.command === "export" && event.data && event.data.url) {
      const link = el("a", "", "download " + event.data.filename);
      link.href = event.data.url;
      link.setAttribute("download", event.data.filename);
      box.appendChild(link);
    }
    append(box);
  }

  function liveBubble() {
    if (!state.live) {
      state.live = el("div", "msg assistant streaming");
      state.live.appendChild(el("div", "who", "Jarvis"));
      state.live.appendChild(el("div", "text"));
      log.appendChild(state.live);
    }
    return state.live;
  }

  function removeLive() {
    if (state.live) {
      state.live.remove();
      state.live = null;
    }
  }

  function setBusy(busy) {
    state.busy = busy;
    abortButton.disabled = !busy;
    sendButton.disabled = busy;
  }

  function resetConversation() {
    log.textContent = "";
    state.lastSeq = 0;
    state.seen.clear();
    state.callElements.clear();
    state.live = null;
  }

  // --- the socket --------------------------------------------------------------------------

  function setConnection(stateName, text) {
    const badge = $("connection");
    badge.dataset.state = stateName;
    badge.textContent = text;
  }

  function connect() {
    clearTimeout(state.reconnectTimer);
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const url =
      scheme + location.host + "/ws/sessions/" + encodeURIComponent(state.sessionId) + "/" +
      (state.lastSeq ? "?after_seq=" + state.lastSeq : "");
    setConnection("connecting", "connecting…");
    const socket = new WebSocket(url);
    state.socket = socket;
    state.closingOnPurpose = false;

    socket.addEventListener("message", (message) => {
      let event;
      try {
        event = JSON.parse(message.data);
      } catch (error) {
        return;
      }
      handleEvent(event);
    });

    socket.addEventListener("close", (closeEvent) => {
      if (state.socket !== socket) return;
      state.socket = null;
      removeLive();
      setBusy(false);
      if (state.closingOnPurpose) {
        setConnection("closed", "closed");
        return;
      }
      if (closeEvent.code === 4401) {
        window.location.href = "/accounts/login/?next=" + encodeURIComponent(location.pathname + location.search);
        return;
      }
      if (closeEvent.code === 4400 || closeEvent.code === 4404) {
        setConnection("closed", "unavailable");
        showNotice(
          closeEvent.code === 4400
            ? "That is not a valid session id."
            : "No session of yours has this id.",
          "error",
        );
        return;
      }
      // Server restart, network loss, or an expired registration: come back with backoff.
      const delay = Math.min(15000, 500 * 2 ** state.attempts) + Math.random() * 300;
      state.attempts += 1;
      setConnection("reconnecting", "reconnecting…");
      state.reconnectTimer = setTimeout(connect, delay);
    });
  }

  // agent_end names the session's last seq: fetch any entry this tab did not receive.
  async function resyncUpTo(lastSeq) {
    const sessionId = state.sessionId;
    let after = 0;
    while (after < lastSeq && state.seen.has(after + 1)) after += 1;
    while (after < lastSeq) {
      const result = await api("GET", sessionPath(sessionId) + "entries/?after_seq=" + after);
      if (!result.ok || sessionId !== state.sessionId || !result.data.entries.length) return;
      for (const entry of result.data.entries) renderEntry(entry);
      after = result.data.next_after_seq;
    }
  }

  function handleEvent(event) {
    switch (event.type) {
      case "session": {
        state.attempts = 0;
        setConnection("open", "live");
        if (event.session.last_seq < state.lastSeq) {
          // Deleted meanwhile and opened again as a new session: the old page is stale.
          resetConversation();
        }
        showSessionMeta(event.session);
        const wasAtBottom = atBottom();
        for (const entry of event.entries) renderEntry(entry);
        // Opening or resuming a conversation shows its latest turn, as a chat app does.
        if (wasAtBottom || event.entries.length) log.scrollTop = log.scrollHeight;
        if (state.seen.size === 0 && !log.querySelector(".empty")) {
          log.appendChild(el("p", "empty", "Say hello — or try “what is 17*23?” to watch a tool call."));
        }
        for (const notice of event.notices || []) {
          if (!state.seen.has("notice:" + notice.message_id)) {
            state.seen.add("notice:" + notice.message_id);
            renderNotice(notice);
          }
        }
        refreshCost();
        break;
      }
      case "agent_start":
        setBusy(true);
        break;
      case "delta": {
        const empty = log.querySelector(".empty");
        if (empty) empty.remove();
        const stick = atBottom();
        liveBubble().querySelector(".text").textContent += event.text;
        if (stick) log.scrollTop = log.scrollHeight;
        break;
      }
      case "entry": {
        const empty = log.querySelector(".empty");
        if (empty) empty.remove();
        renderEntry(event.entry);
        break;
      }
      case "agent_end":
        removeLive();
        setBusy(false);
        if (event.last_seq) resyncUpTo(event.last_seq);
        refreshCost();
        refreshSessions();
        break;
      case "proactive":
        if (!state.seen.has("notice:" + event.notice.message_id)) {
          state.seen.add("notice:" + event.notice.message_id);
          renderNotice(event.notice);
        }
        break;
      case "command_result":
        renderCommandResult(event);
        if (event.command === "branch" && event.data && event.data.session) {
          openSession(event.data.session.id);
        } else if (event.command === "sessions") {
          refreshSessions();
        }
        break;
      case "error":
        showNotice(event.message + " (" + event.code + ")", "error");
        if (event.code === "session_busy") setBusy(true);
        break;
      case "pong":
        break;
      default:
        break;
    }
  }

  function send(frame) {
    if (!state.socket || state.socket.readyState !== WebSocket.OPEN) {
      showNotice("Not connected yet — your message was not sent.", "error");
      return false;
    }
    state.socket.send(JSON.stringify(frame));
    return true;
  }

  // --- sessions card -----------------------------------------------------------------------

  function showSessionMeta(session) {
    $("session-title").textContent = session.title || (session.parent_id ? "Branch" : "Conversation");
    $("session-id").textContent = session.id;
    const base = sessionPath(session.id) + "export/?format=";
    $("export-md").href = base + "md";
    $("export-json").href = base + "json";
    document.title = (session.title || session.id) + " · Jarvis";
  }

  function relativeTime(iso) {
    const seconds = Math.round((Date.now() - new Date(iso).getTime()) / 1000);
    if (seconds < 60) return "just now";
    if (seconds < 3600) return Math.floor(seconds / 60) + " min ago";
    if (seconds < 86400) return Math.floor(seconds / 3600) + " h ago";
    return new Date(iso).toLocaleDateString();
  }

  async function refreshSessions() {
    const result = await api("GET", "/api/sessions/");
    const list = $("session-list");
    if (!result.ok) {
      $("sessions-status").textContent = "Could not load sessions: " + errorText(result);
      return;
    }
    $("sessions-status").textContent = result.data.length ? "" : "No sessions yet.";
    list.textContent = "";
    for (const session of result.data) {
      if (session.id === state.sessionId) showSessionMeta(session);
      const item = el("li", "session-item" + (session.id === state.sessionId ? " current" : ""));
      item.dataset.sessionId = session.id;
      const link = el("a", "session-link");
      link.href = "/?session=" + encodeURIComponent(session.id);
      link.appendChild(el("span", "session-name", session.title || session.id));
      const meta = el("span", "session-meta", session.last_seq + " entries · " + relativeTime(session.updated_at));
      link.appendChild(meta);
      if (session.parent_id) {
        link.appendChild(el("span", "parent", "← " + session.parent_id));
      }
      item.appendChild(link);
      const remove = el("button", "icon danger", "✕");
      remove.type = "button";
      remove.title = "Delete " + session.id;
      remove.setAttribute("aria-label", "Delete session " + session.id);
      remove.addEventListener("click", () => deleteFromList(session.id, item));
      item.appendChild(remove);
      list.appendChild(item);
    }
  }

  async function deleteFromList(sessionId, item) {
    if (sessionId === state.sessionId) return deleteCurrent();
    if (!confirm("Delete session " + sessionId + " and the memory it produced?")) return;
    const result = await api("DELETE", sessionPath(sessionId));
    const old = item.querySelector(".row-error");
    if (old) old.remove();
    if (result.ok) {
      item.remove();
      return;
    }
    item.appendChild(el("p", "row-error", "Not deleted: " + errorText(result)));
  }

  async function refreshCost() {
    if (!state.sessionId) return;
    const result = await api("GET", sessionPath(state.sessionId) + "cost/");
    if (!result.ok) return;
    const total = result.data.total;
    const tokens = total.input_tokens + total.output_tokens;
    const usd = total.usd === null ? "cost unknown" : "$" + total.usd.toFixed(4);
    $("cost").textContent = tokens + " tokens · " + usd;
  }

  // --- actions -----------------------------------------------------------------------------

  function openSession(sessionId) {
    window.location.href = "/?session=" + encodeURIComponent(sessionId);
  }

  async function newSession() {
    const result = await api("POST", "/api/sessions/", {});
    if (!result.ok) {
      showNotice("Could not start a session: " + errorText(result), "error");
      return;
    }
    openSession(result.data.id);
  }

  async function branchCurrent() {
    const result = await api("POST", sessionPath(state.sessionId) + "branch/", {});
    if (!result.ok) {
      showNotice("Could not branch: " + errorText(result), "error");
      return;
    }
    openSession(result.data.id);
  }

  async function deleteCurrent() {
    if (!confirm("Delete this session and the memory it produced?")) return;
    // This tab's own socket would make the server refuse (session_connected): close it first.
    state.closingOnPurpose = true;
    clearTimeout(state.reconnectTimer);
    const socket = state.socket;
    if (socket) {
      await new Promise((resolve) => {
        socket.addEventListener("close", resolve, { once: true });
        socket.close(1000, "deleting");
        setTimeout(resolve, 2000);
      });
    }
    const result = await api("DELETE", sessionPath(state.sessionId));
    if (result.ok) {
      window.location.href = "/?deleted=" + encodeURIComponent(state.sessionId);
      return;
    }
    showNotice("Not deleted: " + errorText(result), "error");
    connect();
  }

  function submitPrompt() {
    const text = promptBox.value.trim();
    if (!text) return;
    showNotice("");
    if (send({ type: "prompt", text })) {
      promptBox.value = "";
    }
  }

  // --- start -------------------------------------------------------------------------------

  async function chooseSession() {
    const params = new URLSearchParams(location.search);
    const requested = params.get("session");
    if (requested) return requested;
    const deleted = params.get("deleted");
    const listing = await api("GET", "/api/sessions/?include_tests=false");
    const existing = listing.ok ? listing.data.filter((session) => session.id !== deleted) : [];
    if (existing.length) return existing[0].id;
    const created = await api("POST", "/api/sessions/", {});
    return created.ok ? created.data.id : null;
  }

  async function start() {
    const sessionId = await chooseSession();
    if (!sessionId) {
      showNotice("Could not open a session; reload to try again.", "error");
      return;
    }
    state.sessionId = sessionId;
    const url = new URL(location.href);
    url.searchParams.delete("deleted");
    url.searchParams.set("session", sessionId);
    history.replaceState(null, "", url);
    $("session-id").textContent = sessionId;
    connect();
    refreshSessions();
  }

  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    submitPrompt();
  });
  promptBox.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      submitPrompt();
    }
  });
  abortButton.addEventListener("click", () => send({ type: "abort" }));
  $("branch").addEventListener("click", branchCurrent);
  $("delete").addEventListener("click", deleteCurrent);
  $("new-session").addEventListener("click", newSession);
  window.addEventListener("focus", refreshSessions);
  // Keeps idle proxies from dropping the socket; the server answers pong.
  setInterval(() => {
    if (state.socket && state.socket.readyState === WebSocket.OPEN) send({ type: "ping" });
  }, 25000);

  start();
})();
