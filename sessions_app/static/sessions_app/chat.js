// The web chat: one session per page (its id in the URL, so a reload reopens it), talking to
// the server over the session's WebSocket and the JSON API (docs/api.md).
// Plain JS modules, no build step. Text from the server goes into the page through
// textContent; only assistant answers are rendered, as sanitized markdown (markdown.js).

import { api, errorText, goToLogin, sessionPath } from "./api.js";
import { attachmentsElement, setupAttachments } from "./attachments.js";
import { $, el, icon, iconButton } from "./dom.js";
import { setupDrawer } from "./drawer.js";
import { setupFamilyTree } from "./family_tree.js";
import { carriedKeptExports, carryKeptExports, keptExportsLine } from "./kept_exports.js";
import { rowActions, setupArchivedSwitch, showingArchived } from "./list_actions.js";
import { followSessionChanges } from "./live_list.js";
import { renderMarkdownInto } from "./markdown.js";
import { setupModelPicker, showModel, showThinking } from "./model_picker.js";
import { markNoticesSeen, unseenNotices } from "./notice_badges.js";
import { refreshReminders } from "./reminders.js";
import { refreshGoals } from "./goals.js";
import { setupSearch } from "./search.js";
import { setupShareDialog } from "./share_dialog.js";
import {
  RUN_CODE,
  codeElement,
  outputElement,
  runCodeArguments,
  runCodeSummary,
  runFilesElement,
  runResult,
} from "./run_code.js";
import { setupWorkspacePanel } from "./workspace_panel.js";

const log = $("log");
const promptBox = $("prompt");
const sendButton = $("send");
const abortButton = $("abort");
const steerButton = $("steer");

const SUGGESTIONS = ["what is 17*23?", "remember that my color is blue", "what time is it?"];
// The largest WebSocket message the server takes (WEBSOCKET_MESSAGE_MAX_BYTES, Daphne's cap).
const MESSAGE_MAX_BYTES = 1024 * 1024;
// Entries asked for per step when scrolling back; the server also stops a step at its byte
// budget, so a step through large messages stays small.
const OLDER_PAGE = 200;
// Older entries load when the reader is this close to the top of what is shown.
const OLDER_MARGIN_PX = 800;

const state = {
  sessionId: null,
  socket: null,
  lastSeq: 0,
  seen: new Set(), // seqs already on the page: a reconnect or a broadcast never doubles one
  turnStarts: new Map(), // turn_id -> seq of its turn_start: where an edit or regenerate branches
  // queue_ids whose turn has started: a `queued` from another worker may arrive after that
  // turn's agent_start, and must not show a message as waiting that already runs.
  startedQueueIds: new Set(),
  callElements: new Map(), // tool_call_id -> the <details> showing that call
  live: null, // the bubble streamed text is written into; it becomes the stored answer
  liveSource: "",
  liveRenderQueued: false,
  pendingPrompt: null, // text to send once the socket of a freshly switched-to branch is open
  busy: false,
  turnRunning: false, // between agent_start and agent_end
  liveTurn: null, // {turnId, eventSeq}: the running turn and the last of its events shown
  attempts: 0,
  reconnectTimer: null,
  closingOnPurpose: false,
  sessions: [], // the card's last listing, sub-agents' sessions included
  jumpToSeq: null, // an entry to scroll to once the history is shown (a search hit)
  oldestSeq: null, // the first seq shown: the conversation opens at its latest entries
  hasOlder: false, // entries before oldestSeq exist on the server
  loadingOlder: false,
  placeBefore: null, // while set, rendered entries go before this node (older ones, fetched stubs)
  // A search hit older than the first window opens a window around it: newer entries up to
  // the latest then load as the reader scrolls down, and live ones wait until they are reached.
  gapAfter: false,
  newestShown: 0, // while gapAfter: the last seq shown
  loadingNewer: false,
};

// --- notices, announcements, scrolling ---------------------------------------------------

// `content` is a text, or a node made of text and links (kept_exports.js); "" hides it.
function showNotice(content, kind) {
  const notice = $("notice");
  notice.textContent = "";
  notice.dataset.kind = kind || "error";
  notice.hidden = !content;
  if (!content) return;
  notice.appendChild(icon("alert"));
  notice.appendChild(typeof content === "string" ? el("span", "", content) : content);
}

// After a delete: where the session's exports still download (nothing when it had none).
function showKeptExports(sessionId, exports) {
  if (exports && exports.length) showNotice(keptExportsLine(sessionId, exports), "info");
}

// Screen readers hear the start and the finished text of an answer from this polite live
// region, not every streamed word.
function announce(text) {
  $("announcer").textContent = text;
}

function atBottom() {
  return log.scrollHeight - log.scrollTop - log.clientHeight < 80;
}

// The header can change height after the history is shown (the cost arrives, buttons wrap);
// a reader who was at the latest message stays there when the log shrinks.
let followLatest = true;
log.addEventListener("scroll", () => {
  followLatest = atBottom() && !state.gapAfter;
});
new ResizeObserver(() => {
  if (followLatest) log.scrollTop = log.scrollHeight;
}).observe(log);

// Scrolls to the entry with this seq and highlights it for a moment (a search hit); for an
// entry older than those shown, the page first shows the entries around it instead.
async function jumpTo(seq) {
  if (state.hasOlder && state.oldestSeq > seq) await openAround(seq);
  const target = log.querySelector('[data-seq="' + Number(seq) + '"]');
  if (!target) {
    showNotice("Entry #" + seq + " is not in this conversation any more.", "info");
    return;
  }
  followLatest = false;
  target.scrollIntoView({ block: "center" });
  target.classList.add("found");
  target.setAttribute("tabindex", "-1");
  target.focus({ preventScroll: true });
  target.addEventListener("animationend", () => target.classList.remove("found"), { once: true });
}

function append(node) {
  removeEmptyState();
  if (state.placeBefore) {
    log.insertBefore(node, state.placeBefore);
    return;
  }
  const stick = atBottom();
  if (state.live && state.live.parentNode === log) {
    log.insertBefore(node, state.live);
  } else {
    log.appendChild(node);
  }
  if (stick) log.scrollTop = log.scrollHeight;
}

function actionsOf(node) {
  let actions = node.querySelector(":scope > .msg-actions");
  if (!actions) {
    actions = el("div", "msg-actions");
    node.appendChild(actions);
  }
  return actions;
}

// --- the empty conversation --------------------------------------------------------------

function showEmptyState() {
  if (log.querySelector(".empty")) return;
  const empty = el("div", "empty");
  empty.appendChild(icon("logo"));
  empty.appendChild(el("h2", "", "How can I help?"));
  empty.appendChild(el("p", "", "Ask anything, or start with one of these."));
  const chips = el("div", "suggestions");
  for (const text of SUGGESTIONS) {
    const chip = el("button", "suggestion", text);
    chip.type = "button";
    chip.addEventListener("click", () => {
      promptBox.value = text;
      submitPrompt();
    });
    chips.appendChild(chip);
  }
  empty.appendChild(chips);
  log.appendChild(empty);
}

function removeEmptyState() {
  const empty = log.querySelector(".empty");
  if (empty) empty.remove();
}

// --- tool calls --------------------------------------------------------------------------

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

// A block of preformatted text scrolls sideways when its lines are long: it takes focus (so
// the keyboard can scroll it) and has a name saying what it holds.
function scrollablePre(className, text, label) {
  const pre = el("pre", className, text);
  pre.tabIndex = 0;
  pre.setAttribute("aria-label", label);
  return pre;
}

// A tool of an MCP server is offered as mcp__<server>__<tool> (docs/design.md §31): shown as
// its tool's name, with the server's beside it.
function mcpTool(name) {
  const match = /^mcp__(.+?)__(.+)$/.exec(name || "");
  return match ? { server: match[1], tool: match[2] } : null;
}

