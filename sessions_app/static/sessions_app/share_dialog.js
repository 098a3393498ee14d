// The Share dialog (docs/design.md §24): make a read-only link to the open conversation,
// copy it (its token is shown once), and refresh or revoke the links already made.

import { api, errorText, sessionPath } from "./api.js";
import { $, el } from "./dom.js";

function sharesPath(sessionId) {
  return sessionPath(sessionId) + "shares/";
}

function describe(share) {
  const parts = ["Up to entry " + share.upto_seq];
  if (share.include_tools) parts.push("with tools");
  parts.push(share.expires_at ? "until " + new Date(share.expires_at).toLocaleDateString() : "no expiry");
  return "Link " + share.id + ": " + parts.join(" · ");
}

export function setupShareDialog({ sessionId }) {
  const dialog = $("share-dialog");
  const status = $("share-status");

  async function refreshList() {
    const result = await api("GET", sharesPath(sessionId()));
    const list = $("share-list");
    list.textContent = "";
    if (!result.ok) {
      status.textContent = "Could not load the links: " + errorText(result);
      return;
    }
    status.textContent = result.data.length ? "" : "No links yet.";
    for (const share of result.data) {
      const item = el("li", "share-item");
      item.appendChild(el("span", "share-text", describe(share)));
      const refresh = el("button", "tool-button", "Update to now");
      refresh.type = "button";
      refresh.setAttribute("aria-label", "Update link " + share.id + " to the conversation as it is now");
      refresh.addEventListener("click", async () => {
        const done = await api("POST", sharesPath(sessionId()) + share.id + "/refresh/");
        status.textContent = done.ok ? "Link " + share.id + " now shows up to entry " + done.data.upto_seq + "." : errorText(done);
        if (done.ok) refreshList();
      });
      const revoke = el("button", "tool-button danger", "Revoke");
      revoke.type = "button";
      revoke.setAttribute("aria-label", "Revoke link " + share.id);
      revoke.addEventListener("click", async () => {
        const done = await api("DELETE", sharesPath(sessionId()) + share.id + "/");
        status.textContent = done.ok ? "Link " + share.id + " revoked." : errorText(done);
        refreshList();
      });
      item.append(refresh, revoke);
      list.appendChild(item);
    }
  }

  $("share-open").addEventListener("click", () => {
    $("share-created").hidden = true;
    $("share-url").value = "";
    dialog.showModal();
    refreshList();
  });
  $("share-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const days = $("share-expiry").value;
    const body = { include_tools: $("share-tools").checked };
    if (days) body.expires_in_days = Number(days);
    const result = await api("POST", sharesPath(sessionId()), body);
    if (!result.ok) {
      status.textContent = "No link made: " + errorText(result);
      return;
    }
    $("share-url").value = location.origin + result.data.url;
    $("share-created").hidden = false;
    $("share-url").focus();
    $("share-url").select();
    refreshList();
  });
  $("share-copy").addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText($("share-url").value);
      status.textContent = "Link copied.";
    } catch (error) {
      $("share-url").select();
      status.textContent = "Select the link and copy it.";
    }
  });
}
