// "Goals" in the sessions card, beside the reminders: the caller's goals, open ones first
// (GET /api/goals/), each with what it does now and Pause / Resume / Cancel
// (PATCH /api/goals/{id}/ {status}). A finished goal shows its result. The list is read again
// whenever it may have changed: after `/goal`, after a turn, when a notice arrives (a goal's
// note or result), and when the window gets focus.

import { api, errorText } from "./api.js";
import { $, el } from "./dom.js";

const list = $("goal-list");
const status = $("goals-status");
// Finished goals shown under the open ones: enough to see the latest results.
const FINISHED_SHOWN = 5;

function stateText(goal) {
  if (goal.status === "done") return "done: " + (goal.result || "");
  if (goal.status === "active" || goal.status === "paused") {
    return goal.status + " · check-in " + goal.turns_used + " of " + goal.max_turns;
  }
  return goal.status;
}

function actionButton(label, goal, next) {
  const button = el("button", "small goal-action", label);
  button.type = "button";
  button.setAttribute("aria-label", label + " goal: " + goal.text);
  button.addEventListener("click", () => setStatus(goal, next, button));
  return button;
}

function goalItem(goal) {
  const item = el("li", "goal-item");
  item.dataset.goalId = goal.id;
  item.dataset.status = goal.status;
  const text = el("div", "goal-text");
  text.appendChild(el("span", "goal-name", goal.text));
  const state = el("span", "goal-state", stateText(goal) + " · ");
  // The goal's own session: its check-ins, as they happened.
  const open = el("a", "goal-session", "its session");
  open.href = "/?session=" + encodeURIComponent(goal.session_id);
  state.appendChild(open);
  text.appendChild(state);
  item.appendChild(text);
  if (goal.status === "active") item.appendChild(actionButton("Pause", goal, "paused"));
  if (goal.status === "paused") item.appendChild(actionButton("Resume", goal, "active"));
  if (goal.status === "active" || goal.status === "paused") {
    item.appendChild(actionButton("Cancel", goal, "cancelled"));
  }
  return item;
}

async function setStatus(goal, next, button) {
  button.disabled = true;
  const path = "/api/goals/" + encodeURIComponent(goal.id) + "/";
  const result = await api("PATCH", path, { status: next });
  if (result.ok) {
    refreshGoals();
    return;
  }
  button.disabled = false;
  const item = button.closest(".goal-item");
  const old = item.querySelector(".row-error");
  if (old) old.remove();
  item.appendChild(el("p", "row-error", "Not changed: " + errorText(result)));
}

export async function refreshGoals() {
  const result = await api("GET", "/api/goals/");
  if (!result.ok) {
    status.textContent = "Could not load goals: " + errorText(result);
    return;
  }
  const open = result.data.goals.filter((g) => g.status === "active" || g.status === "paused");
  const finished = result.data.goals.filter((g) => !open.includes(g)).slice(0, FINISHED_SHOWN);
  list.textContent = "";
  status.textContent = open.length || finished.length ? "" : "None. Type /goal <text> to set one.";
  for (const goal of [...open, ...finished]) list.appendChild(goalItem(goal));
}