// "add (MCP server fake)" for an MCP tool, else the tool's name.
function toolTitle(name) {
  const mcp = mcpTool(name);
  return mcp ? mcp.tool + " (MCP server " + mcp.server + ")" : name;
}

function toolNameElements(name) {
  const mcp = mcpTool(name);
  if (!mcp) return [el("span", "tool-name", name)];
  const server = el("span", "tool-server", "MCP · " + mcp.server);
  server.title = "a tool of the MCP server " + mcp.server;
  return [el("span", "tool-name", mcp.tool), server];
}

function toolCallElement(call) {
  const details = el("details", "tool");
  details.dataset.callId = call.id;
  const summary = el("summary");
  summary.appendChild(icon("chevron"));
  summary.appendChild(icon("tool"));
  for (const part of toolNameElements(call.name)) summary.appendChild(part);
  const run = call.name === RUN_CODE ? runCodeArguments(call) : null;
  summary.appendChild(el("span", "tool-args", run ? runCodeSummary(run) : shortArguments(call.arguments)));
  summary.appendChild(el("span", "tool-state", "running…"));
  details.appendChild(summary);
  if (run) {
    // The code and what it printed are the point of a run: shown without a click.
    details.open = true;
    details.classList.add("run");
    details.appendChild(codeElement(run));
    return details;
  }
  details.appendChild(el("div", "label", "Arguments"));
  details.appendChild(scrollablePre("arguments", prettyArguments(call.arguments), toolTitle(call.name) + " arguments"));
  return details;
}

// --- delegate calls: a link to the sub-agent's session -----------------------------------

function delegatedAgent(call) {
  try {
    return JSON.parse(call.arguments).agent || null;
  } catch (error) {
    return null;
  }
}

// The sub-agent's session is the one of that agent this conversation spawned (one per
// conversation: agent_<name>__<id>), or the agent's own per-user session (agent_<name>:<user>).
// A per-task session is gone when the call returns: no link then.
function subAgentSession(agent) {
  const mine = state.sessions.filter((session) => session.agent === agent);
  return (
    mine.find((session) => session.spawned_by === state.sessionId) ||
    mine.find((session) => session.id.startsWith("agent_" + agent + ":")) ||
    null
  );
}

// Shown under the call, not inside it, so it is there without opening the call's details.
function delegateLink(call) {
  const agent = delegatedAgent(call);
  if (!agent) return null;
  const link = el("a", "delegate-link");
  link.dataset.agent = agent;
  link.appendChild(icon("agent"));
  link.appendChild(el("span", "", "Open " + agent + "'s session"));
  return link;
}

function linkDelegates(root = log) {
  for (const link of root.querySelectorAll(".delegate-link")) {
    const session = subAgentSession(link.dataset.agent);
    link.hidden = !session;
    if (session) link.href = "/?session=" + encodeURIComponent(session.id);
  }
}

// How long a tool ran, as a person reads it: "40 ms", "1.2 s".
function duration(ms) {
  return ms < 100 ? ms + " ms" : (ms / 1000).toFixed(1) + " s";
}

function renderToolResult(entry) {
  const details = state.callElements.get(entry.tool_call_id);
  if (!details) {
    const orphan = el("details", "tool" + (entry.is_error ? " error" : ""));
    const summary = el("summary");
    summary.appendChild(icon("chevron"));
    summary.appendChild(icon("tool"));
    for (const part of toolNameElements(entry.name)) summary.appendChild(part);
    summary.appendChild(el("span", "tool-args", "result"));
    orphan.appendChild(summary);
    const result = entry.name === RUN_CODE ? runResult(entry) : null;
    orphan.appendChild(
      result ? outputElement(result) : scrollablePre("result", entry.content, toolTitle(entry.name) + " result"),
    );
    // Its call may still come: scrolling back loads the entry before this one.
    orphan.dataset.resultFor = entry.tool_call_id;
    orphan.toolResult = entry;
    append(orphan);
    const files = result && runFilesElement(state.sessionId, entry, result);
    if (files) orphan.after(files);
    // The files shown under it (a run's, an MCP server's images) go with it when its call comes.
    orphan.runFiles = files || (result ? null : showToolFiles(orphan, entry));
    return;
  }
  showToolResult(details, entry);
}

function showToolResult(details, entry) {
  details.querySelector(".tool-state").textContent = entry.is_error ? "failed" : "done";
  const timing = (entry.data || {}).tool;
  if (timing && Number.isFinite(timing.duration_ms)) {
    // Beside the state, so the summary reads "done · 1.2 s" (docs/design.md §20).
    details.querySelector(".tool-state").after(el("span", "tool-time", " · " + duration(timing.duration_ms)));
  }
  details.classList.add("finished");
  const result = entry.name === RUN_CODE ? runResult(entry) : null;
  if (result) {
    details.appendChild(outputElement(result));
    details.classList.toggle("error", Boolean(result.killed) || result.exit_code !== 0);
    const files = runFilesElement(state.sessionId, entry, result);
    if (files) details.after(files);
    return;
  }
  details.classList.toggle("error", Boolean(entry.is_error));
  details.appendChild(el("div", "label", entry.is_error ? "Error" : "Result"));
  details.appendChild(scrollablePre("result", entry.content, toolTitle(entry.name || "tool") + " result"));
  showToolFiles(details, entry);
}

// Files a call kept (an MCP server's images): shown like a message's attachments, after the
// result and outside the folded details, so they are seen without opening the call. Returns
// the list (null when there is none).
function showToolFiles(details, entry) {
  const files = (entry.data || {}).files;
  if (!Array.isArray(files) || !files.length) return null;
  const list = attachmentsElement(state.sessionId, files);
  list.classList.add("tool-files");
  list.setAttribute("aria-label", "Files from " + toolTitle(entry.name || "the tool"));
  details.after(list);
  return list;
}

// --- approvals: a tool that asks first (docs/api.md) -------------------------------------

const APPROVAL_ENDINGS = {
  denied: "denied",
  timed_out: "no answer in time",
  aborted: "stopped",
};

// Allow / Deny on the waiting call. Sent on the socket; the answer's outcome comes back as
// `approval_end` (to every tab), which takes the buttons away.
function showApproval(request) {
  const details = state.callElements.get(request.call_id);
  if (!details || details.querySelector(".approval")) return;
  details.open = true;
  details.classList.add("waiting");
  details.querySelector(".tool-state").textContent = "waiting for your approval";
  const box = el("div", "approval");
  box.setAttribute("role", "group");
  const title = toolTitle(request.tool);
  box.setAttribute("aria-label", "Approval for " + title);
  box.appendChild(el("span", "approval-question", "Allow " + title + " to run?"));
  // What it would run with: the person decides on the call, not only the tool.
  const argumentsText = JSON.stringify(request.arguments || {});
  box.appendChild(
    el("code", "approval-arguments", argumentsText.length > 300 ? argumentsText.slice(0, 299) + "…" : argumentsText),
  );
  for (const [label, allow] of [
    ["Allow", true],
    ["Deny", false],
  ]) {
    const button = el("button", "approval-" + label.toLowerCase(), label);
    button.type = "button";
    button.setAttribute("aria-label", label + " " + title);
    button.addEventListener("click", () => {
      if (send({ type: "approval", call_id: request.call_id, allow })) {
        for (const each of box.querySelectorAll("button")) each.disabled = true;
      }
    });
    box.appendChild(button);
  }
  // Right under the call's name: the question is the first thing Tab reaches, before the
  // arguments (which take focus themselves, being scrollable).
  details.querySelector("summary").after(box);
  announce("Jarvis asks to run " + title + ": allow or deny.");
}

