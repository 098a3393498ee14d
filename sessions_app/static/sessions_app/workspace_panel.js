// The Workspace panel (docs/design.md §28): the files Jarvis's code keeps in this
// conversation (`GET /api/sessions/{id}/workspace/`), each a download link to its current
// content. The Files button opens and closes it and shows how many files there are; the
// list is read again when the session changes and after each run that changed the files.
// Where this server runs no code (no bubblewrap, a probe that failed), the panel says why
// (`GET /api/tools/`'s `sandbox.reason`).

import { api, sessionPath } from "./api.js";
import { sizeText } from "./attachments.js";
import { $, el, icon } from "./dom.js";

// A workspace path in a URL: each segment escaped, the slashes kept.
function workspaceFileUrl(sessionId, path) {
  return sessionPath(sessionId) + "workspace/" + path.split("/").map(encodeURIComponent).join("/");
}

export function setupWorkspacePanel({ sessionId, announce }) {
  const toggle = $("workspace-open");
  const panel = $("workspace");
  const list = $("workspace-files");
  const status = $("workspace-status");
  const count = $("workspace-count");
  const close = $("workspace-close");
  const noSandbox = $("workspace-no-sandbox");
  let asked = 0; // answers to older requests (another session's) are dropped
  let sandboxAsked = false;

  async function showSandbox() {
    sandboxAsked = true;
    const result = await api("GET", "/api/tools/");
    const sandbox = result.ok && result.data && result.data.sandbox;
    if (sandbox && sandbox.run_code === false) {
      noSandbox.textContent = "Code cannot run on this server: " + (sandbox.reason || "no sandbox").replace(/\.$/, "") + ".";
      noSandbox.hidden = false;
    }
  }

  function show(open) {
    panel.hidden = !open;
    toggle.setAttribute("aria-expanded", String(open));
  }

  function render(id, body) {
    list.textContent = "";
    for (const file of body.files) {
      const item = el("li");
      const link = el("a", "workspace-file");
      link.href = workspaceFileUrl(id, file.path);
      link.download = file.path.split("/").pop();
      link.appendChild(icon("download"));
      link.appendChild(el("span", "workspace-path", file.path));
      link.appendChild(el("span", "attachment-size", sizeText(file.size || 0)));
      item.appendChild(link);
      list.appendChild(item);
    }
    const n = body.files.length;
    count.textContent = String(n);
    toggle.title = n === 1 ? "1 file in this conversation's workspace" : n + " files in this conversation's workspace";
    status.textContent = n ? "" : "No files yet. Files that Jarvis's code writes are kept here.";
  }

  async function refresh({ changed = false } = {}) {
    const id = sessionId();
    if (!id) return;
    const mine = ++asked;
    const result = await api("GET", sessionPath(id) + "workspace/");
    if (mine !== asked || id !== sessionId()) return;
    if (!result.ok || !result.data || !Array.isArray(result.data.files)) {
      status.textContent = "The files cannot be listed right now.";
      return;
    }
    render(id, result.data);
    if (changed && !panel.hidden) announce("Workspace updated: " + result.data.files.length + " files");
  }

  toggle.addEventListener("click", () => {
    const open = panel.hidden;
    show(open);
    if (open) {
      refresh();
      if (!sandboxAsked) showSandbox();
      panel.focus();
    }
  });
  close.addEventListener("click", () => {
    show(false);
    toggle.focus();
  });
  panel.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      show(false);
      toggle.focus();
    }
  });

  return { refresh };
}
