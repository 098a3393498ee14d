// A share link's page (docs/design.md §24): the shared messages, rendered as the chat renders
// them, and for a signed-in reader a button that copies them into a session of their own.

import { api, errorText } from "./api.js";
import { attachmentsElement } from "./attachments.js";
import { $, el, icon } from "./dom.js";
import { renderMarkdownInto } from "./markdown.js";

const shared = JSON.parse($("shared-data").textContent);
const log = $("log");
const token = $("main").dataset.token;
// The files a message shows are read through the share, never the owner's file routes.
const sharedFileUrl = (fileId) =>
  "/api/shared/" + encodeURIComponent(token) + "/files/" + encodeURIComponent(fileId) + "/";

function userMessage(entry) {
  const bubble = el("article", "msg user");
  bubble.setAttribute("aria-label", "User");
  const files = entry.data && entry.data.attachments;
  if (Array.isArray(files) && files.length) bubble.appendChild(attachmentsElement(null, files, sharedFileUrl));
  bubble.appendChild(el("div", "text", entry.content));
  return bubble;
}

function assistantMessage(entry) {
  const bubble = el("article", "msg assistant");
  bubble.setAttribute("aria-label", "Jarvis");
  const who = el("div", "who");
  who.appendChild(icon("logo"));
  who.appendChild(el("span", "who-name", "Jarvis"));
  bubble.appendChild(who);
  const text = el("div", "text markdown");
  bubble.appendChild(text);
  if (entry.content) renderMarkdownInto(text, entry.content);
  for (const call of entry.tool_calls || []) {
    const details = el("details", "tool finished");
    details.dataset.callId = call.id;
    const summary = el("summary");
    summary.appendChild(icon("chevron"));
    summary.appendChild(icon("tool"));
    summary.appendChild(el("span", "tool-name", call.name));
    details.appendChild(summary);
    details.appendChild(el("div", "label", "Arguments"));
    details.appendChild(el("pre", "args", call.arguments));
    bubble.appendChild(details);
  }
  return bubble;
}

function toolResult(entry) {
  const details = log.querySelector(`details[data-call-id="${CSS.escape(entry.tool_call_id)}"]`);
  if (!details) return;
  details.classList.toggle("error", Boolean(entry.is_error));
  details.appendChild(el("div", "label", entry.is_error ? "Error" : "Result"));
  details.appendChild(el("pre", "result", entry.content));
}

function render() {
  for (const entry of shared.entries) {
    if (entry.role === "user") log.appendChild(userMessage(entry));
    else if (entry.role === "assistant") log.appendChild(assistantMessage(entry));
    else if (entry.role === "tool") toolResult(entry);
  }
}

const copy = $("shared-copy");
if (copy) {
  copy.addEventListener("click", async () => {
    copy.disabled = true;
    const result = await api("POST", "/api/shared/" + encodeURIComponent(copy.dataset.token) + "/copy/");
    if (result.ok) {
      window.location.href = "/?session=" + encodeURIComponent(result.data.id);
      return;
    }
    const notice = $("notice");
    notice.textContent = "Could not copy: " + errorText(result);
    notice.hidden = false;
    copy.disabled = false;
  });
}

// markdown-it and DOMPurify load deferred: render once the document is parsed.
if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", render);
else render();