function endApproval(event) {
  const details = state.callElements.get(event.call_id);
  if (!details) return;
  const box = details.querySelector(".approval");
  if (box) box.remove();
  details.classList.remove("waiting");
  const ending = APPROVAL_ENDINGS[event.status];
  if (ending && !details.classList.contains("finished")) {
    details.querySelector(".tool-state").textContent = ending;
  } else if (event.status === "allowed") {
    details.querySelector(".tool-state").textContent = "running…";
  }
}

// --- messages ----------------------------------------------------------------------------

function assistantShell() {
  const bubble = el("article", "msg assistant");
  const who = el("div", "who");
  who.appendChild(icon("logo"));
  who.appendChild(el("span", "who-name", "Jarvis"));
  bubble.appendChild(who);
  bubble.appendChild(el("div", "text markdown"));
  return bubble;
}

function renderUserMessage(entry) {
  const steered = Boolean(entry.data && entry.data.steer);
  const bubble = el("article", "msg user" + (steered ? " steered" : ""));
  bubble.dataset.seq = entry.seq;
  bubble.setAttribute("aria-label", steered ? "You, steering the answer" : "You");
  if (steered) unqueue(entry.data.queue_id);
  // An edit or a regenerate branches just before this message's turn, so the branch never
  // holds half a turn. The turn_start is stored right before its user message.
  const turnStart = state.turnStarts.get(entry.turn_id) ?? entry.seq;
  bubble.dataset.branchAt = String(turnStart - 1);
  const files = entry.data && entry.data.attachments;
  if (Array.isArray(files) && files.length) bubble.appendChild(attachmentsElement(state.sessionId, files));
  bubble.appendChild(el("div", "text", entry.content));
  const edit = iconButton("edit", "Edit", "msg-action edit-message");
  edit.setAttribute("aria-label", "Edit message");
  edit.addEventListener("click", () => startEditing(bubble));
  actionsOf(bubble).appendChild(edit);
  append(bubble);
}

function renderAssistantMessage(entry, { live, placed }) {
  // An entry placed into the history (an older one, a fetched stub) is not the streamed one.
  const streamed = placed ? null : takeLiveBubble();
  const bubble = streamed || assistantShell();
  bubble.dataset.seq = entry.seq;
  bubble.setAttribute("aria-label", "Jarvis");
  if (entry.model) bubble.querySelector(".who").appendChild(el("span", "who-model", entry.model));
  const text = bubble.querySelector(".text");
  if (entry.content) {
    renderMarkdownInto(text, entry.content);
  } else {
    text.remove();
  }
  for (const call of entry.tool_calls || []) {
    const details = toolCallElement(call);
    bubble.appendChild(details);
    state.callElements.set(call.id, details);
    const orphan = placed && log.querySelector('.tool[data-result-for="' + CSS.escape(call.id) + '"]');
    if (orphan) {
      // The orphan (and the files shown under it) may be what older entries are being
      // placed before.
      const after = orphan.runFiles || orphan;
      if (state.placeBefore === orphan || state.placeBefore === orphan.runFiles) {
        state.placeBefore = after.nextSibling;
      }
      if (orphan.runFiles) orphan.runFiles.remove();
      orphan.remove();
      showToolResult(details, orphan.toolResult);
    }
    const link = call.name === "delegate" ? delegateLink(call) : null;
    if (link) bubble.appendChild(link);
  }
  linkDelegates(bubble);
  if (!streamed || !bubble.isConnected) append(bubble);
  if (live && entry.content) announce("Jarvis answered: " + text.textContent);
  // A tool step is followed by more work: keep showing that Jarvis is busy.
  if (!placed && state.busy && (entry.tool_calls || []).length) liveBubble();
}

const STATUS_TEXT = {
  aborted: "Stopped before the answer was finished.",
  max_turns: "Stopped: this request used all of its steps.",
  error: "The answer failed",
  interrupted: "Interrupted: the server stopped while answering.",
};

function renderTurnEnd(entry, { live }) {
  const status = (entry.data && entry.data.status) || "unknown";
  if (status === "completed") return;
  const line = el("div", "turn-status");
  line.dataset.status = status;
  line.appendChild(icon("alert"));
  const detail = entry.data && entry.data.error ? ": " + entry.data.error : "";
  const text = (STATUS_TEXT[status] || "Turn ended: " + status) + (status === "error" ? detail : "");
  line.appendChild(el("span", "", text));
  append(line);
  if (live) announce(text);
}

const COMPACTION_REASONS = {
  auto: "to fit the model's window",
  overflow: "the model refused a request as too long",
  manual: "by /compact",
};

// "Compacted here": from this point on the model sees a summary of the turns above instead of
// the turns themselves; the summary opens on demand.
function renderCompaction(entry) {
  const data = entry.data || {};
  const details = el("details", "compaction");
  const summary = el("summary");
  summary.appendChild(icon("chevron"));
  summary.appendChild(icon("summary"));
  let label = "Compacted here: earlier turns summarized";
  if (COMPACTION_REASONS[data.reason]) label += " " + COMPACTION_REASONS[data.reason];
  if (data.tokens_before && data.tokens_after) {
    label += " (" + kiloTokens(data.tokens_before) + " → " + kiloTokens(data.tokens_after) + " tokens)";
  }
  summary.appendChild(el("span", "", label));
  details.appendChild(summary);
  details.appendChild(scrollablePre("", (entry.data && entry.data.summary) || "", "Summary"));
  append(details);
}

// A branch made by edit, regenerate or `/branch at` tells what the path it left behind did,
// above the new path; open, since it is the one thing a reader of the branch cannot see.
function renderBranchSummary(entry) {
  const data = entry.data || {};
  const details = el("details", "branch-summary");
  details.open = true;
  const summary = el("summary");
  summary.appendChild(icon("chevron"));
  summary.appendChild(icon("branch"));
  summary.appendChild(el("span", "", "Branched from " + (data.from_session || "?") + " at #" + data.at_seq + ": what that path did"));
  details.appendChild(summary);
  details.appendChild(el("pre", "", data.summary || ""));
  append(details);
}

// agent_end names the session's last seq: fetch any entry this tab did not receive.
async function resyncUpTo(lastSeq) {
  const sessionId = state.sessionId;
  if (state.gapAfter) return; // the entries after the window load as the reader scrolls down
  // Entries before the oldest one shown are not missing: they load when scrolled to.
  let after = Math.max(0, (state.oldestSeq || 1) - 1);
  while (after < lastSeq && state.seen.has(after + 1)) after += 1;
  while (after < lastSeq) {
    const result = await api("GET", sessionPath(sessionId) + "entries/?after_seq=" + after);
    if (!result.ok || sessionId !== state.sessionId || !result.data.entries.length) return;
    for (const entry of result.data.entries) renderEntry(entry);
    after = result.data.next_after_seq;
  }
}

