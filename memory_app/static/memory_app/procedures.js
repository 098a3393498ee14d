// "Procedures" in the sessions card (docs/design.md §29): how Jarvis handles a kind of task
// that has gone well three times, drafted for the person to judge. Each draft has Approve and
// Reject; an approved one reaches the model from the next turn on (§22) and can be stopped
// (rejected) again. GET /api/me/procedures/, PATCH /api/me/procedures/{id}/ {status}. Read on
// load and whenever the window gets focus (consolidation drafts them in the background).

import { api, errorText } from "../sessions_app/api.js";

const list = document.getElementById("procedure-list");
const status = document.getElementById("procedures-status");

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function decideButton(label, procedure, next) {
  const button = el("button", "small procedure-action", label);
  button.type = "button";
  // Named with the procedure, so a screen reader's list of buttons says which one it is.
  button.setAttribute("aria-label", label + " procedure: " + procedure.title);
  button.addEventListener("click", () => decide(procedure, next, button));
  return button;
}

function procedureItem(procedure) {
  const item = el("li", "procedure-item");
  item.dataset.procedureId = procedure.id;
  item.dataset.status = procedure.status;
  const text = el("div", "procedure-text");
  text.appendChild(el("span", "procedure-name", procedure.title));
  text.appendChild(el("span", "procedure-steps", procedure.steps.join(" ")));
  const state = procedure.status === "draft" ? "draft · waiting for you" : "approved · in use";
  text.appendChild(el("span", "procedure-state", state));
  item.appendChild(text);
  if (procedure.status === "draft") {
    item.appendChild(decideButton("Approve", procedure, "approved"));
    item.appendChild(decideButton("Reject", procedure, "rejected"));
  } else {
    item.appendChild(decideButton("Stop using", procedure, "rejected"));
  }
  return item;
}

async function decide(procedure, next, button) {
  // Read before disabling: a disabled button loses the focus.
  const refocus = document.activeElement === button ? procedure.id : null;
  button.disabled = true;
  const path = "/api/me/procedures/" + encodeURIComponent(procedure.id) + "/";
  const result = await api("PATCH", path, { status: next });
  if (result.ok) {
    status.textContent = next === "approved" ? "Approved: " + procedure.title : "Rejected: " + procedure.title;
    await refreshProcedures({ keepStatus: true, refocus });
    return;
  }
  button.disabled = false;
  const item = button.closest(".procedure-item");
  const old = item.querySelector(".row-error");
  if (old) old.remove();
  item.appendChild(el("p", "row-error", "Not changed: " + errorText(result)));
}

// `refocus`: the id of the procedure whose button had the focus; it goes back to that
// procedure's first button, or to the list's first when it left the list, never to the page.
export async function refreshProcedures({ keepStatus = false, refocus = null } = {}) {
  const result = await api("GET", "/api/me/procedures/");
  if (!result.ok) {
    status.textContent = "Could not load procedures: " + errorText(result);
    return;
  }
  const procedures = result.data.procedures;
  const focused = list.contains(document.activeElement) ? document.activeElement.closest("li") : null;
  if (focused) refocus = Number(focused.dataset.procedureId);
  list.textContent = "";
  for (const procedure of procedures) list.appendChild(procedureItem(procedure));
  if (!keepStatus || !procedures.length) {
    status.textContent = procedures.length
      ? ""
      : "None yet. When a kind of task goes well three times, Jarvis drafts how it did it here for you to approve.";
  }
  if (refocus === null) return;
  const same = list.querySelector('[data-procedure-id="' + refocus + '"] button');
  (same || list.querySelector("button") || list.closest("section")).focus();
}

refreshProcedures();
window.addEventListener("focus", () => refreshProcedures({ keepStatus: true }));
