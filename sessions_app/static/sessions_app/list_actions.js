// Naming and ordering the sessions list (docs/design.md §24): each row's Pin, Rename and
// Archive, and the switch between the list and the archived sessions. Every change is a
// PATCH; the list itself is redrawn from the `/ws/me/` frame that follows (live_list.js), in
// this tab and every other.

import { api, errorText, sessionPath } from "./api.js";
import { el, iconButton } from "./dom.js";

const listing = { archived: false };

export function showingArchived() {
  return listing.archived;
}

async function patch(sessionId, body, onError) {
  const result = await api("PATCH", sessionPath(sessionId), body);
  if (!result.ok) onError("Not changed: " + errorText(result));
  return result.ok;
}

function startRenaming(item, session, { onChanged, onError }) {
  const name = item.querySelector(".session-name");
  if (!name || item.querySelector(".rename-form")) return;
  const form = el("form", "rename-form");
  const label = el("label", "visually-hidden", "New name for " + (session.title || session.id));
  const input = el("input");
  input.id = "rename-" + session.id;
  label.htmlFor = input.id;
  input.value = session.title || "";
  input.maxLength = 200;
  input.required = true;
  form.append(label, input);
  const stop = () => {
    form.remove();
    item.querySelector(".session-link").hidden = false;
  };
  input.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.preventDefault();
      stop();
      item.querySelector(".rename").focus();
    }
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!input.value.trim()) return;
    if (await patch(session.id, { title: input.value.trim() }, onError)) {
      stop();
      onChanged();
    }
  });
  item.querySelector(".session-link").hidden = true;
  item.prepend(form);
  input.focus();
  input.select();
}

// The row's buttons: Pin (a toggle), Rename, Archive or Unarchive.
export function rowActions(item, session, handlers) {
  const { onChanged, onError } = handlers;
  const box = el("div", "row-actions");
  const name = session.title || session.id;
  const pin = iconButton("pin", session.pinned ? "Unpin" : "Pin", "icon-button pin-session");
  pin.setAttribute("aria-pressed", session.pinned ? "true" : "false");
  pin.setAttribute("aria-label", "Pin " + name);
  pin.addEventListener("click", async () => {
    if (await patch(session.id, { pinned: !session.pinned }, onError)) onChanged();
  });
  const rename = iconButton("edit", "Rename", "icon-button rename");
  rename.setAttribute("aria-label", "Rename " + name);
  rename.addEventListener("click", () => startRenaming(item, session, handlers));
  const archive = iconButton(
    "archive",
    session.archived ? "Unarchive" : "Archive",
    "icon-button archive-session",
  );
  archive.setAttribute("aria-label", (session.archived ? "Unarchive " : "Archive ") + name);
  archive.addEventListener("click", async () => {
    if (await patch(session.id, { archived: !session.archived }, onError)) onChanged();
  });
  box.append(pin, rename, archive);
  return box;
}

// The "Archived" switch under the list: which sessions the list shows.
export function setupArchivedSwitch(button, onChanged) {
  button.setAttribute("aria-pressed", "false");
  button.addEventListener("click", () => {
    listing.archived = !listing.archived;
    button.setAttribute("aria-pressed", String(listing.archived));
    button.querySelector(".button-label").textContent = listing.archived
      ? "Back to sessions"
      : "Archived";
    onChanged();
  });
}