function renderEntry(entry, { live = false, placed = false } = {}) {
  if (state.seen.has(entry.seq)) return;
  if (state.gapAfter && !placed && entry.seq > state.newestShown + 1) {
    // Shown when the reader scrolls down to it.
    state.lastSeq = Math.max(state.lastSeq, entry.seq);
    return;
  }
  state.seen.add(entry.seq);
  state.lastSeq = Math.max(state.lastSeq, entry.seq);
  if (entry.truncated) {
    renderStub(entry, { live });
  } else if (entry.kind === "turn_start") {
    // The user message right after it says everything a reader needs.
    state.turnStarts.set(entry.turn_id, entry.seq);
  } else if (entry.kind === "message" && entry.role === "user") {
    renderUserMessage(entry);
  } else if (entry.kind === "message" && entry.role === "assistant") {
    renderAssistantMessage(entry, { live, placed });
  } else if (entry.kind === "message" && entry.role === "tool") {
    renderToolResult(entry);
  } else if (entry.kind === "turn_end") {
    renderTurnEnd(entry, { live });
  } else if (entry.kind === "compaction") {
    renderCompaction(entry);
  } else if (entry.kind === "branch_summary") {
    renderBranchSummary(entry);
  } else if (entry.kind === "model_change") {
    const data = entry.data || {};
    append(el("div", "system-note", "Model changed to " + (data.to || "?")));
    // An older change, loaded while scrolling back, is not the session's model now.
    if (data.to && !placed) showModel(data.to);
  } else if (entry.kind === "thinking_change") {
    const data = entry.data || {};
    append(el("div", "system-note", "Thinking set to " + (data.to || "?")));
    if (data.to && !placed) showThinking(data.to);
  } else {
    append(el("div", "system-note", entry.kind + " #" + entry.seq));
  }
}

// An entry too large for a WebSocket frame arrives as a stub (its preview and size): shown as
// a placeholder while the whole entry comes over HTTP, then rendered in its place.
function renderStub(entry, { live }) {
  if (live && entry.kind === "message" && entry.role === "assistant") {
    // Its text streamed into the live bubble; the fetched entry takes its place.
    removeLive();
  }
  const holder = el("div", "entry-loading");
  holder.dataset.stubSeq = entry.seq;
  holder.setAttribute("aria-busy", "true");
  holder.appendChild(el("span", "entry-loading-label", "Loading a large message (" + megabytes(entry.size) + ")…"));
  holder.appendChild(el("div", "entry-loading-preview", entry.preview || ""));
  append(holder);
  if (live && state.busy) liveBubble();
  fetchWholeEntry(entry.seq, holder);
}

function megabytes(bytes) {
  return (bytes / (1024 * 1024)).toFixed(1) + " MB";
}

async function fetchWholeEntry(seq, holder) {
  const sessionId = state.sessionId;
  const result = await api("GET", sessionPath(sessionId) + "entries/?after_seq=" + (seq - 1) + "&limit=1");
  if (sessionId !== state.sessionId || !holder.isConnected) return;
  const entry = result.ok ? result.data.entries[0] : null;
  if (!entry || entry.seq !== seq) {
    holder.removeAttribute("aria-busy");
    holder.querySelector(".entry-loading-label").textContent =
      "This message could not be loaded: " + (result.ok ? "it is gone" : errorText(result));
    return;
  }
  const stick = atBottom();
  state.seen.delete(seq);
  placeBefore(holder, () => renderEntry(entry, { placed: true }));
  holder.remove();
  if (stick) log.scrollTop = log.scrollHeight;
  refreshAnswerActions();
}

// Runs `render` with every node it appends going before `node` instead of at the end.
function placeBefore(node, render) {
  const previous = state.placeBefore;
  state.placeBefore = node;
  try {
    render();
  } finally {
    state.placeBefore = previous;
  }
}

// --- older entries: the conversation opens at its latest ones ----------------------------

// The line at the top of the log: older entries are loading, or this is the beginning.
function historyStart() {
  let marker = log.querySelector(":scope > .history-start");
  if (!marker) {
    marker = el("div", "history-start");
    log.insertBefore(marker, log.firstChild);
  }
  marker.textContent = state.hasOlder ? "Loading earlier messages…" : "Beginning of the conversation";
  marker.dataset.more = String(state.hasOlder);
  return marker;
}

// Loads the entries just before the oldest one shown, keeping what the reader sees in place.
// Returns whether a page came.
async function loadOlder() {
  if (state.loadingOlder || !state.hasOlder) return false;
  const sessionId = state.sessionId;
  state.loadingOlder = true;
  let result;
  try {
    result = await api(
      "GET",
      sessionPath(sessionId) + "entries/?before_seq=" + state.oldestSeq + "&limit=" + OLDER_PAGE,
    );
  } finally {
    state.loadingOlder = false;
  }
  if (sessionId !== state.sessionId) return false;
  if (!result.ok) {
    showNotice("Could not load earlier messages: " + errorText(result), "error");
    return false;
  }
  const { entries, next_before_seq: nextBefore } = result.data;
  const marker = historyStart();
  const fromBottom = log.scrollHeight - log.scrollTop;
  placeBefore(marker.nextSibling, () => {
    for (const entry of entries) renderEntry(entry, { placed: true });
  });
  if (entries.length) state.oldestSeq = entries[0].seq;
  state.hasOlder = nextBefore !== null && entries.length > 0;
  historyStart();
  log.scrollTop = log.scrollHeight - fromBottom;
  refreshAnswerActions();
  return true;
}

// Keeps loading while the reader is near the top (or the log does not fill the screen yet).
async function fillOlder() {
  while (state.hasOlder && !state.loadingOlder && log.scrollTop < OLDER_MARGIN_PX) {
    if (!(await loadOlder())) return;
  }
}

log.addEventListener("scroll", () => {
  if (log.scrollTop < OLDER_MARGIN_PX) fillOlder();
  if (state.gapAfter && log.scrollHeight - log.scrollTop - log.clientHeight < OLDER_MARGIN_PX) {
    fillNewer();
  }
});

// --- a window around an older entry (a search hit) -----------------------------------------

const AROUND = 20; // entries shown on each side of the entry a search hit opens

async function openAround(seq) {
  const sessionId = state.sessionId;
  const path = sessionPath(sessionId) + "entries/?";
  const [before, after] = await Promise.all([
    api("GET", path + "before_seq=" + (seq + 1) + "&limit=" + (AROUND + 1)),
    api("GET", path + "after_seq=" + seq + "&limit=" + AROUND),
  ]);
  if (sessionId !== state.sessionId) return;
  if (!before.ok || !after.ok) {
    showNotice("Could not open that entry: " + errorText(before.ok ? after : before), "error");
    return;
  }
  const lastSeq = state.lastSeq;
  removeLive();
  log.textContent = "";
  state.seen.clear();
  state.turnStarts.clear();
  state.callElements.clear();
  state.gapAfter = true;
  state.newestShown = seq;
  state.oldestSeq = before.data.entries.length ? before.data.entries[0].seq : seq;
  state.hasOlder = before.data.next_before_seq !== null;
  historyStart();
  for (const entry of before.data.entries) renderEntry(entry, { placed: true });
  showNewer(after.data.entries);
  state.lastSeq = Math.max(state.lastSeq, lastSeq);
  followLatest = false;
  refreshAnswerActions();
}

// The line at the end of a window around an older entry: newer ones load below it.
function historyEnd() {
  let marker = log.querySelector(":scope > .history-end");
  if (!marker) {
    marker = el("div", "history-end", "Loading newer messages…");
    log.appendChild(marker);
  }
  return marker;
}

function showNewer(entries) {
  placeBefore(historyEnd(), () => {
    for (const entry of entries) {
      renderEntry(entry, { placed: true });
      state.newestShown = Math.max(state.newestShown, entry.seq);
    }
  });
  if (!entries.length || state.newestShown >= state.lastSeq) {
    // Reached the latest: from here on the page is live again.
    state.gapAfter = false;
    historyEnd().remove();
  }
}

async function fillNewer() {
  if (state.loadingNewer || !state.gapAfter) return;
  const sessionId = state.sessionId;
  state.loadingNewer = true;
  let result;
  try {
    result = await api(
      "GET",
      sessionPath(sessionId) + "entries/?after_seq=" + state.newestShown + "&limit=" + OLDER_PAGE,
    );
  } finally {
    state.loadingNewer = false;
  }
  if (sessionId !== state.sessionId || !state.gapAfter) return;
  if (!result.ok) {
    showNotice("Could not load newer messages: " + errorText(result), "error");
    return;
  }
  showNewer(result.data.entries);
  refreshAnswerActions();
  // Entries stored meanwhile: keep going while the reader is still at the end.
  if (state.gapAfter && log.scrollHeight - log.scrollTop - log.clientHeight < OLDER_MARGIN_PX) {
    fillNewer();
  }
}

function renderNotice(notice) {
  if (state.seen.has("notice:" + notice.message_id)) return;
  state.seen.add("notice:" + notice.message_id);
  markNoticesSeen(state.sessionId, [notice]);
  const bubble = el("article", "msg assistant proactive");
  bubble.setAttribute("aria-label", "Notice from Jarvis");
  const who = el("div", "who");
  who.appendChild(icon("bell"));
  who.appendChild(el("span", "who-name", "Jarvis · notice"));
  bubble.appendChild(who);
  const text = el("div", "text markdown");
  renderMarkdownInto(text, notice.content);
  bubble.appendChild(text);
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

// --- the streaming answer ----------------------------------------------------------------

function liveBubble() {
  if (!state.live) {
    removeEmptyState();
    state.live = assistantShell();
    state.live.classList.add("pending");
    state.live.setAttribute("aria-busy", "true");
    state.live.querySelector(".text").appendChild(typingDots());
    const stick = atBottom();
    // While a gap is open the answer streams out of sight; its entry shows when reached.
    if (!state.gapAfter) log.appendChild(state.live);
    if (stick) log.scrollTop = log.scrollHeight;
  }
  return state.live;
}

function typingDots() {
  const dots = el("span", "typing");
  dots.setAttribute("aria-label", "Jarvis is working");
  dots.setAttribute("role", "img");
  for (let index = 0; index < 3; index += 1) dots.appendChild(el("span"));
  return dots;
}

function appendDelta(text) {
  const bubble = liveBubble();
  if (!state.liveSource) {
    bubble.classList.remove("pending");
    bubble.classList.add("streaming");
  }
  state.liveSource += text;
  // Deltas can arrive faster than the screen refreshes: render at most once per frame.
  if (state.liveRenderQueued) return;
  state.liveRenderQueued = true;
  requestAnimationFrame(renderLive);
}

function renderLive() {
  state.liveRenderQueued = false;
  if (!state.live || !state.liveSource) return;
  const stick = atBottom();
  renderMarkdownInto(state.live.querySelector(".text"), state.liveSource);
  if (stick) log.scrollTop = log.scrollHeight;
}

// The stored answer takes over the bubble its text streamed into, so it does not blink.
function takeLiveBubble() {
  const bubble = state.live;
  state.live = null;
  state.liveSource = "";
  if (!bubble) return null;
  bubble.classList.remove("pending", "streaming");
  bubble.removeAttribute("aria-busy");
  const dots = bubble.querySelector(".typing");
  if (dots) dots.remove();
  return bubble;
}

function removeLive() {
  if (state.live) state.live.remove();
  state.live = null;
  state.liveSource = "";
}

// --- edit, regenerate, copy --------------------------------------------------------------

function startEditing(bubble) {
  if (bubble.classList.contains("editing")) return;
  const text = bubble.querySelector(".text");
  const form = el("form", "edit-form");
  const box = el("textarea");
  box.value = text.textContent;
  box.setAttribute("aria-label", "Edited message");
  box.rows = Math.min(10, box.value.split("\n").length + 1);
  const buttons = el("div", "edit-buttons");
  const cancel = el("button", "", "Cancel");
  cancel.type = "button";
  const save = el("button", "primary", "Send");
  save.type = "submit";
  buttons.append(cancel, save);
  form.append(box, buttons);
  bubble.classList.add("editing");
  bubble.insertBefore(form, text);

  const stop = () => {
    form.remove();
    bubble.classList.remove("editing");
    bubble.querySelector(".edit-message").focus();
  };
  cancel.addEventListener("click", stop);
  box.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.stopPropagation();
      stop();
    } else if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const edited = box.value.trim();
    if (!edited) return;
    save.disabled = true;
    if (!(await branchAndSend(Number(bubble.dataset.branchAt), edited))) save.disabled = false;
  });
  box.focus();
  box.setSelectionRange(box.value.length, box.value.length);
}

// Edit and regenerate never rewrite history: the conversation is copied up to just before the
// turn, the text is sent in the copy, and the page moves to it. The original stays as it was.
async function branchAndSend(atSeq, text) {
  showNotice("");
  const result = await api("POST", sessionPath(state.sessionId) + "branch/", { at_seq: atSeq });
  if (!result.ok) {
    showNotice("Could not branch: " + errorText(result), "error");
    return false;
  }
  switchSession(result.data.id, { prompt: text });
  return true;
}

function regenerate(userBubble) {
  return branchAndSend(Number(userBubble.dataset.branchAt), userBubble.querySelector(".text").textContent);
}

// The last answer (or the failure that ended the last turn) offers Regenerate while idle.
function refreshAnswerActions() {
  for (const button of log.querySelectorAll(".regenerate")) {
    const actions = button.parentElement;
    button.remove();
    if (!actions.children.length) actions.remove();
  }
  const users = log.querySelectorAll(".msg.user[data-seq]");
  const lastUser = users[users.length - 1];
  // Regenerate belongs to the conversation's last answer, which a window around an older
  // entry does not show.
  if (state.busy || !lastUser || state.gapAfter) return;
  const endings = log.querySelectorAll(".msg.assistant[data-seq]:not(.proactive), .turn-status");
  const last = endings[endings.length - 1];
  if (!last || !(lastUser.compareDocumentPosition(last) & Node.DOCUMENT_POSITION_FOLLOWING)) return;
  const button = iconButton("regenerate", "Regenerate", "msg-action regenerate");
  button.setAttribute("aria-label", "Regenerate answer");
  button.addEventListener("click", () => {
    button.disabled = true;
    regenerate(lastUser).then((switched) => {
      button.disabled = switched;
    });
  });
  actionsOf(last).appendChild(button);
}

async function writeClipboard(text) {
  if (navigator.clipboard && window.isSecureContext) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch (error) {
      // Permission refused: the selection copy below may still work.
    }
  }
  // A page served over plain http (not localhost) has no async clipboard.
  const area = el("textarea", "offscreen");
  area.value = text;
  area.setAttribute("readonly", "");
  document.body.appendChild(area);
  area.select();
  let copied = false;
  try {
    copied = document.execCommand("copy");
  } catch (error) {
    copied = false;
  }
  area.remove();
  return copied;
}

async function copyCode(button) {
  const code = button.closest(".code-block").querySelector("pre");
  const copied = await writeClipboard(code.textContent);
  button.classList.toggle("copied", copied);
  button.querySelector("use").setAttribute("href", copied ? "#icon-check" : "#icon-copy");
  button.querySelector(".copy-label").textContent = copied ? "Copied" : "Copy failed";
  announce(copied ? "Code copied to the clipboard." : "Could not copy the code.");
  clearTimeout(button.resetTimer);
  button.resetTimer = setTimeout(() => {
    button.classList.remove("copied");
    button.querySelector("use").setAttribute("href", "#icon-copy");
    button.querySelector(".copy-label").textContent = "Copy";
  }, 2000);
}

log.addEventListener("click", (event) => {
  const button = event.target.closest("button.copy-code");
  if (button) copyCode(button);
});

// --- busy state and the conversation's lifetime ------------------------------------------

// While an answer runs the composer stays usable: Enter queues the message behind the answer,
// Steer (Ctrl+Enter) sends it into the answer, Stop ends it (docs/design.md §18).
function setBusy(busy) {
  state.busy = busy;
  abortButton.disabled = !busy;
  abortButton.hidden = !busy;
  steerButton.disabled = !busy;
  steerButton.hidden = !busy;
  sendButton.setAttribute("aria-label", busy ? "Queue" : "Send");
  $("composer").classList.toggle("busy", busy);
  if (!busy && document.activeElement === steerButton) promptBox.focus();
  refreshAnswerActions();
}

// --- messages waiting for the running answer ---------------------------------------------

function showQueued(item) {
  const list = $("queue-list");
  if (list.querySelector('[data-queue-id="' + CSS.escape(item.queue_id) + '"]')) return;
  const row = el("li", "queue-item");
  row.dataset.queueId = item.queue_id;
  row.appendChild(el("span", "queue-mode", item.mode === "steer" ? "steer" : "next"));
  row.appendChild(el("span", "queue-text", item.text));
  const cancel = el("button", "tool-button queue-cancel", "Cancel");
  cancel.type = "button";
  cancel.setAttribute("aria-label", "Cancel: " + item.text);
  cancel.addEventListener("click", () => send({ type: "queue_cancel", queue_id: item.queue_id }));
  row.appendChild(cancel);
  list.appendChild(row);
  $("queue").hidden = false;
}

function unqueue(queueId) {
  if (!queueId) return false;
  const row = $("queue-list").querySelector('[data-queue-id="' + CSS.escape(queueId) + '"]');
  if (!row) return false;
  const hadFocus = row.contains(document.activeElement);
  row.remove();
  $("queue").hidden = !$("queue-list").children.length;
  if (hadFocus) promptBox.focus();
  return true;
}

function showQueue(items) {
  $("queue-list").textContent = "";
  $("queue").hidden = true;
  for (const item of items || []) showQueued(item);
}

function resetConversation() {
  log.textContent = "";
  state.lastSeq = 0;
  state.oldestSeq = null;
  state.hasOlder = false;
  state.gapAfter = false;
  state.newestShown = 0;
  state.seen.clear();
  state.turnStarts.clear();
  state.startedQueueIds.clear();
  state.callElements.clear();
  state.live = null;
  state.liveSource = "";
  state.turnRunning = false;
  state.liveTurn = null;
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
  socket.addEventListener("close", (closeEvent) => onSocketClosed(socket, closeEvent));
}

function onSocketClosed(socket, closeEvent) {
  if (state.socket !== socket) return;
  state.socket = null;
  state.turnRunning = false;
  state.liveTurn = null;
  removeLive();
  setBusy(false);
  if (state.closingOnPurpose) {
    setConnection("closed", "closed");
    return;
  }
  if (closeEvent.code === 4401) {
    goToLogin();
    return;
  }
  if (closeEvent.code === 1009) {
    // The server refused a frame this page sent as too large; the session itself is fine.
    showNotice("That message was too large to send (at most " + megabytes(MESSAGE_MAX_BYTES) + ").", "error");
  }
  if (closeEvent.code === 4400 || closeEvent.code === 4404) {
    setConnection("closed", "unavailable");
    showNotice(
      closeEvent.code === 4400 ? "That is not a valid session id." : "No session of yours has this id.",
      "error",
    );
    return;
  }
  // Server restart, network loss, or an expired registration: come back with backoff.
  const delay = Math.min(15000, 500 * 2 ** state.attempts) + Math.random() * 300;
  state.attempts += 1;
  setConnection("reconnecting", "reconnecting…");
  state.reconnectTimer = setTimeout(connect, delay);
}

function closeSocket() {
  state.closingOnPurpose = true;
  clearTimeout(state.reconnectTimer);
  const socket = state.socket;
  state.socket = null;
  if (socket) socket.close(1000, "leaving");
}

function onSessionSnapshot(event) {
  state.attempts = 0;
  setConnection("open", "live");
  if (event.session.last_seq < state.lastSeq) {
    // Deleted meanwhile and opened again as a new session: the old page is stale.
    resetConversation();
  } else if (state.lastSeq && event.first_seq > state.lastSeq + 1) {
    // More came while away than one frame holds: the frame is the latest entries, with a
    // gap before them; start over from those.
    resetConversation();
  }
  if (state.oldestSeq === null) {
    state.oldestSeq = event.first_seq;
    state.hasOlder = event.has_more;
    if (state.hasOlder) historyStart();
  }
  showSessionMeta(event.session);
  showQueue(event.queue);
  workspace.refresh();
  const wasAtBottom = atBottom();
  for (const entry of event.entries) renderEntry(entry);
  for (const notice of event.notices || []) renderNotice(notice);
  // A tab opened or reloaded while a call waits can still answer it; its turn is running.
  for (const request of event.approvals || []) showApproval(request);
  if ((event.approvals || []).length) {
    state.turnRunning = true;
    setBusy(true);
  }
  if (event.running) showRunning(event.running);
  // Opening or resuming a conversation shows its latest turn, as a chat app does; a search hit
  // opens it at the entry found instead.
  if (state.jumpToSeq !== null) {
    jumpTo(state.jumpToSeq);
    state.jumpToSeq = null;
  } else {
    if (wasAtBottom || event.entries.length) log.scrollTop = log.scrollHeight;
    fillOlder();
  }
  if (state.seen.size === 0 && !state.hasOlder && !state.pendingPrompt) showEmptyState();
  refreshContextMeter();
  refreshCost();
  if (state.pendingPrompt) {
    // The branch's copied answer must not offer Regenerate while its new request starts.
    const text = state.pendingPrompt;
    state.pendingPrompt = null;
    setBusy(send({ type: "prompt", text }));
  } else {
    refreshAnswerActions();
  }
}

// A turn running when the socket opened (docs/design.md §17): its streamed text so far and
// Stop; the events after the snapshot continue from there.
function showRunning(running) {
  state.turnRunning = true;
  state.liveTurn = { turnId: running.turn_id, eventSeq: running.event_seq };
  setBusy(true);
  removeLive();
  liveBubble();
  if (running.text_from) appendDelta("… ");
  if (running.text) appendDelta(running.text);
  // Its calls still running (running.tools) are in the snapshot's entries, shown "running…"
  // (or waiting for approval) until their results arrive.
}

// Each event of a turn carries its number: one already shown (the snapshot held it) is not
// shown again.
function alreadyShown(event) {
  if (!event.event_seq || !event.turn_id) return false;
  const live = state.liveTurn;
  if (live && live.turnId === event.turn_id) {
    if (event.event_seq <= live.eventSeq) return true;
    live.eventSeq = event.event_seq;
  } else {
    state.liveTurn = { turnId: event.turn_id, eventSeq: event.event_seq };
  }
  return false;
}

function handleEvent(event) {
  if (alreadyShown(event)) return;
  switch (event.type) {
    case "session":
      onSessionSnapshot(event);
      break;
    case "agent_start":
      state.turnRunning = true;
      setBusy(true);
      liveBubble();
      if (event.queue_id) state.startedQueueIds.add(event.queue_id);
      announce(unqueue(event.queue_id) ? "A waiting message started." : "Jarvis is answering…");
      break;
    case "queued":
      // With no answer running it starts at once: nothing to show as waiting.
      if (!state.turnRunning || state.startedQueueIds.has(event.queue_id)) break;
      showQueued(event);
      announce(event.mode === "steer" ? "Steer sent: " + event.text : "Queued: " + event.text);
      break;
    case "queue_cancelled":
      if (unqueue(event.queue_id)) announce("Queued message cancelled.");
      break;
    case "delta":
      appendDelta(event.text);
      break;
    case "entry":
      renderEntry(event.entry, { live: true });
      // A run that changed files: the Workspace panel lists them now.
      if (event.entry.role === "tool" && event.entry.name === RUN_CODE) {
        workspace.refresh({ changed: true });
      }
      break;
    case "compaction_start":
      announce("Compacting earlier turns so the conversation fits the model…");
      break;
    case "compaction_end":
      announce("Earlier turns compacted.");
      refreshContextMeter();
      break;
    case "agent_end":
      refreshContextMeter();
      state.turnRunning = false;
      state.liveTurn = null;
      removeLive();
      setBusy(false);
      // A turn that could not store its end (the database was away) says why here only.
      if (event.code === "database_unavailable") showNotice(event.error, "error");
      if (event.last_seq) resyncUpTo(event.last_seq);
      refreshCost();
      refreshSessions();
      refreshReminders();
      refreshGoals();
      break;
    case "approval_request":
      showApproval(event);
      break;
    case "approval_end":
      endApproval(event);
      break;
    case "proactive":
      renderNotice(event.notice);
      refreshReminders();
      refreshGoals();
      break;
    case "command_result":
      renderCommandResult(event);
      if (event.command === "goal" || event.command === "goals") refreshGoals();
      if (event.command === "branch" && event.data && event.data.session) {
        switchSession(event.data.session.id);
      } else if (event.command === "sessions") {
        refreshSessions();
      }
      break;
    case "error":
      showNotice(event.message + " (" + event.code + ")", "error");
      // A refused prompt (busy session, too many turns, bad input) starts no turn.
      if (!state.turnRunning) setBusy(event.code === "session_busy");
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
  const text = JSON.stringify(frame);
  const size = new TextEncoder().encode(text).length;
  if (size > MESSAGE_MAX_BYTES) {
    showNotice(
      "This message is too large to send (" + megabytes(size) + "; at most " + megabytes(MESSAGE_MAX_BYTES) + ").",
      "error",
    );
    return false;
  }
  state.socket.send(text);
  return true;
}

// --- the header and the sessions card ----------------------------------------------------

function showSessionMeta(session) {
  $("session-title").textContent = session.title || (session.parent_id ? "Branch" : "New conversation");
  $("session-id").textContent = session.id;
  const base = sessionPath(session.id) + "export/?format=";
  $("export-md").href = base + "md";
  $("export-json").href = base + "json";
  document.title = (session.title || session.id) + " · Jarvis";
  showModel(session.model);
  showThinking(session.thinking);
}

function relativeTime(iso) {
  const seconds = Math.round((Date.now() - new Date(iso).getTime()) / 1000);
  if (seconds < 60) return "just now";
  if (seconds < 3600) return Math.floor(seconds / 60) + " min ago";
  if (seconds < 86400) return Math.floor(seconds / 3600) + " h ago";
  return new Date(iso).toLocaleDateString();
}

function sessionItem(session, unseen) {
  const current = session.id === state.sessionId;
  const item = el("li", "session-item" + (current ? " current" : ""));
  item.dataset.sessionId = session.id;
  const link = el("a", "session-link");
  link.href = "/?session=" + encodeURIComponent(session.id);
  if (current) link.setAttribute("aria-current", "page");
  const name = el("span", "session-name");
  if (session.spawned_by) name.appendChild(icon("agent"));
  if (session.pinned) {
    name.appendChild(icon("pin"));
    name.appendChild(el("span", "visually-hidden", "Pinned: "));
  }
  name.appendChild(el("span", "", session.title || session.id));
  link.appendChild(name);
  link.appendChild(el("span", "session-meta", session.last_seq + " entries · " + relativeTime(session.updated_at)));
  if (session.parent_id) {
    const parent = el("span", "parent");
    parent.appendChild(icon("branch"));
    parent.appendChild(el("span", "", "from " + session.parent_id));
    link.appendChild(parent);
  }
  if (unseen && !current) link.appendChild(noticeBadge(unseen));
  item.appendChild(link);
  const remove = el("button", "icon-button delete-session");
  remove.type = "button";
  remove.title = "Delete " + session.id;
  remove.setAttribute("aria-label", "Delete session " + (session.title || session.id));
  remove.appendChild(icon("trash"));
  remove.addEventListener("click", () => deleteFromList(session.id));
  if (!session.spawned_by) {
    item.appendChild(
      rowActions(item, session, { onChanged: refreshSessions, onError: (text) => showNotice(text, "error") }),
    );
  }
  item.appendChild(remove);
  const refused = rowErrors.get(session.id);
  if (refused) item.appendChild(el("p", "row-error", refused));
  return item;
}

function noticeBadge(count) {
  const badge = el("span", "notice-badge");
  badge.appendChild(icon("bell"));
  badge.appendChild(el("span", "visually-hidden", count === 1 ? "1 new notice" : count + " new notices"));
  badge.appendChild(el("span", "notice-count", String(count)));
  badge.lastChild.setAttribute("aria-hidden", "true");
  return badge;
}

// Sub-agents' sessions are listed under the conversation that spawned them; one whose
// conversation is gone (or not listed) stands on its own.
function sessionTree(sessions, unseen) {
  const listed = new Set(sessions.map((session) => session.id));
  const children = new Map();
  for (const session of sessions) {
    if (!session.spawned_by || !listed.has(session.spawned_by)) continue;
    if (!children.has(session.spawned_by)) children.set(session.spawned_by, []);
    children.get(session.spawned_by).push(session);
  }
  const itemWithChildren = (session) => {
    const item = sessionItem(session, unseen.get(session.id));
    const nested = children.get(session.id);
    if (nested) {
      const list = el("ul", "subagents");
      list.setAttribute("aria-label", "Sub-agents of " + (session.title || session.id));
      for (const child of nested) list.appendChild(itemWithChildren(child));
      item.appendChild(list);
    }
    return item;
  };
  return sessions
    .filter((session) => !session.spawned_by || !listed.has(session.spawned_by))
    .map(itemWithChildren);
}

async function refreshSessions() {
  // Frames of the live list can come in a burst: only the latest answer is drawn.
  const asked = (state.listAsks = (state.listAsks || 0) + 1);
  const result = await api("GET", "/api/sessions/?include_subagents=true&archived=" + showingArchived());
  if (asked !== state.listAsks) return;
  const list = $("session-list");
  if (!result.ok) {
    $("sessions-status").textContent = "Could not load sessions: " + errorText(result);
    return;
  }
  state.sessions = result.data;
  linkDelegates();
  const current = result.data.find((session) => session.id === state.sessionId);
  if (current) showSessionMeta(current);
  const unseen = await unseenNotices(
    result.data
      .filter((session) => session.id !== state.sessionId && !session.spawned_by)
      .map((session) => session.id),
  );
  $("sessions-status").textContent = result.data.length
    ? ""
    : showingArchived()
      ? "No archived sessions."
      : "No sessions yet.";
  list.textContent = "";
  for (const item of sessionTree(result.data, unseen)) list.appendChild(item);
}

// Why a listed session was not deleted, by session id: kept until the next try, so a redraw
// of the list (a live frame, another tab's change) does not wipe the reason away.
const rowErrors = new Map();

async function deleteFromList(sessionId) {
  if (sessionId === state.sessionId) return deleteCurrent();
  if (!confirm("Delete session " + sessionId + " and the memory it produced?")) return;
  rowErrors.delete(sessionId);
  const result = await api("DELETE", sessionPath(sessionId));
  // The row as drawn now: the list may have been drawn again while the request ran.
  const item = document.querySelector(`.session-item[data-session-id="${CSS.escape(sessionId)}"]`);
  const old = item && item.querySelector(":scope > .row-error");
  if (old) old.remove();
  if (result.ok) {
    if (item) item.remove();
    showKeptExports(sessionId, result.data.exports);
    return;
  }
  const refused = "Not deleted: " + errorText(result);
  rowErrors.set(sessionId, refused);
  if (item) item.appendChild(el("p", "row-error", refused));
}

function kiloTokens(count) {
  return count >= 1000 ? (count / 1000).toFixed(count >= 10000 ? 0 : 1) + "k" : String(count);
}

// The context meter: how much of the model's window the next request takes (docs/design.md §22).
async function refreshContextMeter() {
  const sessionId = state.sessionId;
  if (!sessionId) return;
  const result = await api("GET", sessionPath(sessionId) + "context/?format=openai&tokens_only=true");
  if (!result.ok || sessionId !== state.sessionId) return;
  const tokens = result.data.tokens;
  const meter = $("context-meter");
  meter.max = tokens.window;
  meter.high = tokens.window - tokens.reserve;
  meter.value = tokens.used;
  $("context-text").textContent = kiloTokens(tokens.used) + " / " + kiloTokens(tokens.window) + " context";
  // Past what a request may take: the next turn compacts first.
  $("context").dataset.over = String(tokens.used > tokens.window - tokens.reserve);
  $("context").dataset.used = String(tokens.used);
  $("context").hidden = false;
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

// Moves this page to another session without reloading it; `prompt` is sent there as soon as
// its socket is open (an edit or a regenerate).
function switchSession(sessionId, { prompt = null } = {}) {
  // Files are uploaded to one session: another one cannot be sent them.
  if (sessionId !== state.sessionId) attachments.clear();
  closeSocket();
  resetConversation();
  setBusy(false);
  showNotice("");
  state.sessionId = sessionId;
  state.jumpToSeq = null;
  state.pendingPrompt = prompt;
  history.pushState(null, "", "/?session=" + encodeURIComponent(sessionId));
  $("session-id").textContent = sessionId;
  $("cost").textContent = "";
  drawer.close();
  connect();
  refreshSessions();
  promptBox.focus();
}

async function newSession() {
  const result = await api("POST", "/api/sessions/", {});
  if (!result.ok) {
    showNotice("Could not start a session: " + errorText(result), "error");
    return;
  }
  switchSession(result.data.id);
}

async function branchCurrent() {
  const result = await api("POST", sessionPath(state.sessionId) + "branch/", {});
  if (!result.ok) {
    showNotice("Could not branch: " + errorText(result), "error");
    return;
  }
  switchSession(result.data.id);
}

// The server learns that this tab's socket closed a moment after the browser does, so a
// refusal with session_connected right after closing it is retried briefly before it counts
// (another tab that really has the session open still gets the refusal shown).
async function deleteAfterOwnSocketClosed(sessionId) {
  let result = await api("DELETE", sessionPath(sessionId));
  for (let attempt = 0; attempt < 4; attempt += 1) {
    if (result.ok || !(result.data && result.data.code === "session_connected")) break;
    await new Promise((resolve) => setTimeout(resolve, 150 * 2 ** attempt));
    result = await api("DELETE", sessionPath(sessionId));
  }
  return result;
}

async function deleteCurrent() {
  if (!confirm("Delete this session and the memory it produced?")) return;
  // This tab's own socket would make the server refuse (session_connected): close it first.
  const socket = state.socket;
  closeSocket();
  if (socket && socket.readyState !== WebSocket.CLOSED) {
    await new Promise((resolve) => {
      socket.addEventListener("close", resolve, { once: true });
      setTimeout(resolve, 2000);
    });
  }
  const result = await deleteAfterOwnSocketClosed(state.sessionId);
  if (result.ok) {
    carryKeptExports(state.sessionId, result.data.exports);
    window.location.href = "/?deleted=" + encodeURIComponent(state.sessionId);
    return;
  }
  showNotice("Not deleted: " + errorText(result), "error");
  connect();
}

// The page always says what a message should do if an answer is running: `queue` (Enter),
// `steer` (Ctrl+Enter) or `interrupt` (Alt+Enter); with no answer running, each one simply
// starts the next turn.
function submitPrompt(mode = "queue") {
  const text = promptBox.value.trim();
  if (!text) return;
  showNotice("");
  if (state.gapAfter) {
    // A new message belongs after the latest one: reopen the conversation there first.
    promptBox.value = "";
    fitPrompt();
    switchSession(state.sessionId, { prompt: text });
    return;
  }
  const files = attachments.ready();
  if (files === null) {
    showNotice("A file is still uploading — send once it is attached.", "error");
    return;
  }
  const frame = files.length ? { type: "prompt", text, mode, attachments: files } : { type: "prompt", text, mode };
  if (send(frame)) {
    attachments.clear();
    promptBox.value = "";
    fitPrompt();
    // The reader's own message, and the answer, show at the end of the conversation.
    log.scrollTop = log.scrollHeight;
  }
}

// The composer grows with its text up to the limit the stylesheet sets, then scrolls.
function fitPrompt() {
  promptBox.style.height = "auto";
  promptBox.style.height = promptBox.scrollHeight + 2 + "px";
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
  const deleted = new URLSearchParams(location.search).get("deleted");
  const keptExports = carriedKeptExports(deleted);
  const sessionId = await chooseSession();
  if (!sessionId) {
    showNotice("Could not open a session; reload to try again.", "error");
    return;
  }
  state.sessionId = sessionId;
  const seq = Number(new URLSearchParams(location.search).get("seq"));
  if (seq > 0) state.jumpToSeq = seq;
  const url = new URL(location.href);
  url.searchParams.delete("deleted");
  url.searchParams.set("session", sessionId);
  history.replaceState(null, "", url);
  $("session-id").textContent = sessionId;
  showKeptExports(deleted, keptExports);
  connect();
  refreshSessions();
  refreshReminders();
  refreshGoals();
}

const drawer = setupDrawer({
  toggle: $("sessions-toggle"),
  drawer: $("sessions"),
  closeButton: $("sessions-close"),
  backdrop: $("drawer-backdrop"),
  behind: [$("main"), document.querySelector(".topbar")],
});

$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  submitPrompt();
});
promptBox.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    // Ctrl+Enter steers the running answer; Alt+Enter stops it and sends this instead.
    const mode = event.ctrlKey || event.metaKey ? "steer" : event.altKey ? "interrupt" : "queue";
    submitPrompt(mode);
  }
});
steerButton.addEventListener("click", () => {
  submitPrompt("steer");
  promptBox.focus();
});
promptBox.addEventListener("input", fitPrompt);
abortButton.addEventListener("click", () => send({ type: "abort" }));
$("branch").addEventListener("click", branchCurrent);
$("delete").addEventListener("click", deleteCurrent);
$("new-session").addEventListener("click", newSession);
window.addEventListener("focus", () => {
  refreshSessions();
  refreshReminders();
  refreshGoals();
});
setupModelPicker({ sessionId: () => state.sessionId, onError: (text) => showNotice(text, "error") });
const attachments = setupAttachments({
  sessionId: () => state.sessionId,
  onError: (text) => showNotice(text, "error"),
  announce,
});
setupSearch();
// The list follows every change made in any tab or on any device (docs/design.md §24).
followSessionChanges(() => refreshSessions());
setupArchivedSwitch($("show-archived"), refreshSessions);
setupShareDialog({ sessionId: () => state.sessionId });
const workspace = setupWorkspacePanel({ sessionId: () => state.sessionId, announce });
setupFamilyTree({ sessionId: () => state.sessionId, open: (sessionId) => switchSession(sessionId) });
// Back and forward between sessions this page switched to: open the one in the URL.
window.addEventListener("popstate", () => window.location.reload());
// Keeps idle proxies from dropping the socket; the server answers pong.
setInterval(() => {
  if (state.socket && state.socket.readyState === WebSocket.OPEN) send({ type: "ping" });
}, 25000);

start();
